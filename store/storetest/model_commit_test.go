package storetest

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// Commit makes the model a store.Committer: every batch checked, then
// every batch written, under the model's one lock.
func (m *model) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	ids, err := m.checkCommit(ctx, batches)
	if err != nil {
		return store.CommitOutcome{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commitLocked(ids, batches, len(batches)), nil
}

// checkCommit validates a commit as Commit does and returns its
// partitions' identities.
func (m *model) checkCommit(ctx context.Context, batches []store.PartitionBatch) ([]string, error) {
	if err := m.caps.ValidateCommit(batches); err != nil {
		return nil, fmt.Errorf("model: commit: %w", err)
	}
	ids := make([]string, len(batches))
	for i, pb := range batches {
		if err := m.check(pb.Partition, pb.Batch); err != nil {
			return nil, err
		}
		id, err := m.begin(ctx, pb.Partition)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// commitLocked decides the first checked batches (all: len(batches))
// and, when every one may land, writes them all; m.mu is held.
func (m *model) commitLocked(ids []string, batches []store.PartitionBatch, checked int) store.CommitOutcome {
	for i, pb := range batches[:checked] {
		if out := m.decideLocked(ids[i], pb.Batch); !out.Committed() {
			return store.CommitOutcome{BatchOutcome: out, Index: i, Partition: pb.Partition}
		}
	}
	for i, pb := range batches {
		m.writeLocked(ids[i], pb.Batch)
	}
	return store.CommitOutcome{BatchOutcome: store.BatchOutcome{Outcome: store.Committed}}
}

// TransactManyOnce runs fn under the model's lock with a reader per
// partition and commits what it returns as Commit does.
func (m *model) TransactManyOnce(ctx context.Context, ps []store.Partition, fn store.TransactManyFunc) (store.CommitOutcome, error) {
	if fn == nil || len(ps) == 0 {
		return store.CommitOutcome{}, fmt.Errorf("model: transact many: %w: nil function or no partition", store.ErrInvalid)
	}
	rs := make([]store.Reader, len(ps))
	readers := make([]*modelReader, len(ps))
	seen := map[string]bool{}
	for i, p := range ps {
		id, err := m.begin(ctx, p)
		if err != nil {
			return store.CommitOutcome{}, err
		}
		if seen[id] {
			return store.CommitOutcome{}, modelErr(p, fmt.Errorf("%w: partition named twice", store.ErrInvalid))
		}
		seen[id] = true
		readers[i] = &modelReader{m: m, p: p, id: id, live: true}
		rs[i] = readers[i]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bs, err := fn(context.WithValue(ctx, modelTxnKey{}, m), rs)
	for _, r := range readers {
		r.end()
	}
	if err != nil {
		return store.CommitOutcome{}, err
	}
	batches, at, err := store.CommitBatches(ps, bs)
	if err != nil || len(batches) == 0 {
		return store.CommitOutcome{}, err
	}
	ids, err := m.checkCommit(ctx, batches)
	if err != nil {
		return store.CommitOutcome{}, err
	}
	out := m.commitLocked(ids, batches, len(batches))
	if !out.Committed() {
		out.Index = at[out.Index]
	}
	return out, nil
}
