// Package fdblayer implements store.Store over a small ordered,
// transactional key/value engine ([kv.Engine]): each partition is a
// subspace, each guarded batch one transaction. The engines are drivers
// in packages of their own, so that a program links only those it opens:
// memengine (tests, benchmarks), boltengine (embedded, durable, the
// default), fdbengine (FoundationDB: a module of its own, needing cgo and
// libfdb_c) and fdbsim's MVCCEngine (FoundationDB's transaction semantics
// in process). Every line of mapping logic is here, shared, so the
// conformance suite run on the other engines exercises what runs on
// FoundationDB, and the MVCC engine makes it meet FoundationDB's
// conflicts.
//
// Key layout: every engine key is
//
//	root prefix | partition identity | user key
//
// where the root prefix defaults to the tuple encoding of ("mkit") and the
// partition identity is store.Partition.AppendTuple's tuple encoding. A
// partition's subspace is [root+identity, root+identity+0xFF): user keys
// never start with 0xFF (no tuple element does; such keys are ErrInvalid)
// and scans stop at 0xFF. That keeps partitions apart even where one
// identity's encoding is a prefix of another's through tuple escaping:
// ("iso") encodes as 02 69 73 6f 00 and ("iso\x00") as 02 69 73 6f 00 ff
// 00, so the second's keys lie past the first's subspace. Identities of
// different arity (("a") and ("a", "b")) must not share a partition kind:
// the Partition contract says no encoding is a prefix of another's.
//
// The Layer also keeps the due index of [store.DueIndex]: each partition's
// wake time at root+identity+0xFF, just past its subspace, and the index
// entries under root+0xFF, where no identity starts (see due.go). Its
// TransactOnce runs a function's reads and the batch it returns in one
// engine transaction (see transact.go), and its Commit the guarded
// batches of several partitions (store.Committer, see commit.go). On an
// engine whose commits share a sync (kv.GroupCommitter: bbolt), Apply and
// Commit calls made side by side commit in groups: one write transaction
// and one fsync for all of them, each call's guards and outcome its own
// (see group.go and Config.MaxGroupBatches).
//
// Design note: the Layer does not use FoundationDB's automatic_idempotency
// option (documented as experimental) nor a per-batch marker key to resolve
// unknown commit results; a retry's preconditions decide instead (see
// [Layer.Apply]).
package fdblayer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Layer is the store.Store of this library over one engine, with every
// extension: store.DueIndex, store.ScanAppender, store.Transactor,
// store.Committer and store.Prefetcher. It
// is safe for concurrent use; its configuration is fixed at Open.
type Layer struct {
	engine      kv.Engine
	root        []byte
	caps        store.Capabilities
	maxIdentity int
	retryLimit  int
	maxScanRows int
	clock       clock.Clock
	log         *slog.Logger
	scratch     sync.Pool // *scratch
	// dueBuckets is the number of hashed buckets of the due index.
	dueBuckets int
	// optimistic: the engine's transactions never wait for each other
	// (see kv.Optimistic).
	optimistic bool
	// v1 says whether the store may hold due index entries of the first
	// layout: v1Unknown until a wake change looked (see probeV1).
	v1 atomic.Int32
	// gate is the Layer's evolve.Gate: the store's formats, and the
	// fence of its writes.
	gate *evolve.Gate
	// group forms the group commits of Apply and Commit calls (see
	// group.go); nil on an engine whose commits do not share a sync.
	group *grouper
}

var (
	_ store.Store   = (*Layer)(nil)
	_ store.Formats = (*Layer)(nil)
)

// Open returns a Layer over engine configured by c (see [Config]; the
// zero Config is every default) and opens its gate (package evolve, see
// [Config.Gate]): in one transaction it reads the store's format of every
// namespace and, unless the gate is ReadOnly (or the engine is: see
// kv.ReadOnly), writes this process's row.
// When the engine holds nothing under the root yet, the store is new and
// starts at the formats this binary knows (GateConfig.NewStore); a store
// that holds rows and no format row is at format 1 of every namespace.
// Open's reads and writes are bounded by c.OpenTimeout.
//
// On success the Layer owns the engine: Layer.Close closes it. On failure
// the engine stays the caller's, unclosed. Open fails with store.ErrInvalid
// when a field of c is out of range or the engine's limits leave no room
// for keys or batches, before any I/O; with an error wrapping
// evolve.ErrNewerFormat, in one line naming the namespace, the store's
// format and what this binary knows, when the store's format of a
// namespace this binary links is newer than it knows (deploy a binary
// that knows it); and with the store's errors.
func Open(engine kv.Engine, c Config) (*Layer, error) {
	if engine == nil {
		return nil, fmt.Errorf("%w: fdblayer: nil engine", store.ErrInvalid)
	}
	cfg, err := c.resolve()
	if err != nil {
		return nil, err
	}
	caps, err := cfg.capabilities(engine.Limits())
	if err != nil {
		return nil, err
	}
	buckets := 1
	if d, ok := engine.(kv.Distributed); ok && d.Distributed() {
		buckets = DueHashBuckets
	}
	o, ok := engine.(kv.Optimistic)
	l := &Layer{
		dueBuckets:  buckets,
		optimistic:  ok && o.Optimistic(),
		engine:      engine,
		root:        cfg.root,
		caps:        caps,
		maxIdentity: cfg.maxPartitionBytes,
		retryLimit:  cfg.retryLimit,
		maxScanRows: cfg.maxScanRows,
		clock:       cfg.clock,
		log:         cfg.logger,
	}
	if g, ok := engine.(kv.GroupCommitter); ok && g.GroupCommits() && cfg.maxGroupBatches > 0 {
		l.group = &grouper{l: l, max: cfg.maxGroupBatches}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.openTimeout)
	defer cancel()
	gc := cfg.gate
	if r, ok := engine.(kv.ReadOnly); ok && r.ReadOnly() {
		gc.ReadOnly = true
	}
	if !gc.ReadOnly {
		if gc.NewStore, err = l.empty(ctx); err != nil {
			return nil, fmt.Errorf("fdblayer: open: %w", err)
		}
	}
	if l.gate, err = evolve.OpenGate(ctx, gateStore{l}, gc); err != nil {
		return nil, fmt.Errorf("fdblayer: open: %w", err)
	}
	return l, nil
}

// empty reports whether the engine holds no row of a partition under the
// root.
func (l *Layer) empty(ctx context.Context) (bool, error) {
	end := append(bytes.Clone(l.root), partitionEnd)
	var n int
	err := l.read(ctx, nil, "look for rows in the store", func(txn kv.ReadTxn) error {
		rows, err := txn.GetRange(nil, l.root, end, 1, 0)
		n = len(rows)
		return err
	})
	return n == 0, err
}

// Close closes the Layer's gate (deleting this process's row) and then
// the engine, and returns both's errors. Operations must have returned
// first.
func (l *Layer) Close() error {
	gerr := l.gate.Close()
	return errors.Join(gerr, l.engine.Close())
}

// Gate returns the Layer's gate: the store's formats (Gate.Format), what
// this binary knows (Gate.Known), and raises (Gate.Raise).
func (l *Layer) Gate() *evolve.Gate { return l.gate }

// Format implements store.Formats: the store's format of namespace as the
// Layer's gate last read it (Gate.Format), 1 for a namespace without a
// format row. Writers write the newest version of a value it allows.
func (l *Layer) Format(namespace string) uint32 { return l.gate.Format(namespace) }

// fenced returns the error a write must fail with while the gate is
// fenced (the store's format of a linked namespace was raised past what
// this binary knows: evolve.ErrNewerFormat), nil otherwise and for the
// gate's own writes (ctx from gateStore).
func (l *Layer) fenced(ctx context.Context, what string, p store.Partition) error {
	if l.gate == nil {
		return nil
	}
	err := l.gate.Fenced()
	if err == nil || ctx.Value(gateWriteKey{}) == l {
		return nil
	}
	return fmt.Errorf("fdblayer: %s %s: %w", what, store.PartitionName(p), err)
}

// gateWriteKey marks the context of the gate's own writes, which a fence
// does not refuse: the gate renews its row and deletes it at Close.
type gateWriteKey struct{}

// gateStore is the Layer as its gate sees it: writes unfenced.
type gateStore struct{ *Layer }

// Apply applies b as Layer.Apply does, unfenced.
func (g gateStore) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	return g.Layer.Apply(context.WithValue(ctx, gateWriteKey{}, g.Layer), p, b)
}

// TransactOnce runs fn as Layer.TransactOnce does, unfenced.
func (g gateStore) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	return g.Layer.TransactOnce(context.WithValue(ctx, gateWriteKey{}, g.Layer), p, fn)
}

// Capabilities reports the limits Apply validates batches against,
// derived from the engine's limits at Open; ReservedBatchOps is 0 (callers
// that extend batches reserve operations themselves). It never fails and
// is safe for concurrent use.
func (l *Layer) Capabilities() store.Capabilities { return l.caps }

// Stats estimates the bytes stored in partition p with the engine's range
// size estimate (FoundationDB's sampled estimate on that engine, an exact
// count on the others). It fails with store.ErrInvalid for a partition
// that cannot encode and store.ErrUnavailable when the engine fails.
func (l *Layer) Stats(ctx context.Context, p store.Partition) (store.PartitionStats, error) {
	s := l.getScratch()
	defer l.putScratch(s)
	sub, err := l.appendSubspace(s.buf[:0], p)
	if err != nil {
		return store.PartitionStats{}, err
	}
	end := append(bytes.Clone(sub), partitionEnd)
	if err := l.notNested(ctx, "stats of", p); err != nil {
		return store.PartitionStats{}, err
	}
	n, err := l.engine.EstimateRangeSize(ctx, sub, end)
	if err != nil {
		return store.PartitionStats{}, wrapError("fdblayer: stats of "+store.PartitionName(p), store.ErrUnavailable, err)
	}
	return store.PartitionStats{ApproximateBytes: n}, nil
}

// Probe checks that the engine answers, bounded by ctx. It fails with
// store.ErrUnavailable (wrapping the cause, ctx's error among them).
func (l *Layer) Probe(ctx context.Context) error {
	if err := l.notNested(ctx, "probe", nil); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return wrapError("fdblayer: probe", store.ErrUnavailable, err)
	}
	if err := l.engine.Probe(ctx); err != nil {
		return wrapError("fdblayer: probe", store.ErrUnavailable, err)
	}
	return nil
}

// appendSubspace appends the root prefix and p's identity to dst. It fails
// with store.ErrInvalid, before any I/O, for a nil partition, one whose
// AppendTuple fails, and an identity that is empty, over the Layer's
// maximum or starts with 0xFF (where the due index lives).
func (l *Layer) appendSubspace(dst []byte, p store.Partition) ([]byte, error) {
	if p == nil {
		return dst, fmt.Errorf("%w: fdblayer: nil partition", store.ErrInvalid)
	}
	dst = append(dst, l.root...)
	start := len(dst)
	dst, err := p.AppendTuple(dst)
	if err != nil {
		return dst, fmt.Errorf("%w: fdblayer: partition %s does not encode: %w", store.ErrInvalid, store.PartitionName(p), err)
	}
	if n := len(dst) - start; n == 0 || n > l.maxIdentity {
		return dst, fmt.Errorf("%w: fdblayer: partition %s identity has %d bytes, want 1 to %d",
			store.ErrInvalid, store.PartitionName(p), n, l.maxIdentity)
	}
	if dst[start] == partitionEnd {
		return dst, fmt.Errorf("%w: fdblayer: partition %s identity starts with 0xff, which no tuple does", store.ErrInvalid, store.PartitionName(p))
	}
	return dst, nil
}

// partitionEnd ends every partition's subspace: user keys never start with
// it. The partition's wake key is subspace+partitionEnd, and the due index
// lives under root+partitionEnd (see due.go).
const partitionEnd = 0xFF

// scratch holds the buffers of one operation, pooled so that the hot
// paths do not allocate them per call.
type scratch struct {
	buf  []byte
	key  []byte
	keys [][]byte
	vals [][]byte
	rows []kv.KeyValue
	// sub is a TransactOnce's subspace; cache what a TransactOnce reader read.
	sub   []byte
	cache readCache
}

// maxPooledBytes keeps a rare huge batch from pinning its buffers.
const maxPooledBytes = 64 << 10

func (l *Layer) getScratch() *scratch {
	if s, ok := l.scratch.Get().(*scratch); ok {
		return s
	}
	return &scratch{}
}

func (l *Layer) putScratch(s *scratch) {
	if cap(s.buf) > maxPooledBytes || cap(s.key) > maxPooledBytes || cap(s.keys) > 4096 || cap(s.rows) > 4096 ||
		cap(s.cache.arena) > maxPooledBytes || cap(s.cache.keys) > 4096 {
		return
	}
	s.cache.reset()
	clear(s.keys[:cap(s.keys)])
	clear(s.vals[:cap(s.vals)])
	clear(s.rows[:cap(s.rows)])
	l.scratch.Put(s)
}
