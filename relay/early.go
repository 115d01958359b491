package relay

import (
	"context"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: the first checkpoint batch's guards, read beside the lanes.
//
// A fire whose delivered rows take more than the one checkpoint batch its
// outcome carries applies the first before it returns: on FoundationDB a
// read version, the read of its guards (the scan state and every row it
// deletes) and its commit, after the last lane's commit. None of that
// depends on the lanes but the batch itself: the guarded keys are the
// window's rows and the scan state, known once the window is read, and the
// target batches write no source key. So on a source store that overlaps
// calls and reads ahead (store.Prefetcher), the fire reads the scan state
// and the window's rows ahead as the lanes start, and the checkpoint
// applies its first batch with what was read: its guards cost no read
// while nothing wrote those keys since, and only the commit is left in
// sequence. The batch is the one Apply would commit, guard for guard, and
// the store decides them on the state the batch commits on: a row or the
// scan state that another writer changed since the read makes the commit
// conflict, and the store reads again and decides as Apply does.
//
// The fire never holds a transaction while it waits for its lanes: the
// prefetch is a call that returns once it has read, and holds nothing
// another transaction waits for (a store whose transactions exclude one
// another, as the memory and bbolt engines' one writer does, reads
// nothing ahead, and the batch is then applied as with Apply). What the
// fire waits for, when it applies the batch, is only the prefetch's own
// read. A fire that applies no batch before the last (it all fits the
// outcome's, or it fails first) closes the prefetch, writing nothing; one
// whose prefetch failed applies its first batch with Apply, as without
// it.

// earlyCheckpoint is the read ahead of the first checkpoint batch's
// guards, begun beside the lanes (see the design note).
type earlyCheckpoint struct {
	done chan struct{}    // closed once the prefetch returned
	pf   store.Prefetched // what it read (nil: it failed)
	used bool             // a batch was handed to it
}

// beginCheckpoint reads the scan state and the window's rows ahead, on a
// goroutine of its own, when they may need a checkpoint batch besides the
// outcome's and the source store overlaps calls and is a
// store.Prefetcher; f.early is nil otherwise.
func (f *fire) beginCheckpoint(ctx context.Context) {
	f.early = nil
	if f.budget.Concurrency < 2 || len(f.rows) == 0 || !store.OverlapsCalls(f.c.Store) {
		return
	}
	pfr, ok := f.c.Store.(store.Prefetcher)
	if !ok {
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
	e := &earlyCheckpoint{done: make(chan struct{})}
	f.early = e
	p := f.c.Partition
	go func() {
		defer close(e.done)
		if pf, err := pfr.Prefetch(ctx, p, keys); err == nil {
			e.pf = pf
		}
	}()
}

// apply applies b with what was read ahead and reports the result; ok is
// false when nothing was (the prefetch failed, or a batch used it
// already): the caller applies b itself.
func (e *earlyCheckpoint) apply(ctx context.Context, b *store.Batch) (out store.BatchOutcome, err error, ok bool) {
	if e == nil || e.used {
		return out, nil, false
	}
	e.used = true
	<-e.done
	if e.pf == nil {
		return out, nil, false
	}
	out, err = e.pf.Apply(ctx, b)
	return out, err, true
}

// end waits for the prefetch, which reads the fire's memory, and closes
// it, writing nothing when no batch was applied with it.
func (e *earlyCheckpoint) end() {
	if e == nil {
		return
	}
	<-e.done
	if e.pf != nil {
		e.pf.Close()
	}
}
