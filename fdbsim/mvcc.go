package fdbsim

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
)

// MVCCEngine is an in-memory [kv.Engine] with FoundationDB's transaction
// semantics, so that code run on it meets the concurrency a cluster
// produces:
//
//   - Snapshots: a transaction reads at the read version it got at Begin
//     (the last commit's), never waits for another transaction and never
//     sees a later commit. The store keeps every version of a key that an
//     open transaction may read (see mvccRows), and drops the others as
//     transactions end.
//   - Optimistic commits checked as FoundationDB's resolvers check them: a
//     point read conflicts on its key; a range read on the range it
//     covered (up to its last key when it stopped at its limit, the whole
//     range otherwise). A commit fails with not_committed (1020) when any
//     of its read conflict ranges holds a key written by a commit after its
//     read version. A transaction that writes nothing, and every
//     transaction of BeginRead, commits trivially and never conflicts.
//   - Limits enforced with FoundationDB's codes: a key over [kv.FDBMaxKeyBytes]
//     fails the commit with key_too_large (2102), a value over
//     [kv.FDBMaxValueBytes] with value_too_large (2103), a transaction whose
//     mutations plus conflict ranges exceed [kv.FDBMaxTxnBytes] with
//     transaction_too_large (2101), and a read or commit more than
//     MVCCConfig.Lifetime (5 s) after the transaction's read version with
//     transaction_too_old (1007), on MVCCConfig.Clock.
//   - OnError retries 1007, 1020 and 1021 after FoundationDB's backoff: a
//     uniformly random fraction of a delay that starts at 10 ms and
//     doubles up to 1 s; it returns every other error.
//   - Faults a cluster produces, seeded: commit_unknown_result (1021) for a
//     commit that landed and one that did not, and latency on every
//     Begin, read and commit (MVCCConfig).
//
// Each of those conditions is an FDBError carrying FoundationDB's code
// (and a commit error after which the commit may have landed, 1021, also
// wraps store.ErrUnknownResult), so fdblayer's Layer handles them as it
// handles the FoundationDB engine's; a context's end is its error, a
// closed engine [kv.ErrClosed]. Stats counts commits, conflicts and
// retries.
//
// All methods are safe for concurrent use; transactions never wait for
// each other (a read waits only for the instant a commit takes to check
// and apply). Reads do not see the transaction's own writes (the Engine
// contract).
type MVCCEngine struct {
	mu     sync.RWMutex // reads hold it shared; begins, ends and commits exclusively
	store  mvccStore    // under mu
	closed bool

	opts MVCCConfig
	rngM sync.Mutex
	rng  *rand.Rand // under rngM

	begun, reads, keysRead                       atomic.Uint64
	commits, conflicts, retries, tooOld, unknown atomic.Uint64
}

// MVCCConfig configures an MVCCEngine. The zero value is FoundationDB's
// defaults on the wall clock, without faults.
type MVCCConfig struct {
	// Clock times transactions' lifetimes; nil means clock.Real{}.
	Clock clock.Clock
	// Lifetime is how long after its read version a transaction may read
	// and commit (FoundationDB's MVCC window); zero means MVCCLifetime.
	Lifetime time.Duration
	// Backoff is OnError's first delay, doubling at each retry of one
	// transaction up to MaxBackoff; each wait is a uniformly random
	// fraction of it. Zero means FoundationDB's 10 ms and 1 s. The waits
	// are real time (they end early when the transaction's context does).
	Backoff, MaxBackoff time.Duration
	// Seed seeds the backoff jitter and the random faults below: one seed,
	// one sequence of draws (their interleaving across goroutines is the
	// scheduler's).
	Seed uint64
	// UnknownLanded and UnknownNotLanded are the probabilities that a
	// read-write commit fails with commit_unknown_result (1021) after its
	// writes landed, and without writing (a commit that would have
	// conflicted reports 1021 too, not landed).
	UnknownLanded, UnknownNotLanded float64
	// Latency delays each Begin (getting the read version), read and
	// commit by a uniformly random time in [0, Latency).
	Latency time.Duration
	// Fault, when set, decides every read-write commit instead of the
	// random unknown results: CommitNormally, CommitConflict (1020),
	// CommitThenUnknown (1021 after landing, unless the commit conflicts),
	// UnknownWithoutCommit (1021, nothing written) or CommitFatal
	// (ErrInjectedFatal). It runs in the committing goroutine before the
	// commit, with the transaction's context, and may block; the returned
	// then runs after the commit, before Commit returns.
	Fault FaultFunc
}

// FoundationDB's defaults MVCCConfig falls back on.
const (
	MVCCLifetime   = 5 * time.Second
	mvccBackoff    = 10 * time.Millisecond
	mvccMaxBackoff = time.Second
)

// NewMVCCEngine returns an empty engine configured by o.
func NewMVCCEngine(o MVCCConfig) *MVCCEngine {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Lifetime <= 0 {
		o.Lifetime = MVCCLifetime
	}
	if o.Backoff <= 0 {
		o.Backoff = mvccBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = mvccMaxBackoff
	}
	return &MVCCEngine{
		store: newMVCCStore(),
		opts:  o,
		rng:   rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
	}
}

// MVCCStats counts what an MVCCEngine's transactions did: the round trips
// a FoundationDB cluster would serve, counted rather than timed.
type MVCCStats struct {
	// Begun counts transactions begun (Begin and BeginRead). Each takes a
	// read version, and so does each retry (Retries): Begun plus Retries
	// are the read versions the engine handed out.
	Begun uint64
	// Reads counts read round trips: each GetMany, GetRange and GetRanges
	// call, whatever it read.
	Reads uint64
	// KeysRead counts the keys GetMany calls asked for plus the rows
	// GetRange calls returned.
	KeysRead uint64
	// Commits counts read-write commits that wrote (those reported as
	// unknown results among them). A transaction that wrote nothing
	// commits nothing and is not counted.
	Commits uint64
	// Conflicts counts commits refused with not_committed (1020),
	// injected ones included.
	Conflicts uint64
	// Retries counts OnError calls that reset a transaction to retry.
	Retries uint64
	// TooOld counts reads and commits refused with transaction_too_old.
	TooOld uint64
	// Unknown counts commits that reported commit_unknown_result.
	Unknown uint64
}

// Stats returns the counts since the engine was created.
func (e *MVCCEngine) Stats() MVCCStats {
	return MVCCStats{
		Begun: e.begun.Load(), Reads: e.reads.Load(), KeysRead: e.keysRead.Load(),
		Commits: e.commits.Load(), Conflicts: e.conflicts.Load(), Retries: e.retries.Load(),
		TooOld: e.tooOld.Load(), Unknown: e.unknown.Load(),
	}
}

// Begin starts a read-write transaction at the last committed version. It
// fails when ctx is done or the engine is closed; it never waits.
func (e *MVCCEngine) Begin(ctx context.Context) (kv.Txn, error) { return e.begin(ctx, true) }

// BeginRead starts a read-only transaction at the last committed version.
func (e *MVCCEngine) BeginRead(ctx context.Context) (kv.ReadTxn, error) {
	return e.begin(ctx, false)
}

func (e *MVCCEngine) begin(ctx context.Context, write bool) (*mvccTxn, error) {
	if err := e.latency(ctx); err != nil {
		return nil, err
	}
	t := &mvccTxn{e: e, ctx: ctx, write: write, backoff: e.opts.Backoff}
	if err := t.reset(); err != nil {
		return nil, err
	}
	e.begun.Add(1)
	return t, nil
}

// mvccStore is the engine's versioned rows with the resolver's
// bookkeeping: the last commit's version, the open transactions' read
// versions, and what each commit wrote. Not safe for concurrent use.
type mvccStore struct {
	rows    mvccRows
	hist    mvccHistory
	version uint64          // the last commit's version
	drop    []versionedItem // collect's scratch
}

func newMVCCStore() mvccStore { return mvccStore{rows: newMVCCRows(), hist: newMVCCHistory()} }

// begin returns the last committed version and registers a transaction
// reading at it.
func (s *mvccStore) begin() uint64 {
	s.hist.begin(s.version)
	return s.version
}

// end unregisters a transaction that read at rv and drops what no open
// transaction needs any more.
func (s *mvccStore) end(rv uint64) {
	s.hist.end(rv)
	s.hist.prune(s.version, s.collect)
}

func (s *mvccStore) collect(key memkv.Item, oldest uint64) {
	s.drop = s.rows.collect(key, oldest, s.drop)
	clear(s.drop)
}

// apply commits ws, the writes of the open transaction that read at rv,
// as the next version. Only the other transactions open now can read what
// it replaces or conflict with it.
func (s *mvccStore) apply(ws []memkv.Write, rv uint64) {
	latest, others := s.hist.latestOther(rv)
	s.version++
	dirty := s.rows.write(ws, s.version, func(v uint64) bool { return others && latest >= v }, nil)
	var keys []memkv.Item
	if others {
		keys = make([]memkv.Item, len(ws))
		for i, w := range ws {
			keys[i] = w.Item
		}
	}
	s.hist.record(s.version, keys, dirty)
}

// Distributed reports true: the engine stands for FoundationDB, whose
// keys many servers share (see [kv.Distributed]).
func (e *MVCCEngine) Distributed() bool { return true }

// Optimistic reports true: transactions never wait for each other (see
// [kv.Optimistic]).
func (e *MVCCEngine) Optimistic() bool { return true }

// Limits reports FoundationDB's limits, which it enforces.
func (e *MVCCEngine) Limits() kv.Limits { return kv.FDBLimits() }

// EstimateRangeSize counts the bytes of keys and values in [begin, end) of
// the last version exactly.
func (e *MVCCEngine) EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, kv.ErrClosed
	}
	return e.store.rows.rangeBytes(begin, end, e.store.version), nil
}

// Probe fails when ctx is done or the engine is closed.
func (e *MVCCEngine) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return kv.ErrClosed
	}
	return nil
}

// Close closes the engine: later transactions, and commits of open ones,
// fail with [kv.ErrClosed].
func (e *MVCCEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return kv.ErrClosed
	}
	e.closed = true
	return nil
}

// commit checks t's reads against the commits after its read version and,
// when none conflicts, applies its writes as the next version. It ends
// t's registration either way.
func (e *MVCCEngine) commit(t *mvccTxn) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer t.endLocked()
	if e.closed {
		return kv.ErrClosed
	}
	if e.store.hist.conflicts(t.reads, t.rv) {
		e.conflicts.Add(1)
		return FDBError{Code: fdbcode.NotCommitted}
	}
	e.store.apply(t.writes, t.rv)
	e.commits.Add(1)
	return nil
}

// random returns a uniform draw in [0, 1) from the engine's seeded source.
func (e *MVCCEngine) random() float64 {
	e.rngM.Lock()
	defer e.rngM.Unlock()
	return e.rng.Float64()
}

// latency waits the injected latency of one operation.
func (e *MVCCEngine) latency(ctx context.Context) error {
	if e.opts.Latency <= 0 {
		return ctx.Err()
	}
	return clock.Sleep(ctx, time.Duration(e.random()*float64(e.opts.Latency)))
}

// fault decides a read-write commit: the Fault function's choice, or a
// random unknown result.
func (e *MVCCEngine) fault(ctx context.Context) (Fault, func()) {
	if e.opts.Fault != nil {
		return e.opts.Fault(ctx)
	}
	if e.opts.UnknownLanded <= 0 && e.opts.UnknownNotLanded <= 0 {
		return CommitNormally, nil
	}
	switch r := e.random(); {
	case r < e.opts.UnknownLanded:
		return CommitThenUnknown, nil
	case r < e.opts.UnknownLanded+e.opts.UnknownNotLanded:
		return UnknownWithoutCommit, nil
	}
	return CommitNormally, nil
}

// errMVCCTxnEnded: a transaction used after Commit (without OnError) or Close.
var errMVCCTxnEnded = errors.New("fdbsim: mvcc engine: transaction has ended")
