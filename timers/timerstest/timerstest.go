// Package timerstest checks, in tests, the invariant that package timers
// and its Scheduler keep under every race, fault and crash: every
// partition that holds a timer has a due index entry at or before its
// earliest timer's due time.
package timerstest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Violation is one partition that breaks the invariant.
type Violation struct {
	Partition store.Partition
	// Problem says what is wrong, in words.
	Problem string
	// Wake is the partition's due index entry (the zero Time: none).
	Wake time.Time
	// EarliestDue is the due time of its earliest timer (the zero Time:
	// none).
	EarliestDue time.Time
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s (wake %d, earliest timer due %d)", store.PartitionName(v.Partition), v.Problem, msOf(v.Wake), msOf(v.EarliestDue))
}

// Error is the error CheckDueIndex returns for violations: it lists them.
type Error []Violation

func (e Error) Error() string {
	lines := make([]string, len(e))
	for i, v := range e {
		lines[i] = v.String()
	}
	return fmt.Sprintf("timerstest: %d partitions break the due index invariant:\n\t%s", len(e), strings.Join(lines, "\n\t"))
}

// CheckDueIndex checks partitions of s, which must implement
// store.DueIndex, against the invariant. A timer is a row of the timer
// class whose key parses and whose reference entry names it; a partition
// breaks the invariant when
//   - it holds a timer row (a timer or a corrupt row) and the due index
//     lists no entry for it;
//   - its entry is later than its earliest timer's due time (a due time
//     of 0 counts as 1, the earliest wake time); under a scheduler lease,
//     later than both that and the lease's expiry (the lease holder's
//     release sets the entry; if the holder died, the partition is listed
//     once the lease has expired), unless it is parked
//     (timers.ParkedWake): every scheduler tick lists parked partitions
//     and claims those whose lease has expired;
//   - it is parked without a lease row;
//   - its wake time (NextWake) and its due index entry disagree;
//   - its entry is a paused wake time (a Scheduler left due timers of a
//     paused kind, or of the partition's paused queues, where they were:
//     see timers.PauseKind) of the current pause generation, and later than
//     the earliest of its timers that no pause holds now (the kinds
//     paused for the whole store, and the library's kinds when the
//     partition's queues are paused). A paused wake time of a generation
//     a resume ended is due at every Scheduler's next tick: it covers
//     every timer, as a wake time of now does.
//
// It returns an Error listing every violation, nil when there is none,
// and the store's errors. It reads the whole due index, the pauses and
// every timer of the partitions: for tests, not for production stores.
func CheckDueIndex(ctx context.Context, s store.Store, partitions []store.Partition) error {
	due, ok := s.(store.DueIndex)
	if !ok {
		return fmt.Errorf("timerstest: store %T keeps no due index: %w", s, store.ErrInvalid)
	}
	listed, err := entries(ctx, due)
	if err != nil {
		return err
	}
	pauses, err := timers.ReadPauses(ctx, store.ReaderOf(s, timers.MembersPartition))
	if err != nil {
		return fmt.Errorf("timerstest: %w", err)
	}
	var bad Error
	for _, p := range partitions {
		v, err := check(ctx, s, due, listed, pauses, p)
		if err != nil {
			return err
		}
		if v != nil {
			bad = append(bad, *v)
		}
	}
	if len(bad) > 0 {
		return bad
	}
	return nil
}

// entries lists the whole due index, by partition identity.
func entries(ctx context.Context, due store.DueIndex) (map[string]uint64, error) {
	const page = 512
	out := make(map[string]uint64)
	var after *store.DueEntry
	for {
		es, err := due.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, After: after, Limit: page})
		if err != nil {
			return nil, fmt.Errorf("timerstest: list the due index: %w", err)
		}
		for _, e := range es {
			if prev, dup := out[string(e.Partition)]; dup {
				return nil, fmt.Errorf("timerstest: partition %x listed at %d and %d: %w", e.Partition, prev, msOf(e.At), store.ErrCorrupt)
			}
			out[string(e.Partition)] = msOf(e.At)
		}
		if len(es) < page {
			return out, nil
		}
		after = &es[len(es)-1]
	}
}

func check(ctx context.Context, s store.Store, due store.DueIndex, listed map[string]uint64, pauses timers.Pauses, p store.Partition) (*Violation, error) {
	id, err := p.AppendTuple(nil)
	if err != nil {
		return nil, fmt.Errorf("timerstest: %w", err)
	}
	wakeAt, ok, err := due.NextWake(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("timerstest: wake time of %s: %w", store.PartitionName(p), err)
	}
	wake := msOf(wakeAt)
	entry, inIndex := listed[string(id)]
	if !ok {
		wake = 0
	}
	if ok != inIndex || wake != entry {
		return &Violation{Partition: p, Problem: fmt.Sprintf("wake time %d and due index entry %d disagree", wake, entry), Wake: store.DecodeTime(entry)}, nil
	}
	_, queuesPaused, err := timers.ReadPartitionPause(ctx, store.ReaderOf(s, p))
	if err != nil {
		return nil, fmt.Errorf("timerstest: %w", err)
	}
	held := func(k timers.Kind) bool {
		_, paused := pauses.Kind(k)
		return paused || queuesPaused && k.Queue()
	}
	rows, earliest, free, err := timersOf(ctx, s, p, held)
	if err != nil {
		return nil, err
	}
	v := &Violation{Partition: p, Wake: store.DecodeTime(entry), EarliestDue: store.DecodeTime(earliest)}
	if rows > 0 && !inIndex {
		v.Problem = fmt.Sprintf("holds %d timer rows and has no due index entry", rows)
		return v, nil
	}
	lv, leased, err := s.Get(ctx, p, timers.LeaseKey())
	if err != nil {
		return nil, fmt.Errorf("timerstest: lease of %s: %w", store.PartitionName(p), err)
	}
	var leaseMs uint64
	if leased {
		l, err := gen.DecodeSchedulerLeaseV1(lv)
		if err != nil {
			v.Problem = fmt.Sprintf("scheduler lease does not decode: %v", err)
			return v, nil
		}
		leaseMs = l.ExpiresAtMs
	}
	w := timers.DescribeWake(wakeAt, ok)
	switch {
	case entry == math.MaxUint64 && !leased:
		v.Problem = "parked without a scheduler lease"
		return v, nil
	case entry == math.MaxUint64:
	case w.Paused && pauses.Ended(w):
		// Due at the next tick.
	case w.Paused:
		// The paused wake time's own time: none stands for after every
		// timer.
		at := msOf(w.At)
		if w.At.IsZero() {
			at = math.MaxUint64
		}
		if free != 0 && at > max(free, leaseMs) {
			v.Problem = fmt.Sprintf("paused wake time (generation %d, next %d) later than its earliest timer no pause holds (due %d)", w.Generation, msOf(w.At), free)
			return v, nil
		}
	case earliest != 0 && entry > max(earliest, leaseMs):
		v.Problem = "due index entry later than its earliest timer"
		if leased {
			v.Problem += fmt.Sprintf(" and its lease's expiry %d", leaseMs)
		}
		return v, nil
	}
	return nil, nil
}

// timersOf counts p's timer rows and returns the earliest due time of
// its timers, and of those of the kinds held does not hold (0: none).
func timersOf(ctx context.Context, s store.Store, p store.Partition, held func(timers.Kind) bool) (rows int, earliest, free uint64, err error) {
	start, end := gen.ClassRange(gen.TagTimerKey)
	var after store.Cursor
	for {
		page, err := s.Scan(ctx, p, start, end, after, 256)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("timerstest: scan the timers of %s: %w", store.PartitionName(p), err)
		}
		rows += len(page.Entries)
		for _, kv := range page.Entries {
			tk, err := gen.ParseTimerKey(kv.Key)
			if err != nil || earliest != 0 && free != 0 {
				continue // timers come in due order: the first found is the earliest
			}
			kind := timers.Kind(tk.Kind)
			if earliest != 0 && held(kind) {
				continue
			}
			ref, err := timers.RefKey(kind, tk.Reference)
			if err != nil {
				continue
			}
			v, ok, err := s.Get(ctx, p, ref)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("timerstest: read a timer reference of %s: %w", store.PartitionName(p), err)
			}
			if d, derr := timers.DecodeRef(v); ok && derr == nil && msOf(d) == tk.DueAtMs {
				if earliest == 0 {
					earliest = max(tk.DueAtMs, 1)
				}
				if free == 0 && !held(kind) {
					free = max(tk.DueAtMs, 1)
				}
			}
		}
		if page.Next == nil {
			return rows, earliest, free, nil
		}
		after = page.Next
	}
}

// msOf is t as stored data holds it (see store.EncodeTime): times here
// come from the store.
func msOf(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}
