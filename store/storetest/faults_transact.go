package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: TransactOnce under faults.
//
// A store.Transactor runs the caller's function inside its transaction,
// where nothing may call the store: on a store whose writers serialize
// (the memory and bbolt engines, the reference model) a write would wait
// for the transaction it is made from. So Faults runs a TransactOnce in
// one of two ways. With no hooks configured it hands the function to the
// inner store's own TransactOnce, with a Reader that counts and faults its
// reads: the path under test is the store's. With hooks configured, which
// may write through Inner, it runs the function outside any transaction,
// on reads through the Faults (counted, faulted and hooked like any
// other), and then validates in the inner store's transaction: it reads
// again everything the function read and commits the function's batch
// only if every read returns what it returned before; otherwise it runs
// the function again, as FoundationDB's resolver fails a transaction whose
// reads were overwritten and its client retries it. A hook that changes a
// row the function read thus makes it run again, and one that changes a
// row it only guards makes its batch fail that guard: what a concurrent
// writer does to a real transaction.

// maxValidations bounds the runs of a TransactOnce whose reads another
// writer keeps changing under Faults' validation.
const maxValidations = 100

// errStale ends a validation whose reads no longer return what the
// function read; errFnFailed one whose function had failed (its error is
// returned once the validation showed it read a consistent state).
var (
	errStale    = errors.New("storetest: reads changed")
	errFnFailed = errors.New("storetest: function failed")
)

// TransactOnce implements store.Transactor, over any inner store. The call
// is counted and delayed as the others are; its failure and
// commit-then-fail rules are matched once the function has returned its
// batch (Call.Batch set; nil when it has nothing to write): a failure
// rule then fails the call with nothing written, after the function ran.
// The function's reads are counted and faulted as reads (MethodGet,
// MethodGetMany, MethodScan, MethodNextWake).
//
// With no BeforeApply or AfterRead hook configured when it starts, and an
// inner store.Transactor, the function runs in the inner store's
// transaction. Otherwise it runs on reads through the Faults, hooks
// included, and its batch commits in the inner transaction only if its
// reads, made again there, return what they returned (see the design
// note), else it runs again, at most 100 times (then an error wrapping
// store.ErrUnavailable); BeforeApply hooks run between the function and
// that transaction. Over an inner store that is not a store.Transactor,
// the function runs on reads through the Faults and its batch is applied
// with the Faults' Apply (counted, faulted and hooked as an Apply call),
// as store.TransactOnce does over such a store.
func (f *Faults) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	c := Call{Method: MethodTransact, Partition: p}
	pl := f.count(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.BatchOutcome{}, err
	}
	if fn == nil {
		return store.BatchOutcome{}, fmt.Errorf("storetest: %s: %w: nil function", c.describe(), store.ErrInvalid)
	}
	inner, ok := f.inner.(store.Transactor)
	var (
		out store.BatchOutcome
		err error
	)
	switch {
	case !ok:
		out, err = f.transactApply(ctx, p, fn, &c, &pl)
	case len(pl.beforeApply) == 0 && len(pl.afterRead) == 0:
		out, err = f.transactInner(ctx, inner, p, fn, &c, &pl)
	default:
		out, err = f.transactValidated(ctx, inner, p, fn, &c, &pl)
	}
	if err == nil && pl.commitThenFail && out.Committed() {
		return store.BatchOutcome{}, fmt.Errorf("storetest: %s committed, result withheld: %w", c.describe(), store.ErrUnknownResult)
	}
	return out, err
}

// transactInner runs fn in the inner store's transaction.
func (f *Faults) transactInner(ctx context.Context, inner store.Transactor, p store.Partition, fn store.TransactFunc, c *Call, pl *plan) (store.BatchOutcome, error) {
	return inner.TransactOnce(ctx, p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		fr := &faultReader{f: f, p: p, inner: r, live: true}
		b, err := fn(ctx, fr)
		fr.end()
		if err != nil {
			return nil, err
		}
		c.Batch = b
		if pl.match(c); pl.fail != nil {
			return nil, pl.fail
		}
		return b, nil
	})
}

// transactApply runs fn on reads through f and applies its batch with
// f.Apply (an Apply call of its own): the inner store is not a
// store.Transactor.
func (f *Faults) transactApply(ctx context.Context, p store.Partition, fn store.TransactFunc, c *Call, pl *plan) (store.BatchOutcome, error) {
	rec := &recorder{f: f, p: p, live: true}
	b, err := fn(ctx, rec)
	rec.end()
	if err != nil {
		return store.BatchOutcome{}, err
	}
	c.Batch = b
	if pl.match(c); pl.fail != nil {
		return store.BatchOutcome{}, pl.fail
	}
	if b == nil || b.Ops() == 0 && b.Wakeup == nil {
		return store.BatchOutcome{}, nil
	}
	return f.Apply(ctx, p, b)
}

// transactValidated runs fn on reads through f and commits its batch in
// the inner store's transaction once its reads, made again there, return
// what they returned (see the design note).
func (f *Faults) transactValidated(ctx context.Context, inner store.Transactor, p store.Partition, fn store.TransactFunc, c *Call, pl *plan) (store.BatchOutcome, error) {
	for run := 0; run < maxValidations; run++ {
		if err := ctx.Err(); err != nil {
			return store.BatchOutcome{}, fmt.Errorf("storetest: %s: %w: %w", c.describe(), store.ErrUnavailable, err)
		}
		rec := &recorder{f: f, p: p, live: true}
		b, fnErr := fn(ctx, rec)
		rec.end()
		if fnErr == nil {
			c.Batch = b
			if pl.match(c); pl.fail != nil {
				return store.BatchOutcome{}, pl.fail
			}
			if b != nil && (b.Ops() > 0 || b.Wakeup != nil) {
				if err := pl.runBeforeApply(ctx, c, p, b); err != nil {
					return store.BatchOutcome{}, err
				}
			}
		}
		out, err := inner.TransactOnce(ctx, p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			same, err := rec.replay(ctx, r)
			switch {
			case err != nil:
				return nil, err
			case !same:
				return nil, errStale
			case fnErr != nil:
				return nil, errFnFailed
			}
			return b, nil
		})
		switch {
		case err == errStale:
			continue
		case err == errFnFailed:
			return store.BatchOutcome{}, fnErr
		}
		return out, err
	}
	return store.BatchOutcome{}, fmt.Errorf("storetest: %s: %w: the function's reads changed before each of %d commits", c.describe(), store.ErrUnavailable, maxValidations)
}

// runBeforeApply runs the BeforeApply hooks of a call about to write b.
func (pl *plan) runBeforeApply(ctx context.Context, c *Call, p store.Partition, b *store.Batch) error {
	for _, hook := range pl.beforeApply {
		if err := hook(ctx, p, b); err != nil {
			return fmt.Errorf("storetest: BeforeApply hook of %s: %w", c.describe(), err)
		}
	}
	return nil
}

// faultReader is the Reader a TransactOnce function gets in the inner
// store's transaction: each read counted, delayed and failed as a call of
// its method. Hooks do not run there (a hook's write would wait for the
// transaction it is made from).
type faultReader struct {
	f     *Faults
	p     store.Partition
	inner store.Reader
	mu    sync.Mutex
	live  bool
}

func (r *faultReader) end() {
	r.mu.Lock()
	r.live = false
	r.mu.Unlock()
}

// enter counts and faults a read of the function.
func (r *faultReader) enter(ctx context.Context, c Call) error {
	r.mu.Lock()
	live := r.live
	r.mu.Unlock()
	c.Partition = r.p
	pl := r.f.start(&c)
	if !live {
		return fmt.Errorf("storetest: %s: %w: the Reader was used after its function returned", c.describe(), store.ErrInvalid)
	}
	return pl.enter(ctx, &c)
}

func (r *faultReader) Partition() store.Partition { return r.p }

func (r *faultReader) Get(ctx context.Context, key store.Key) (store.Value, bool, error) {
	if err := r.enter(ctx, Call{Method: MethodGet, Key: key}); err != nil {
		return nil, false, err
	}
	return r.inner.Get(ctx, key)
}

func (r *faultReader) GetMany(ctx context.Context, keys []store.Key) ([]store.Value, error) {
	if err := r.enter(ctx, Call{Method: MethodGetMany, Keys: keys}); err != nil {
		return nil, err
	}
	return r.inner.GetMany(ctx, keys)
}

func (r *faultReader) Scan(ctx context.Context, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	if err := r.enter(ctx, Call{Method: MethodScan, Start: start, End: end, After: after, Limit: limit}); err != nil {
		return store.ScanPage{}, err
	}
	return r.inner.Scan(ctx, start, end, after, limit)
}

// NextWake makes the Reader a store.WakeReader; it fails with
// store.ErrInvalid when the inner store's Reader is none.
func (r *faultReader) NextWake(ctx context.Context) (time.Time, bool, error) {
	c := Call{Method: MethodNextWake}
	if err := r.enter(ctx, c); err != nil {
		return time.Time{}, false, err
	}
	wr, ok := r.inner.(store.WakeReader)
	if !ok {
		return time.Time{}, false, fmt.Errorf("storetest: NextWake in a transaction of %s: %w: the store keeps no due index", store.PartitionName(r.p), store.ErrInvalid)
	}
	return wr.NextWake(ctx)
}

// recordedRead is one read a recorder made, and what it returned.
type recordedRead struct {
	method     Method
	keys       []store.Key
	values     []store.Value
	start, end store.Key
	after      store.Cursor
	limit      int
	page       store.ScanPage
	wake       time.Time
	woke       bool
}

// recorder is the Reader a TransactOnce function gets outside any
// transaction: its reads go through the Faults, and are recorded for
// replay.
type recorder struct {
	f     *Faults
	p     store.Partition
	mu    sync.Mutex
	live  bool
	reads []recordedRead
}

func (r *recorder) end() {
	r.mu.Lock()
	r.live = false
	r.mu.Unlock()
}

// check fails a read made after the function returned.
func (r *recorder) check(m Method) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.live {
		return fmt.Errorf("storetest: %v in a transaction of %s: %w: the Reader was used after its function returned", m, store.PartitionName(r.p), store.ErrInvalid)
	}
	return nil
}

func (r *recorder) record(rd recordedRead) {
	r.mu.Lock()
	r.reads = append(r.reads, rd)
	r.mu.Unlock()
}

func (r *recorder) Partition() store.Partition { return r.p }

func (r *recorder) Get(ctx context.Context, key store.Key) (store.Value, bool, error) {
	if err := r.check(MethodGet); err != nil {
		return nil, false, err
	}
	v, ok, err := r.f.Get(ctx, r.p, key)
	if err == nil {
		r.record(recordedRead{method: MethodGetMany, keys: []store.Key{key}, values: []store.Value{slices.Clone(v)}})
	}
	return v, ok, err
}

func (r *recorder) GetMany(ctx context.Context, keys []store.Key) ([]store.Value, error) {
	if err := r.check(MethodGetMany); err != nil {
		return nil, err
	}
	vs, err := r.f.GetMany(ctx, r.p, keys)
	if err == nil {
		kept := make([]store.Value, len(vs))
		for i, v := range vs {
			kept[i] = slices.Clone(v)
		}
		r.record(recordedRead{method: MethodGetMany, keys: slices.Clone(keys), values: kept})
	}
	return vs, err
}

func (r *recorder) Scan(ctx context.Context, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	if err := r.check(MethodScan); err != nil {
		return store.ScanPage{}, err
	}
	page, err := r.f.Scan(ctx, r.p, start, end, after, limit)
	if err == nil {
		r.record(recordedRead{method: MethodScan, start: start, end: end, after: after, limit: limit, page: copyPage(page)})
	}
	return page, err
}

// NextWake reads through the Faults' DueIndex, so it fails with
// store.ErrInvalid over a store without a due index.
func (r *recorder) NextWake(ctx context.Context) (time.Time, bool, error) {
	if err := r.check(MethodNextWake); err != nil {
		return time.Time{}, false, err
	}
	at, ok, err := r.f.NextWake(ctx, r.p)
	if err == nil {
		r.record(recordedRead{method: MethodNextWake, wake: at, woke: ok})
	}
	return at, ok, err
}

// replay makes the recorded reads again through rr, in order, and reports
// whether each returned what it returned when recorded.
func (r *recorder) replay(ctx context.Context, rr store.Reader) (bool, error) {
	for _, rd := range r.reads {
		switch rd.method {
		case MethodGetMany:
			vs, err := rr.GetMany(ctx, rd.keys)
			if err != nil {
				return false, err
			}
			if !slices.EqualFunc(vs, rd.values, sameValue) {
				return false, nil
			}
		case MethodScan:
			page, err := rr.Scan(ctx, rd.start, rd.end, rd.after, rd.limit)
			if err != nil {
				return false, err
			}
			if !sameRows(page.Entries, rd.page.Entries) || (page.Next == nil) != (rd.page.Next == nil) {
				return false, nil
			}
		case MethodNextWake:
			wr, ok := rr.(store.WakeReader)
			if !ok {
				return false, fmt.Errorf("storetest: replay in a transaction of %s: %w: the store keeps no due index", store.PartitionName(r.p), store.ErrInvalid)
			}
			at, woke, err := wr.NextWake(ctx)
			if err != nil {
				return false, err
			}
			if !at.Equal(rd.wake) || woke != rd.woke {
				return false, nil
			}
		}
	}
	return true, nil
}

// copyPage copies a page's rows, which the caller may modify.
func copyPage(p store.ScanPage) store.ScanPage {
	out := store.ScanPage{Next: slices.Clone(p.Next)}
	for _, kv := range p.Entries {
		out.Entries = append(out.Entries, store.KeyValue{Key: slices.Clone(kv.Key), Value: slices.Clone(kv.Value)})
	}
	return out
}

var (
	_ store.Transactor = (*Faults)(nil)
	_ store.WakeReader = (*faultReader)(nil)
	_ store.WakeReader = (*recorder)(nil)
)
