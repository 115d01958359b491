package storetest

import (
	"bytes"
	"context"

	"github.com/mkit-dev/mkitfdb/store"
)

// prefetchMutants break store.Prefetcher, one bug at a time.
var prefetchMutants = []mutant{
	{"prefetch-decides-on-stale-reads", "Prefetch/ApplyDecidesOnTheStateItCommitsOn", fdbLikeCaps, func(m *model) store.Store { return stalePrefetch{m} }},
	{"prefetch-holds-the-writer", "Prefetch/HoldsNothingAWriterWaitsFor", fdbLikeCaps, func(m *model) store.Store { return lockingPrefetch{m} }},
	{"prefetch-applies-twice", "Prefetch/AppliesOnce", fdbLikeCaps, func(m *model) store.Store { return twicePrefetch{m} }},
}

// stalePrefetch decides the guards on prefetched keys on the values it
// read, as a prefetch that never learns of later writes would, and
// applies the rest of the batch.
type stalePrefetch struct{ *model }

func (s stalePrefetch) Prefetch(ctx context.Context, p store.Partition, keys []store.Key) (store.Prefetched, error) {
	vals, err := s.model.GetMany(ctx, p, keys)
	if err != nil {
		return nil, err
	}
	return &staleApply{m: s.model, p: p, keys: keys, vals: vals}, nil
}

type staleApply struct {
	m    *model
	p    store.Partition
	keys []store.Key
	vals []store.Value
}

func (a *staleApply) Apply(ctx context.Context, b *store.Batch) (store.BatchOutcome, error) {
	rest := b.Clone()
	rest.Preconditions = rest.Preconditions[:0]
	for i, c := range b.Preconditions {
		read := -1
		for j, k := range a.keys {
			if bytes.Equal(k, c.Key) {
				read = j
			}
		}
		switch {
		case read < 0:
			rest.Preconditions = append(rest.Preconditions, c)
		case !c.Holds(a.vals[read]):
			return store.BatchOutcome{Outcome: store.PreconditionFailed, Failed: c, FailedIndex: i}, nil
		}
	}
	if rest.Ops() == 0 {
		return store.BatchOutcome{Outcome: store.Committed}, nil
	}
	return a.m.Apply(ctx, a.p, rest)
}

func (*staleApply) Close() {}

// lockingPrefetch holds the model's lock from the prefetch to its Apply or
// Close, as a transaction kept open on a single-writer engine would.
type lockingPrefetch struct{ *model }

func (s lockingPrefetch) Prefetch(_ context.Context, p store.Partition, _ []store.Key) (store.Prefetched, error) {
	s.mu.Lock()
	return &lockedApply{m: s.model, p: p, held: true}, nil
}

type lockedApply struct {
	m    *model
	p    store.Partition
	held bool
}

func (a *lockedApply) Apply(ctx context.Context, b *store.Batch) (store.BatchOutcome, error) {
	a.Close()
	return a.m.Apply(ctx, a.p, b)
}

func (a *lockedApply) Close() {
	if a.held {
		a.held = false
		a.m.mu.Unlock()
	}
}

// twicePrefetch applies every batch handed to it, however often.
type twicePrefetch struct{ *model }

func (s twicePrefetch) Prefetch(_ context.Context, p store.Partition, _ []store.Key) (store.Prefetched, error) {
	return plainPrefetched{m: s.model, p: p}, nil
}

type plainPrefetched struct {
	m *model
	p store.Partition
}

func (a plainPrefetched) Apply(ctx context.Context, b *store.Batch) (store.BatchOutcome, error) {
	return a.m.Apply(ctx, a.p, b)
}

func (plainPrefetched) Close() {}
