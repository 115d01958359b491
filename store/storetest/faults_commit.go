package storetest

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

var _ store.Committer = (*Faults)(nil)

// Commit implements store.Committer over any inner store: counted,
// delayed and failed as a call of MethodCommit (and numbered among the
// calls that may commit, see Call.Commit); BeforeApply hooks run for each
// batch, in order, before the inner store is called; then store.Commit on
// the inner store (its Commit when it is a store.Committer, else Apply
// for one batch and ErrInvalid for several); a matching commit-then-fail
// rule replaces a Committed outcome with an error wrapping
// store.ErrUnknownResult.
func (f *Faults) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	c := Call{Method: MethodCommit, Batches: batches}
	if len(batches) > 0 {
		c.Partition = batches[0].Partition
	}
	pl := f.start(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.CommitOutcome{}, err
	}
	for _, pb := range batches {
		if err := pl.runBeforeApply(ctx, &c, pb.Partition, pb.Batch); err != nil {
			return store.CommitOutcome{}, err
		}
	}
	out, err := store.Commit(ctx, f.inner, batches)
	if err == nil && pl.commitThenFail && out.Committed() {
		return store.CommitOutcome{}, fmt.Errorf("storetest: %s committed, result withheld: %w", c.describe(), store.ErrUnknownResult)
	}
	return out, err
}

// TransactManyOnce implements store.Committer over any inner store, as
// TransactOnce does over one partition: counted and delayed as a call of
// MethodTransactMany, its failure and commit-then-fail rules matched once
// the function has returned its batches (Call.Batches), its function's
// reads counted and faulted as reads. With no hook configured and an
// inner store.Committer, the function runs in the inner store's
// transaction; with hooks, it runs on reads through the Faults and its
// batches commit in the inner transaction only if every read, made again
// there, returns what it returned (else it runs again, at most 100
// times), BeforeApply hooks running for each batch in between. Over an
// inner store that is not a store.Committer, the function runs on reads
// through the Faults and its batches are committed with the Faults'
// Commit.
func (f *Faults) TransactManyOnce(ctx context.Context, ps []store.Partition, fn store.TransactManyFunc) (store.CommitOutcome, error) {
	c := Call{Method: MethodTransactMany, Partitions: ps}
	if len(ps) > 0 {
		c.Partition = ps[0]
	}
	pl := f.count(&c)
	if err := pl.enter(ctx, &c); err != nil {
		return store.CommitOutcome{}, err
	}
	if fn == nil || len(ps) == 0 {
		return store.CommitOutcome{}, fmt.Errorf("storetest: %s: %w: nil function or no partition", c.describe(), store.ErrInvalid)
	}
	inner, ok := f.inner.(store.Committer)
	var (
		out store.CommitOutcome
		err error
	)
	switch {
	case !ok:
		out, err = f.transactManyCommit(ctx, ps, fn, &c, &pl)
	case len(pl.beforeApply) == 0 && len(pl.afterRead) == 0:
		out, err = inner.TransactManyOnce(ctx, ps, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
			frs := make([]*faultReader, len(rs))
			wrapped := make([]store.Reader, len(rs))
			for i, r := range rs {
				frs[i] = &faultReader{f: f, p: ps[i], inner: r, live: true}
				wrapped[i] = frs[i]
			}
			bs, err := fn(ctx, wrapped)
			for _, fr := range frs {
				fr.end()
			}
			if err != nil {
				return nil, err
			}
			if c.Batches, _, err = store.CommitBatches(ps, bs); err != nil {
				return nil, err
			}
			if pl.match(&c); pl.fail != nil {
				return nil, pl.fail
			}
			return bs, nil
		})
	default:
		out, err = f.transactManyValidated(ctx, inner, ps, fn, &c, &pl)
	}
	if err == nil && pl.commitThenFail && out.Committed() {
		return store.CommitOutcome{}, fmt.Errorf("storetest: %s committed, result withheld: %w", c.describe(), store.ErrUnknownResult)
	}
	return out, err
}

// recordMany runs fn on a recorder per partition (reads through f) and
// returns the recorders, fn's batches and fn's error.
func (f *Faults) recordMany(ctx context.Context, ps []store.Partition, fn store.TransactManyFunc) ([]*recorder, []*store.Batch, error) {
	recs := make([]*recorder, len(ps))
	rs := make([]store.Reader, len(ps))
	for i, p := range ps {
		recs[i] = &recorder{f: f, p: p, live: true}
		rs[i] = recs[i]
	}
	bs, err := fn(ctx, rs)
	for _, r := range recs {
		r.end()
	}
	return recs, bs, err
}

// transactManyCommit runs fn on reads through f and commits its batches
// with f.Commit: the inner store is not a store.Committer.
func (f *Faults) transactManyCommit(ctx context.Context, ps []store.Partition, fn store.TransactManyFunc, c *Call, pl *plan) (store.CommitOutcome, error) {
	_, bs, err := f.recordMany(ctx, ps, fn)
	if err != nil {
		return store.CommitOutcome{}, err
	}
	batches, at, err := store.CommitBatches(ps, bs)
	if err != nil {
		return store.CommitOutcome{}, err
	}
	c.Batches = batches
	if pl.match(c); pl.fail != nil {
		return store.CommitOutcome{}, pl.fail
	}
	if len(batches) == 0 {
		return store.CommitOutcome{}, nil
	}
	out, err := f.Commit(ctx, batches)
	if err == nil && !out.Committed() {
		out.Index = at[out.Index]
	}
	return out, err
}

// transactManyValidated runs fn on reads through f and commits its
// batches in the inner store's transaction once its reads, made again
// there, return what they returned (see TransactOnce's design note).
func (f *Faults) transactManyValidated(ctx context.Context, inner store.Committer, ps []store.Partition, fn store.TransactManyFunc, c *Call, pl *plan) (store.CommitOutcome, error) {
	for run := 0; run < maxValidations; run++ {
		if err := ctx.Err(); err != nil {
			return store.CommitOutcome{}, fmt.Errorf("storetest: %s: %w: %w", c.describe(), store.ErrUnavailable, err)
		}
		recs, bs, fnErr := f.recordMany(ctx, ps, fn)
		if fnErr == nil {
			batches, _, err := store.CommitBatches(ps, bs)
			if err != nil {
				return store.CommitOutcome{}, err
			}
			c.Batches = batches
			if pl.match(c); pl.fail != nil {
				return store.CommitOutcome{}, pl.fail
			}
			for _, pb := range batches {
				if err := pl.runBeforeApply(ctx, c, pb.Partition, pb.Batch); err != nil {
					return store.CommitOutcome{}, err
				}
			}
		}
		out, err := inner.TransactManyOnce(ctx, ps, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
			for i, r := range rs {
				same, err := recs[i].replay(ctx, r)
				switch {
				case err != nil:
					return nil, err
				case !same:
					return nil, errStale
				}
			}
			if fnErr != nil {
				return nil, errFnFailed
			}
			return bs, nil
		})
		switch {
		case err == errStale:
			continue
		case err == errFnFailed:
			return store.CommitOutcome{}, fnErr
		}
		return out, err
	}
	return store.CommitOutcome{}, fmt.Errorf("storetest: %s: %w: the function's reads changed before each of %d commits", c.describe(), store.ErrUnavailable, maxValidations)
}
