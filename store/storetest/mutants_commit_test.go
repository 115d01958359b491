package storetest

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// commitMutants break store.Committer, one bug at a time.
var commitMutants = []mutant{
	{"commit-checks-first-batch-only", "Commit/FailedGuardInAnyBatchWritesNothing", fdbLikeCaps, func(m *model) store.Store { return commitFirstOnly{dueModel{m}} }},
	{"commit-applies-batch-by-batch", "Commit/FailedGuardInAnyBatchWritesNothing", fdbLikeCaps, func(m *model) store.Store { return commitOneByOne{dueModel{m}} }},
	{"commit-ignores-limits", "Commit/LimitsInvalid", fdbLikeCaps, func(m *model) store.Store { return commitNoLimits{dueModel{m}} }},
	{"transact-many-index-unmapped", "Commit/TransactManyReadsAndCommits", fdbLikeCaps, func(m *model) store.Store { return transactManyUnmapped{dueModel{m}} }},
}

// commitFirstOnly checks only the first batch's preconditions and writes
// every batch.
type commitFirstOnly struct{ dueModel }

func (s commitFirstOnly) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	ids, err := s.checkCommit(ctx, batches)
	if err != nil {
		return store.CommitOutcome{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(ids, batches, 1), nil
}

// commitOneByOne applies the batches one after another, each on its own:
// those before a failing one stay written.
type commitOneByOne struct{ dueModel }

func (s commitOneByOne) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	for i, pb := range batches {
		out, err := s.Apply(ctx, pb.Partition, pb.Batch)
		if err != nil || !out.Committed() {
			return store.CommitOutcome{BatchOutcome: out, Index: i, Partition: pb.Partition}, err
		}
	}
	return store.CommitOutcome{BatchOutcome: store.BatchOutcome{Outcome: store.Committed}}, nil
}

// commitNoLimits validates each batch but not the commit's limits.
type commitNoLimits struct{ dueModel }

func (s commitNoLimits) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	unbounded := s.caps
	unbounded.MaxCommitBatches, unbounded.MaxCommitOps, unbounded.MaxCommitBytes = 1<<30, 1<<30, 1<<30
	if err := unbounded.ValidateCommit(batches); err != nil {
		return store.CommitOutcome{}, fmt.Errorf("model: commit: %w", err)
	}
	ids := make([]string, len(batches))
	for i, pb := range batches {
		id, err := s.begin(ctx, pb.Partition)
		if err != nil {
			return store.CommitOutcome{}, err
		}
		ids[i] = id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(ids, batches, len(batches)), nil
}

// transactManyUnmapped reports a failed batch's index among the batches
// committed, not among the partitions the function was given.
type transactManyUnmapped struct{ dueModel }

func (s transactManyUnmapped) TransactManyOnce(ctx context.Context, ps []store.Partition, fn store.TransactManyFunc) (store.CommitOutcome, error) {
	var batches []store.PartitionBatch
	out, err := s.dueModel.TransactManyOnce(ctx, ps, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
		bs, err := fn(ctx, rs)
		batches, _, _ = store.CommitBatches(ps, bs)
		return bs, err
	})
	if err == nil && !out.Committed() {
		for i, pb := range batches {
			if pb.Partition == out.Partition {
				out.Index = i
			}
		}
	}
	return out, err
}
