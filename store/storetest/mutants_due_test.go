package storetest

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// dueMutants break the due index, one bug at a time.
var dueMutants = []mutant{
	{"wakeup-ignored-without-index", "Due/WakeupRejectedWithoutIndex", fdbLikeCaps, func(m *model) store.Store { return ignoresWakeup{m} }},
	{"wake-at-raises", "Due/WakeAtLowers", fdbLikeCaps, withDue(func(d dueModel) store.Store { return wakeAtRaises{d} })},
	{"set-wake-unguarded", "Due/SetWakeIsGuarded", fdbLikeCaps, withDue(func(d dueModel) store.Store { return setWakeUnguarded{d} })},
	{"wake-ceiling-ignored", "Due/CeilingBoundsTheNextLowering", fdbLikeCaps, withDue(func(d dueModel) store.Store { return ceilingIgnored{d} })},
	{"wakeup-despite-failure", "Due/WakeupOnlyWithItsBatch", fdbLikeCaps, withDue(func(d dueModel) store.Store { return wakeupDespiteFailure{d} })},
	{"due-ordered-by-partition", "Due/ScanDueOrderAndPaging", fdbLikeCaps, withDue(func(d dueModel) store.Store { return dueByPartition{d} })},
	{"stale-due-entries", "Due/ScanDueFollowsWakeChanges", fdbLikeCaps, withDue(func(d dueModel) store.Store { return &staleDue{dueModel: d} })},
	{"wake-at-read-then-set", "Due/ConcurrentWakeAtKeepsMinimum", fdbLikeCaps, withDue(func(d dueModel) store.Store { return wakeAtReadThenSet{d} })},
	{"set-wake-check-then-set", "Due/ConcurrentSetWakeGuarded", fdbLikeCaps, withDue(func(d dueModel) store.Store { return setWakeCheckThenSet{d} })},
}

// withDue gives a mutant's model a due index before wrapping it.
func withDue(wrap func(dueModel) store.Store) func(*model) store.Store {
	return func(m *model) store.Store {
		m.due = true
		return wrap(dueModel{m})
	}
}

// ignoresWakeup drops Wakeups instead of rejecting them.
type ignoresWakeup struct{ *model }

func (s ignoresWakeup) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if b == nil || b.Wakeup == nil {
		return s.model.Apply(ctx, p, b)
	}
	nb := b.Clone()
	nb.Wakeup = nil
	if nb.Ops() == 0 {
		return store.BatchOutcome{Outcome: store.Committed}, nil
	}
	return s.model.Apply(ctx, p, nb)
}

// forceWake rewrites b's Wakeup to an Exact one at at and drops its
// WakeIs preconditions, so it always applies.
func forceWake(_ context.Context, _ dueModel, _ store.Partition, b *store.Batch, at uint64) *store.Batch {
	nb := b.Clone()
	nb.Preconditions = slices.DeleteFunc(nb.Preconditions, func(c store.Precondition) bool { return c.Op == store.MustWakeAt })
	nb.Wakeup = &store.Wakeup{At: store.DecodeTime(at), Exact: true}
	return nb
}

// wakeGuard returns the index of b's WakeIs precondition, -1 for none.
func wakeGuard(b *store.Batch) int {
	return slices.IndexFunc(b.Preconditions, func(c store.Precondition) bool { return c.Op == store.MustWakeAt })
}

type wakeAtRaises struct{ dueModel }

func (s wakeAtRaises) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if b != nil && b.Wakeup != nil && !b.Wakeup.Exact && encodeTime(b.Wakeup.At) != 0 {
		b = forceWake(ctx, s.dueModel, p, b, encodeTime(b.Wakeup.At))
	}
	return s.dueModel.Apply(ctx, p, b)
}

type setWakeUnguarded struct{ dueModel }

func (s setWakeUnguarded) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if b != nil && b.Wakeup != nil && b.Wakeup.Exact {
		b = forceWake(ctx, s.dueModel, p, b, encodeTime(b.Wakeup.At))
	}
	return s.dueModel.Apply(ctx, p, b)
}

// ceilingIgnored drops the ceiling of every exact wakeup.
type ceilingIgnored struct{ dueModel }

func (s ceilingIgnored) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if b != nil && b.Wakeup != nil && encodeTime(b.Wakeup.Ceiling) != 0 {
		b = b.Clone()
		w := *b.Wakeup
		w.Ceiling = time.Time{}
		b.Wakeup = &w
	}
	return s.dueModel.Apply(ctx, p, b)
}

// wakeupDespiteFailure applies a batch's Wakeup even when the batch fails.
type wakeupDespiteFailure struct{ dueModel }

func (s wakeupDespiteFailure) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := s.dueModel.Apply(ctx, p, b)
	if err == nil && !out.Committed() && b.Wakeup != nil {
		_, _ = s.dueModel.Apply(ctx, p, &store.Batch{Wakeup: b.Wakeup})
	}
	return out, err
}

// dueByPartition orders the due index by partition, then time.
type dueByPartition struct{ dueModel }

func (s dueByPartition) ScanDue(ctx context.Context, q store.DueQuery) ([]store.DueEntry, error) {
	all, err := s.dueModel.ScanDue(ctx, store.DueQuery{From: store.DecodeTime(encodeTime(q.From)), Until: store.DecodeTime(encodeTime(q.Until)), Start: q.Start, Buckets: q.Buckets, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	byPartition := func(a, b store.DueEntry) int {
		return cmp.Or(bytes.Compare(a.Partition, b.Partition), cmp.Compare(encodeTime(a.At), encodeTime(b.At)))
	}
	slices.SortFunc(all, byPartition)
	if q.After != nil {
		all = slices.DeleteFunc(all, func(e store.DueEntry) bool { return byPartition(e, *q.After) <= 0 })
	}
	return all[:min(q.Limit, len(all))], nil
}

// staleDue keeps listing every wake time a partition ever had.
type staleDue struct {
	dueModel
	mu  sync.Mutex
	old []store.DueEntry
}

func (s *staleDue) ScanDue(ctx context.Context, q store.DueQuery) ([]store.DueEntry, error) {
	es, err := s.dueModel.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for _, e := range es {
		if !slices.ContainsFunc(s.old, func(o store.DueEntry) bool { return compareDue(q, o, e) == 0 }) {
			s.old = append(s.old, e)
		}
	}
	old := map[string]uint64{}
	var out []store.DueEntry
	for _, e := range s.old {
		old[string(e.Partition)] = encodeTime(e.At)
		out = append(out, listDue(old, q, q.Buckets+modelDueBuckets*btoi(q.Buckets == 0))...)
		delete(old, string(e.Partition))
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.DueEntry) int { return compareDue(q, a, b) })
	return out[:min(q.Limit, len(out))], nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *staleDue) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	_, _ = s.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1}) // records the wake times before the batch
	return s.dueModel.Apply(ctx, p, b)
}

// wakeAtReadThenSet lowers the wake time by reading it, then setting it
// unguarded.
type wakeAtReadThenSet struct{ dueModel }

func (s wakeAtReadThenSet) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if b == nil || b.Wakeup == nil || b.Wakeup.Exact {
		return s.dueModel.Apply(ctx, p, b)
	}
	cur, ok, err := s.NextWake(ctx, p)
	if err != nil {
		return store.BatchOutcome{}, err
	}
	at := encodeTime(b.Wakeup.At)
	if ok {
		at = min(at, encodeTime(cur))
	}
	time.Sleep(time.Millisecond) // wide enough that racing batches overlap even on a loaded machine
	return s.dueModel.Apply(ctx, p, forceWake(ctx, s.dueModel, p, b, at))
}

// setWakeCheckThenSet checks a SetWake's expectation, then sets unguarded.
type setWakeCheckThenSet struct{ dueModel }

func (s setWakeCheckThenSet) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	i := -1
	if b != nil {
		i = wakeGuard(b)
	}
	if i < 0 {
		return s.dueModel.Apply(ctx, p, b)
	}
	if cur, _, err := s.NextWake(ctx, p); err != nil || !cur.Equal(b.Preconditions[i].Wake) {
		return store.BatchOutcome{Outcome: store.PreconditionFailed, Failed: b.Preconditions[i], FailedIndex: i}, err
	}
	time.Sleep(time.Millisecond) // wide enough that racing batches overlap even on a loaded machine
	return s.dueModel.Apply(ctx, p, forceWake(ctx, s.dueModel, p, b, encodeTime(b.Wakeup.At)))
}
