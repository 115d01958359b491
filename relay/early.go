package relay

import (
	"context"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: the first checkpoint batch's transaction, begun beside the
// lanes.
//
// A fire whose delivered rows take more than the one checkpoint batch its
// outcome carries applies the first before it returns: on FoundationDB a
// read version, the read of its guards (the scan state and every row it
// deletes) and its commit, after the last lane's commit. None of that
// depends on the lanes but the batch itself: the guarded keys are the
// window's rows and the scan state, known once the window is read, and the
// target batches write no source key. So on a source store that overlaps
// calls and runs one transaction per TransactOnce, the fire begins that
// transaction as the lanes start, reads the scan state and the window's
// rows in it, and waits; the checkpoint hands it its first batch, whose
// guards are then evaluated on what the transaction read (they cost no
// read of their own), and only the commit is left in sequence. The batch
// is the one Apply would commit, guard for guard, and a row or the scan
// state that another writer changes after the read makes the commit
// conflict: the store runs the function again, which reads again and
// returns the same batch, so the guards decide as Apply's would. A fire
// that does not flush a batch (it all fits the outcome's, or it fails
// first) ends the transaction with nothing written; one whose early read
// failed applies its first batch with Apply, as without it.

// earlyCheckpoint is the first checkpoint batch's transaction, begun
// beside the lanes (see the design note).
type earlyCheckpoint struct {
	ready chan struct{} // closed once batch is set (nil: nothing to apply)
	batch *store.Batch
	done  chan struct{} // closed when the transaction ended
	out   store.BatchOutcome
	err   error
	// readFailed: the function's read failed, so the transaction ended
	// before the batch was handed over, writing nothing.
	readFailed bool
	handed     bool // ready is closed
}

// beginCheckpoint begins the early checkpoint transaction when the
// window's rows may need a checkpoint batch besides the outcome's and the
// source store overlaps calls and is a store.Transactor; f.early is nil
// otherwise.
func (f *fire) beginCheckpoint(ctx context.Context) {
	f.early = nil
	if f.budget.Concurrency < 2 || len(f.rows) == 0 || !store.OverlapsCalls(f.c.Store) {
		return
	}
	if _, ok := f.c.Store.(store.Transactor); !ok {
		return
	}
	// The outcome's batch holds at most this many rows: two operations a
	// row (its guard and its delete), two for the scan state.
	caps := f.sourceCaps
	if 2*len(f.rows)+2 <= caps.MaxBatchOps-caps.ReservedBatchOps-timers.OutcomeOps {
		return
	}
	keys := append(f.earlyKeys[:0], scanKey)
	for i := range f.rows {
		keys = append(keys, f.rows[i].key)
	}
	f.earlyKeys = keys
	e := &earlyCheckpoint{ready: make(chan struct{}), done: make(chan struct{})}
	f.early = e
	go func() {
		defer close(e.done)
		e.out, e.err = store.TransactOnce(ctx, f.c.Store, f.c.Partition, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			if _, err := r.GetMany(ctx, keys); err != nil {
				e.readFailed = true
				return nil, err
			}
			select {
			case <-e.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return e.batch, nil
		})
	}()
}

// apply applies b in the early transaction and reports its result; ok is
// false when the transaction could not take it (its read failed, or it
// was used already): the caller applies b itself.
func (e *earlyCheckpoint) apply(b *store.Batch) (out store.BatchOutcome, err error, ok bool) {
	if e == nil || e.handed {
		return out, nil, false
	}
	e.batch, e.handed = b, true
	close(e.ready)
	<-e.done
	if e.readFailed {
		return out, nil, false
	}
	return e.out, e.err, true
}

// end ends the early transaction, with nothing written when no batch was
// handed to it, and waits for it: the transaction reads the fire's memory.
func (e *earlyCheckpoint) end() {
	if e == nil {
		return
	}
	if !e.handed {
		e.handed = true
		close(e.ready)
	}
	<-e.done
}
