package store

import (
	"context"
	"fmt"
)

// Design note: the due index.
//
// The Store contract is per partition, but a scheduler must find the
// partitions that have due timers without visiting every partition. So a
// store keeps, beside the partitions, one due index ordered by
// (wake time, partition identity), and each partition one wake time: the
// earliest time a scheduler should look at it. The two are only ever
// changed together, by the layer, inside the transaction of a batch that
// carries a Wakeup; a caller never writes index entries itself, so an
// entry can never commit without the timer write it stands for (or the
// reverse). Lowering the wake time (Wakeup.At with Exact unset) is what
// every timer write does; it needs no guard because the layer reads the
// current wake time inside the same transaction. Replacing it (Exact),
// guarded by the wake time last seen, is what a scheduler does: it parks
// the wake time at the far future when it claims a partition, so that any
// timer written while it fires lowers it again, and after firing it
// replaces the parked time (failing, and re-reading, if a write lowered
// it meanwhile). A timer written during a fire is never forgotten. The
// parked time carries a ceiling, the claim's expiry: the write that lowers
// it lowers it to at most the ceiling, so that if the scheduler dies
// before it releases the partition, a timer written meanwhile (however far
// ahead) still leaves the partition due by the time another scheduler may
// claim it.

// Wakeup changes a partition's wake time in the store's due index,
// atomically with the batch that carries it.
type Wakeup struct {
	// AtMs is the wake time in milliseconds since the Unix epoch.
	AtMs uint64
	// Exact replaces the wake time with AtMs (AtMs 0: none) instead of
	// lowering it, and only if the current wake time is ExpectMs (0:
	// none); otherwise the batch fails with PreconditionFailed and
	// FailedIndex WakeupPrecondition.
	Exact    bool
	ExpectMs uint64
	// CeilingMs, with Exact and a wake time above it, bounds the next
	// lowering: the first WakeAt that follows sets the wake time to at
	// most CeilingMs, and the ceiling is gone. 0: none. An Exact wakeup
	// without one clears the ceiling the wake time had.
	CeilingMs uint64
}

// WakeupPrecondition is the BatchOutcome.FailedIndex of a batch whose
// Exact wakeup found another wake time than it expected.
const WakeupPrecondition = -1

// WakeAt asks the store to wake the partition no later than atMs: the
// wake time becomes min(current, atMs, the ceiling SetWakeCeiling left).
// It fails validation for atMs 0. Combined with an earlier wakeup of the
// batch it keeps the earlier time (and an Exact wakeup stays exact).
func (b *Batch) WakeAt(atMs uint64) *Batch {
	switch w := b.Wakeup; {
	case w == nil:
		b.Wakeup = &Wakeup{AtMs: atMs}
	case w.AtMs == 0 && w.Exact, atMs != 0 && atMs < w.AtMs:
		ceil := w.CeilingMs
		if ceil >= atMs {
			ceil = 0
		}
		b.Wakeup = &Wakeup{AtMs: atMs, Exact: w.Exact, ExpectMs: w.ExpectMs, CeilingMs: ceil}
	}
	return b
}

// SetWake replaces the partition's wake time with atMs (0: none) if it
// still is expectMs (0: none).
func (b *Batch) SetWake(expectMs, atMs uint64) *Batch {
	b.Wakeup = &Wakeup{AtMs: atMs, Exact: true, ExpectMs: expectMs}
	return b
}

// SetWakeCeiling is SetWake with a ceiling (see Wakeup.CeilingMs): the
// next WakeAt lowers the wake time atMs to at most ceilingMs. It fails
// validation unless 0 < ceilingMs < atMs.
func (b *Batch) SetWakeCeiling(expectMs, atMs, ceilingMs uint64) *Batch {
	b.Wakeup = &Wakeup{AtMs: atMs, Exact: true, ExpectMs: expectMs, CeilingMs: ceilingMs}
	return b
}

func (w *Wakeup) validate() error {
	switch {
	case w == nil:
	case !w.Exact && w.AtMs == 0:
		return fmt.Errorf("%w: wakeup at time 0", ErrInvalid)
	case w.CeilingMs != 0 && (!w.Exact || w.CeilingMs >= w.AtMs):
		return fmt.Errorf("%w: wake ceiling %d needs an exact wake time above it (%d)", ErrInvalid, w.CeilingMs, w.AtMs)
	}
	return nil
}

// Next is the wake time and ceiling w leaves a partition whose wake time
// is cur (0: none) with ceiling ceil (0: none); ok is false when w is
// exact and cur is not what it expects. It is the rule every store with a
// due index applies.
func (w *Wakeup) Next(cur, ceil uint64) (next, nextCeil uint64, ok bool) {
	if w.Exact {
		if w.AtMs == 0 {
			return 0, 0, cur == w.ExpectMs
		}
		return w.AtMs, w.CeilingMs, cur == w.ExpectMs
	}
	at := w.AtMs
	if ceil != 0 {
		at = min(at, ceil)
	}
	if cur == 0 || at < cur {
		return at, 0, true
	}
	return cur, ceil, true
}

// DueEntry is one entry of the due index: a partition to look at from
// AtMs on. Partition is the partition's tuple identity, as its
// AppendTuple wrote it.
type DueEntry struct {
	AtMs      uint64
	Partition []byte
}

// DueIndex is implemented by stores that keep the due index. Scheduler
// code asks for it with a type assertion, as io code asks for io.WriterTo.
type DueIndex interface {
	// ScanDue lists the entries with AtMs <= untilMs, oldest first, then by
	// partition identity, strictly after the entry after (nil: from the
	// start), at most limit. An entry may be stale (its partition's wake
	// time moved since); NextWake tells.
	ScanDue(ctx context.Context, untilMs uint64, after *DueEntry, limit int) ([]DueEntry, error)
	// NextWake reads partition p's wake time; ok is false when it has none.
	NextWake(ctx context.Context, p Partition) (atMs uint64, ok bool, err error)
}
