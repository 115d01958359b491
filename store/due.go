package store

import (
	"context"
	"fmt"
	"time"
)

// Design note: the due index.
//
// The Store contract is per partition, but a scheduler must find the
// partitions that have due timers without visiting every partition. So a
// store keeps, beside the partitions, one due index, split into buckets
// each ordered by (wake time, partition identity), and each partition one
// wake time: the earliest time a scheduler should look at it. The two are only ever
// changed together, by the store, inside the transaction of a batch that
// carries a Wakeup; a caller never writes index entries itself, so an
// entry can never commit without the timer write it stands for (or the
// reverse).
//
// Two kinds of writer change wake times. A timer writer only lowers it
// (WakeAt): it needs no guard, because the store reads the current wake
// time inside the same transaction. A scheduler replaces it (an Exact
// wakeup, guarded by WakeIs: SetWake), which is what the rest of this
// note is about: it parks the wake time at the far future when it claims
// a partition, so that any timer written while it fires lowers it again,
// and after firing it replaces the parked time (failing its WakeIs, and
// re-reading, if a write lowered it meanwhile). A timer written during a
// fire is never forgotten. The parked time carries a ceiling, the claim's
// expiry: the write that lowers it lowers it to at most the ceiling, so
// that if the scheduler dies before it releases the partition, a timer
// written meanwhile (however far ahead) still leaves the partition due by
// the time another scheduler may claim it. A failed WakeIs is an ordinary
// failed precondition, named by its index like any other.

// Wakeup changes a partition's wake time in the store's due index,
// atomically with the batch that carries it. Every store with a due index
// honours it; a store without one rejects a batch carrying it with
// ErrInvalid. Its times are kept to the millisecond (see EncodeTime).
type Wakeup struct {
	// At is the wake time.
	At time.Time
	// Exact replaces the wake time with At (the zero At: none) instead of
	// lowering it, whatever the wake time is: a batch that must not
	// replace a time it did not see guards it with WakeIs, as SetWake
	// does.
	Exact bool
	// Ceiling, with Exact and a wake time above it, bounds the next
	// lowering: the first WakeAt that follows sets the wake time to at
	// most Ceiling, and the ceiling is gone. The zero Time: none. An Exact
	// wakeup without one clears the ceiling the wake time had.
	Ceiling time.Time
}

// MustWakeAt is the op of a WakeIs precondition: it requires the
// partition's wake time to be Precondition.Wake (the zero Time: none).
// Only a store with a due index evaluates it; another rejects a batch
// carrying it with ErrInvalid. It fails like any precondition:
// PreconditionFailed, with its own index in FailedIndex.
const MustWakeAt PreconditionOp = MustBeAbsent + 1

// WakeIs requires the partition's wake time to be at (the zero Time:
// none), to the millisecond: the guard of a batch that replaces a wake
// time it read (see SetWake).
func WakeIs(at time.Time) Precondition {
	return Precondition{Op: MustWakeAt, Wake: truncMs(at)}
}

// WakeAt asks the store to wake the partition no later than at: the wake
// time becomes min(current, at, the ceiling SetWakeCeiling left). It is
// what every timer write does, and needs no guard. It fails validation
// for the zero at. Combined with an earlier wakeup of the batch it keeps
// the earlier time (and an Exact wakeup stays exact).
func (b *Batch) WakeAt(at time.Time) *Batch {
	at = truncMs(at)
	switch w := b.Wakeup; {
	case w == nil:
		b.Wakeup = &Wakeup{At: at}
	case w.At.IsZero() && w.Exact, !at.IsZero() && at.Before(w.At):
		ceil := w.Ceiling
		if !ceil.Before(at) {
			ceil = time.Time{}
		}
		b.Wakeup = &Wakeup{At: at, Exact: w.Exact, Ceiling: ceil}
	}
	return b
}

// SetWake replaces the partition's wake time with at (the zero Time:
// none) if it still is expect (the zero Time: none): it appends
// WakeIs(expect) to the preconditions and sets an Exact wakeup.
func (b *Batch) SetWake(expect, at time.Time) *Batch {
	b.Preconditions = append(b.Preconditions, WakeIs(expect))
	b.Wakeup = &Wakeup{At: truncMs(at), Exact: true}
	return b
}

// SetWakeCeiling is SetWake with a ceiling (see Wakeup.Ceiling): the
// next WakeAt lowers the wake time at to at most ceiling. It fails
// validation unless ceiling is set and before at (to the millisecond).
func (b *Batch) SetWakeCeiling(expect, at, ceiling time.Time) *Batch {
	b.Preconditions = append(b.Preconditions, WakeIs(expect))
	b.Wakeup = &Wakeup{At: truncMs(at), Exact: true, Ceiling: truncMs(ceiling)}
	return b
}

// truncMs truncates t to the store's resolution, keeping the zero Time
// and a time before the Unix epoch (which fails validation).
func truncMs(t time.Time) time.Time {
	if t.Before(epoch) {
		return t
	}
	return t.Truncate(time.Millisecond)
}

func (w *Wakeup) validate() error {
	if w == nil {
		return nil
	}
	at, err := EncodeTime(w.At)
	if err != nil {
		return fmt.Errorf("wakeup: %w", err)
	}
	ceil, err := EncodeTime(w.Ceiling)
	if err != nil {
		return fmt.Errorf("wakeup ceiling: %w", err)
	}
	switch {
	case !w.Exact && at == 0:
		return fmt.Errorf("%w: wakeup at time 0", ErrInvalid)
	case ceil != 0 && (!w.Exact || ceil >= at):
		return fmt.Errorf("%w: wake ceiling %d needs an exact wake time above it (%d)", ErrInvalid, ceil, at)
	}
	return nil
}

// Next is the wake time and ceiling w leaves a partition whose wake time
// is cur (the zero Time: none) with ceiling ceil (the zero Time: none),
// to the millisecond. It is the rule every store with a due index applies.
func (w *Wakeup) Next(cur, ceil time.Time) (next, nextCeil time.Time) {
	n, c := w.NextEncoded(encodeTime(cur), encodeTime(ceil))
	return DecodeTime(n), DecodeTime(c)
}

// NextEncoded is Next over encoded times (see EncodeTime), for a store
// that keeps them encoded. w must have passed validation.
func (w *Wakeup) NextEncoded(cur, ceil uint64) (next, nextCeil uint64) {
	if w.Exact {
		if w.At.IsZero() {
			return 0, 0
		}
		return encodeTime(w.At), encodeTime(w.Ceiling)
	}
	at := encodeTime(w.At)
	if ceil != 0 {
		at = min(at, ceil)
	}
	if cur == 0 || at < cur {
		return at, 0
	}
	return cur, ceil
}

// NeedsDueIndex reports whether b needs a store with a due index: it
// carries a Wakeup or a WakeIs precondition.
func (b *Batch) NeedsDueIndex() bool {
	if b.Wakeup != nil {
		return true
	}
	for _, c := range b.Preconditions {
		if c.Op == MustWakeAt {
			return true
		}
	}
	return false
}

// DueEntry is one entry of the due index: a partition to look at from
// At on. Partition is the partition's tuple identity, as its
// AppendTuple wrote it; Bucket is the bucket of the index that holds the
// entry (see DueIndex).
type DueEntry struct {
	Bucket    int
	At        time.Time
	Partition []byte
}

// DueQuery selects the due index entries one ScanDue lists.
type DueQuery struct {
	// From and Until bound the entries' At, both inclusive, to the
	// millisecond; the zero Time is the earliest.
	From, Until time.Time
	// Start is the bucket the listing starts at (0 <= Start <
	// DueBuckets()), and Buckets how many it lists from there (0: all),
	// wrapping from the last bucket to bucket 0.
	Start, Buckets int
	// After, when set, resumes the listing strictly after that entry, which
	// names a bucket the query lists: the rest of its bucket, then the
	// buckets after it. nil: from Start.
	After *DueEntry
	// Limit bounds the entries of one call (Limit >= 1).
	Limit int
	// PerBucket, when above 0, also bounds the entries listed from each
	// bucket: a query for the first entries of every bucket, which is not
	// resumed.
	PerBucket int
}

// DueIndex is implemented by stores that keep the due index: they honour
// a batch's Wakeup and evaluate its WakeIs preconditions, which a store
// without one rejects with ErrInvalid. Scheduler code asks for it with a
// type assertion, as io code asks for io.WriterTo.
//
// The index is split into DueBuckets() buckets, each ordered by
// (At, partition identity). A partition's entry lies in one bucket,
// chosen by the store from its identity, so that wake times written at
// the same moment spread over the buckets (on FoundationDB: over as many
// key ranges, and storage servers) instead of all landing at the end of
// one range. A listing that covers every bucket finds every entry;
// schedulers that start their listings at different buckets meet each
// other's entries last.
type DueIndex interface {
	// DueBuckets is the number of buckets of the index (at least 1). It
	// never changes for an open store.
	DueBuckets() int
	// ScanDue lists the entries q selects, in one snapshot: bucket by
	// bucket from q.Start, and within a bucket by (At, identity), at
	// most q.Limit. A page shorter than q.Limit (without q.PerBucket)
	// ends the listing; resume a full one with q.After set to its last
	// entry. An entry may be stale (its partition's wake time moved
	// since); NextWake tells. It fails with ErrInvalid for a query out of
	// range (Limit < 1, a bucket out of range, an After in a bucket the
	// query does not list).
	ScanDue(ctx context.Context, q DueQuery) ([]DueEntry, error)
	// NextWake reads partition p's wake time; ok is false (and at the
	// zero Time) when it has none.
	NextWake(ctx context.Context, p Partition) (at time.Time, ok bool, err error)
}

// Check fails with ErrInvalid when q is out of range for an index of
// buckets buckets, and returns the number of buckets it lists.
func (q DueQuery) Check(buckets int) (int, error) {
	n := q.Buckets
	if n == 0 {
		n = buckets
	}
	if _, err := EncodeTime(q.From); err != nil {
		return 0, fmt.Errorf("due query from: %w", err)
	}
	if _, err := EncodeTime(q.Until); err != nil {
		return 0, fmt.Errorf("due query until: %w", err)
	}
	switch {
	case q.Limit < 1:
		return 0, fmt.Errorf("%w: due query limit %d < 1", ErrInvalid, q.Limit)
	case q.PerBucket < 0:
		return 0, fmt.Errorf("%w: due query per-bucket limit %d < 0", ErrInvalid, q.PerBucket)
	case q.Start < 0 || q.Start >= buckets || n < 0 || n > buckets:
		return 0, fmt.Errorf("%w: due query of %d buckets from %d, the index has %d", ErrInvalid, n, q.Start, buckets)
	case q.After != nil && q.Offset(q.After.Bucket, buckets) >= n:
		return 0, fmt.Errorf("%w: due query resumes in bucket %d, which it does not list", ErrInvalid, q.After.Bucket)
	}
	return n, nil
}

// Offset is the position of bucket b in q's listing order over an index
// of buckets buckets (out of range: buckets or more).
func (q DueQuery) Offset(b, buckets int) int {
	if b < 0 || b >= buckets {
		return buckets
	}
	return (b - q.Start + buckets) % buckets
}

// WakeReader is implemented by the Reader a store with a due index hands
// a TransactFunc: it reads the partition's wake time as the function's
// other reads are read (from the transaction's snapshot on a Transactor).
// A batch that replaces a wake time it read guards it with WakeIs
// (SetWake), which on a Transactor costs no read of its own. Callers ask
// for it with a type assertion.
type WakeReader interface {
	// NextWake reads the partition's wake time; ok is false when it has
	// none. It fails as DueIndex.NextWake does.
	NextWake(ctx context.Context) (at time.Time, ok bool, err error)
}
