package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
)

// Design note: Transact re-runs the caller's function, never replays its
// batch. A batch is only right for the state it was built from; after a
// guard failed, the state has moved and only the function knows what the
// batch should now be. The same holds after an unknown commit result: the
// function re-reads, and either finds its own work done (and returns nil)
// or builds the batch afresh, guarded by what it reads now. Replaying the
// old batch instead could not tell "my batch landed" from "another writer
// changed the row" when its guard fails, so it would have to give up
// exactly where a re-run can decide.

// Defaults of a TransactConfig.
const (
	// DefaultTransactRetries is how many times Transact re-runs its
	// function after a failed precondition or an unknown commit result.
	DefaultTransactRetries = 10
	// DefaultMinBackoff and DefaultMaxBackoff bound Transact's backoff:
	// the n-th wait (from 0) is drawn uniformly from
	// [0, min(DefaultMaxBackoff, DefaultMinBackoff << n)).
	DefaultMinBackoff = 2 * time.Millisecond
	DefaultMaxBackoff = 500 * time.Millisecond
)

// Reader reads one partition: what Transact and TransactOnce hand their
// function, bound to the partition the batch will be applied to, so that
// the function reads what its guards can protect and cannot apply
// anything itself. Its methods are the Store's, with the partition left
// out, and fail as they do. On a Transactor the reads of one run come from
// the transaction's snapshot and the store checks them at commit (see
// Transactor); on another store each read is its own snapshot. The
// function guards what it relies on either way, and the guards make the
// batch commit only on the state it read (a guard on a key the function
// read costs no read of its own on a Transactor). The Reader of a store
// with a due index is also a WakeReader. A Reader is safe for concurrent
// use and valid only while the function it was handed to runs: afterwards
// its reads fail with ErrInvalid.
type Reader interface {
	// Partition is the partition the reads go to and the batch is applied to.
	Partition() Partition
	Get(ctx context.Context, key Key) (value Value, ok bool, err error)
	GetMany(ctx context.Context, keys []Key) ([]Value, error)
	Scan(ctx context.Context, start, end Key, after Cursor, limit int) (ScanPage, error)
}

// TransactFunc reads what it needs through r and returns the guarded batch
// to apply, built from what it read: Transact applies it and, when a guard
// fails, runs the function again. A nil batch, or one with no
// preconditions, writes or wakeup, means there is nothing to write. An
// error ends Transact and is returned as it is.
//
// The function may run several times, and after an unknown commit result
// ([ErrUnknownResult]) it runs again on a state in which its earlier batch
// may have landed: it must derive everything from what it reads and
// recognise its own work done (for example, guard a put with Absent of the
// key it creates, or record the id of the request it applies), or a re-run
// does the work twice. It must have no effect other than through the batch it returns.
// On a Transactor it runs while the store holds a transaction open, so it
// must be short, and it must not call the store itself (see
// Transactor): it reads through r only.
type TransactFunc func(ctx context.Context, r Reader) (*Batch, error)

// Transactor is implemented by stores that run a TransactFunc and apply
// the batch it returns in one transaction: FoundationDB's
// Database.Transact, bbolt's DB.Update. Transact and TransactOnce ask for
// it with a type assertion and fall back on reads and Apply without it.
type Transactor interface {
	// TransactOnce runs fn in one transaction of partition p and applies
	// the batch fn returns in the same transaction:
	//
	//   - fn's reads come from the transaction's snapshot; a row fn read
	//     (a key it got, a range it scanned as far as its page reached) that
	//     another writer changes before the commit makes the commit fail,
	//     and the store runs fn again on a fresh snapshot, within its retry
	//     limit, as Apply retries a conflict;
	//   - the batch's preconditions are then checked at that snapshot and
	//     the outcome is Apply's: Committed, PreconditionFailed (nothing
	//     written, not retried: Transact decides that) or DeadlinePassed;
	//   - fn's error is returned as it is, with nothing written; a nil or
	//     empty batch returns the zero BatchOutcome, with nothing written.
	//
	// After an unknown commit result the store runs fn again, as after a
	// conflict, so fn meets its earlier batch possibly landed, as
	// TransactFunc says; it never reports Committed for a batch that may
	// not have landed, and fails with ErrUnknownResult when it cannot run
	// fn again (see [ErrUnknownResult]).
	//
	// Limits: the batch is validated as Apply validates it (ErrInvalid,
	// nothing written). The reads of one run share
	// Capabilities().MaxTransactReadBytes: each Scan page is cut to what
	// the earlier reads left (still one row at least, and a GetMany reads
	// every key it asks for, so the last read may pass it), and a read
	// made once the reads hold that much fails with ErrInvalid.
	//
	// fn runs inside the transaction: on a store whose write transactions
	// serialize (one writer at a time) every other writer waits for it. It
	// must not call the store: such a call made with the context fn was
	// given fails with ErrInvalid, and one made with another context may
	// deadlock. A nil fn, or a ctx already ended, fails before any I/O.
	TransactOnce(ctx context.Context, p Partition, fn TransactFunc) (BatchOutcome, error)
}

// TransactConfig configures one Transact call. A zero field takes its
// default.
type TransactConfig struct {
	// Retries is how many times Transact re-runs its function after a
	// failed precondition or an unknown commit result (default
	// DefaultTransactRetries); a negative count (-1) makes one attempt
	// only.
	Retries int
	// MinBackoff and MaxBackoff bound Transact's jittered exponential
	// backoff: before the n-th re-run (from 0) it waits a time drawn
	// uniformly from [0, min(MaxBackoff, MinBackoff << n)). MinBackoff
	// defaults to DefaultMinBackoff, or to MaxBackoff when that is
	// smaller; a negative one (-1) re-runs at once.
	MinBackoff time.Duration
	// MaxBackoff defaults to DefaultMaxBackoff, or to MinBackoff when that
	// is larger. A negative one, or one under MinBackoff, makes Transact
	// fail with ErrInvalid.
	MaxBackoff time.Duration
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping ErrInvalid naming the field out of its range.
func (c TransactConfig) withDefaults() (TransactConfig, error) {
	switch {
	case c.MaxBackoff < 0:
		return c, fmt.Errorf("%w: transact: MaxBackoff %v is negative", ErrInvalid, c.MaxBackoff)
	case c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff:
		return c, fmt.Errorf("%w: transact: MinBackoff %v is over MaxBackoff %v", ErrInvalid, c.MinBackoff, c.MaxBackoff)
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultTransactRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	switch {
	case c.MinBackoff < 0:
		c.MinBackoff, c.MaxBackoff = 0, 0
	case c.MinBackoff == 0 && c.MaxBackoff == 0:
		c.MinBackoff, c.MaxBackoff = DefaultMinBackoff, DefaultMaxBackoff
	case c.MinBackoff == 0:
		c.MinBackoff = min(DefaultMinBackoff, c.MaxBackoff)
	case c.MaxBackoff == 0:
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	return c, nil
}

// Transact runs fn and applies the batch it returns to partition p of s,
// the guarded read-modify-write loop of FoundationDB's Database.Transact
// and bbolt's DB.Update. Each attempt is one [TransactOnce]. When the
// batch fails a precondition (another writer changed a row fn read or
// guards) or its commit result is unknown ([ErrUnknownResult]), Transact
// waits a jittered, exponentially growing backoff and runs fn again, up to
// cfg.Retries times (see [TransactConfig]): fn must keep [TransactFunc]'s
// contract, and never sees a failed precondition.
//
// It returns the last outcome the store reported (the zero BatchOutcome
// when fn had nothing to write) and a nil error once a batch committed or
// fn had nothing to write. Otherwise it returns fn's error as it is, or an
// error naming the partition, never a value, that wraps
// [ErrPreconditionFailed] (the retries ran out), [ErrDeadlinePassed] (not
// retried), ctx's error, or the store's error (not retried); an invalid
// cfg fails with [ErrInvalid] before any I/O. After an unknown result
// any error but fn's also wraps ErrUnknownResult: an earlier batch may
// have landed.
//
// Transact is safe for concurrent use; it does not retain the batches fn
// returns.
func Transact(ctx context.Context, s Store, p Partition, fn TransactFunc, cfg TransactConfig) (BatchOutcome, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return BatchOutcome{}, err
	}
	if s == nil || fn == nil {
		return BatchOutcome{}, fmt.Errorf("%w: transact on %s: nil store or function", ErrInvalid, PartitionName(p))
	}
	// fnErr is the error fn last returned: Transact returns it as it is.
	var fnErr error
	run := func(ctx context.Context, r Reader) (*Batch, error) {
		b, err := fn(ctx, r)
		fnErr = err
		return b, err
	}
	var (
		last    BatchOutcome
		unknown error // the latest ErrUnknownResult an attempt ended with
	)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := clock.Sleep(ctx, jitter(cfg.MinBackoff, cfg.MaxBackoff, attempt-1)); err != nil {
				return last, transactError(p, attempt, unknown, "ended during backoff: %w", err)
			}
		}
		if err := ctx.Err(); err != nil {
			return last, transactError(p, attempt, unknown, "%w", err)
		}
		fnErr = nil
		out, err := TransactOnce(ctx, s, p, run)
		switch {
		case err != nil && err == fnErr:
			return last, err
		case errors.Is(err, ErrUnknownResult):
			unknown, last = err, BatchOutcome{}
			if ctx.Err() != nil || attempt == cfg.Retries {
				return last, transactError(p, attempt+1, nil, "%w", err)
			}
			continue
		case err != nil:
			return out, transactError(p, attempt+1, unknown, "%w", err)
		case out.Outcome == 0:
			return out, nil // nothing to write
		}
		last = out
		switch out.Outcome {
		case Committed:
			return out, nil
		case DeadlinePassed:
			return out, transactError(p, attempt+1, unknown, "%w at %v", ErrDeadlinePassed, out.Now)
		case PreconditionFailed:
			if attempt == cfg.Retries {
				return out, transactError(p, attempt+1, unknown, "%w: precondition %d, %v", ErrPreconditionFailed, out.FailedIndex, out.Failed)
			}
		default:
			return out, transactError(p, attempt+1, unknown, "%w: store reported %v", ErrUnavailable, out.Outcome)
		}
	}
}

// TransactOnce runs fn and applies the batch it returns to partition p of
// s once: in one transaction when s is a Transactor (see
// Transactor.TransactOnce), else by running fn on reads of s and applying
// its batch with Apply. It reports what the store decided: a failed
// precondition is an outcome, which Transact retries and TransactOnce
// does not. fn's error is returned as it is, with nothing written; a nil
// or empty batch returns the zero BatchOutcome. After an unknown commit
// result a Transactor runs fn again itself, while the fallback returns
// Apply's ErrUnknownResult: either way it reports Committed only for a
// batch that landed. It fails with ErrInvalid for a nil store or fn, and
// is safe for concurrent use.
func TransactOnce(ctx context.Context, s Store, p Partition, fn TransactFunc) (BatchOutcome, error) {
	if s == nil || fn == nil {
		return BatchOutcome{}, fmt.Errorf("%w: transact on %s: nil store or function", ErrInvalid, PartitionName(p))
	}
	if t, ok := s.(Transactor); ok {
		return t.TransactOnce(ctx, p, fn)
	}
	r, end := newReader(s, p)
	b, err := fn(ctx, r)
	end()
	if err != nil {
		return BatchOutcome{}, err
	}
	if b == nil || b.Ops() == 0 && b.Wakeup == nil {
		return BatchOutcome{}, nil
	}
	return s.Apply(ctx, p, b)
}

// transactError formats Transact's error after attempts attempts: the
// partition, the cause, and unknown (when non-nil) also wrapped, so that
// errors.Is finds both.
func transactError(p Partition, attempts int, unknown error, format string, args ...any) error {
	err := fmt.Errorf("store: transact on %s, %d attempts: "+format, append([]any{PartitionName(p), attempts}, args...)...)
	if unknown != nil {
		err = fmt.Errorf("%w (an earlier attempt may have landed: %w)", err, unknown)
	}
	return err
}

// jitter is the wait before re-run n (from 0): uniform in
// [0, min(hi, lo << n)), "full jitter", which spreads writers that
// collided on one row the most. lo << n is compared without overflow.
func jitter(lo, hi time.Duration, n int) time.Duration {
	ceil := hi
	if lo <= hi>>n {
		ceil = lo << n
	}
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}

// newReader returns the Reader of the fallback path, each read its own
// call to s (a WakeReader when s keeps a due index), and the function
// that ends it.
func newReader(s Store, p Partition) (Reader, func()) {
	r := &partitionReader{s: s, p: p}
	if di, ok := s.(DueIndex); ok {
		return &dueReader{partitionReader: r, di: di}, r.end
	}
	return r, r.end
}

// ReaderOf returns a Reader of partition p of s, each read its own call
// to s (a WakeReader when s keeps a due index): the Reader of Transact's
// fallback path, for code that reads what it will guard outside a
// transaction (outbox.Read takes a Reader, inside Transact or not). It
// stays valid as long as s is open.
func ReaderOf(s Store, p Partition) Reader {
	r, _ := newReader(s, p)
	return r
}

// partitionReader is the Reader of the fallback path.
type partitionReader struct {
	s     Store
	p     Partition
	ended atomic.Bool
}

func (r *partitionReader) end() { r.ended.Store(true) }

// check fails a read made after the function returned.
func (r *partitionReader) check(what string) error {
	if r.ended.Load() {
		return fmt.Errorf("%w: store: %s in a transaction of %s: the Reader was used after its function returned", ErrInvalid, what, PartitionName(r.p))
	}
	return nil
}

func (r *partitionReader) Partition() Partition { return r.p }

// Format is r's store's format of namespace (FormatOf).
func (r *partitionReader) Format(namespace string) uint32 { return FormatOf(r.s, namespace) }

func (r *partitionReader) Get(ctx context.Context, key Key) (Value, bool, error) {
	if err := r.check("get"); err != nil {
		return nil, false, err
	}
	return r.s.Get(ctx, r.p, key)
}

func (r *partitionReader) GetMany(ctx context.Context, keys []Key) ([]Value, error) {
	if err := r.check("get"); err != nil {
		return nil, err
	}
	return r.s.GetMany(ctx, r.p, keys)
}

func (r *partitionReader) Scan(ctx context.Context, start, end Key, after Cursor, limit int) (ScanPage, error) {
	if err := r.check("scan"); err != nil {
		return ScanPage{}, err
	}
	return r.s.Scan(ctx, r.p, start, end, after, limit)
}

// dueReader is the fallback path's Reader of a store with a due index.
type dueReader struct {
	*partitionReader
	di DueIndex
}

func (r *dueReader) NextWake(ctx context.Context) (time.Time, bool, error) {
	if err := r.check("next wake"); err != nil {
		return time.Time{}, false, err
	}
	return r.di.NextWake(ctx, r.p)
}
