package storetest

import (
	"context"
	"maps"

	"github.com/mkit-dev/mkitfdb/store"
)

// transactMutants break store.Transactor and the scan byte budget, one
// bug at a time.
var transactMutants = []mutant{
	{"txn-reads-outside-snapshot", "Transact/ReadsAreOneSnapshot", fdbLikeCaps, func(m *model) store.Store { return txnOutsideSnapshot{m} }},
	{"txn-commits-without-conflict-check", "Transact/WriterBetweenReadAndCommitRerunsFn", fdbLikeCaps, func(m *model) store.Store { return txnNoConflictCheck{m} }},
	{"txn-writes-on-fn-error", "Transact/FnErrorWritesNothing", fdbLikeCaps, func(m *model) store.Store { return txnWritesOnError{m} }},
	{"txn-reruns-failed-guard", "Transact/PreconditionFailedWritesNothing", fdbLikeCaps, func(m *model) store.Store { return txnRerunsFailedGuard{m} }},
	{"txn-ignores-deadline", "Transact/DeadlinePassedWritesNothing", fdbLikeCaps, func(m *model) store.Store { return txnIgnoresDeadline{m} }},
	{"txn-nested-call-waits", "Transact/NestedCallFailsNotDeadlocks", fdbLikeCaps, func(m *model) store.Store { return txnUnmarked{m} }},
	{"txn-reader-outlives-fn", "Transact/ReaderEndsWithFn", fdbLikeCaps, func(m *model) store.Store { return txnReaderOutlives{m} }},
	{"txn-ignores-read-budget", "Transact/ReadsWithinBudget", noBudgets, func(m *model) store.Store { return claimsBudgets{m} }},
	{"scan-ignores-byte-budget", "Scan/PageEndsAtByteBudget", noBudgets, func(m *model) store.Store { return claimsBudgets{m} }},
	{"scan-budget-skips-row", "Scan/PageEndsAtByteBudget", fdbLikeCaps, func(m *model) store.Store { return scanSkipsAtBudget{m} }},
}

// noBudgets are fdbLikeCaps without the byte budgets, for a model that
// claims fdbLikeCaps' budgets and keeps none.
var noBudgets = func() store.Capabilities {
	c := fdbLikeCaps
	c.MaxScanBytes, c.MaxTransactReadBytes = 0, 0
	return c
}()

// claimsBudgets reports fdbLikeCaps' byte budgets, which its model does
// not keep.
type claimsBudgets struct{ *model }

func (claimsBudgets) Capabilities() store.Capabilities { return fdbLikeCaps }

// plainReader reads each row as a call of its own, outside any snapshot.
type plainReader struct {
	s store.Store
	p store.Partition
}

func (r plainReader) Partition() store.Partition { return r.p }

func (r plainReader) Get(ctx context.Context, key store.Key) (store.Value, bool, error) {
	return r.s.Get(ctx, r.p, key)
}

func (r plainReader) GetMany(ctx context.Context, keys []store.Key) ([]store.Value, error) {
	return r.s.GetMany(ctx, r.p, keys)
}

func (r plainReader) Scan(ctx context.Context, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	return r.s.Scan(ctx, r.p, start, end, after, limit)
}

// applyBatch applies what a function returned, as TransactOnce reports it.
func applyBatch(ctx context.Context, s store.Store, p store.Partition, b *store.Batch, err error) (store.BatchOutcome, error) {
	if err != nil {
		return store.BatchOutcome{}, err
	}
	if b == nil || b.Ops() == 0 && b.Wakeup == nil {
		return store.BatchOutcome{}, nil
	}
	return s.Apply(ctx, p, b)
}

// txnOutsideSnapshot reads every row as it is at the moment, then applies
// the batch.
type txnOutsideSnapshot struct{ *model }

func (s txnOutsideSnapshot) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	b, err := fn(ctx, plainReader{s.model, p})
	return applyBatch(ctx, s.model, p, b, err)
}

// txnNoConflictCheck reads one snapshot, copied when it starts, and
// applies the batch without checking that nothing it read changed since.
type txnNoConflictCheck struct{ *model }

func (s txnNoConflictCheck) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	id, err := partitionID(p)
	if err != nil {
		return store.BatchOutcome{}, err
	}
	snap := newModel(s.clk, s.caps)
	s.mu.Lock()
	snap.parts[id] = maps.Clone(s.parts[id])
	s.mu.Unlock()
	b, err := fn(ctx, plainReader{snap, p})
	return applyBatch(ctx, s.model, p, b, err)
}

// txnWritesOnError applies the function's batch even when it fails.
type txnWritesOnError struct{ *model }

func (s txnWritesOnError) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	var fnErr error
	out, err := s.model.TransactOnce(ctx, p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		b, err := fn(ctx, r)
		fnErr = err
		return b, nil
	})
	if fnErr != nil {
		return store.BatchOutcome{}, fnErr
	}
	return out, err
}

// txnRerunsFailedGuard runs the function again after a failed guard,
// which only its caller may decide.
type txnRerunsFailedGuard struct{ *model }

func (s txnRerunsFailedGuard) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	out, err := s.model.TransactOnce(ctx, p, fn)
	if err == nil && out.Outcome == store.PreconditionFailed {
		return s.model.TransactOnce(ctx, p, fn)
	}
	return out, err
}

// txnIgnoresDeadline drops the batch's deadline.
type txnIgnoresDeadline struct{ *model }

func (s txnIgnoresDeadline) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	return s.model.TransactOnce(ctx, p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		b, err := fn(ctx, r)
		if b != nil && !b.Deadline.IsZero() {
			b = b.Clone()
			b.Deadline = b.Deadline.AddDate(100, 0, 0)
		}
		return b, err
	})
}

// txnUnmarked hands the function its caller's context, so that a nested
// call cannot tell it is one and waits for the lock its transaction holds.
type txnUnmarked struct{ *model }

func (s txnUnmarked) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	return s.model.transact(ctx, p, fn, false, true)
}

// txnReaderOutlives leaves the function's Reader reading after it returned.
type txnReaderOutlives struct{ *model }

func (s txnReaderOutlives) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	return s.model.transact(ctx, p, fn, true, false)
}

// scanSkipsAtBudget resumes a page that ended at the byte budget after
// the row that did not fit, skipping it.
type scanSkipsAtBudget struct{ *model }

func (s scanSkipsAtBudget) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.model.Scan(ctx, p, start, end, after, limit)
	if err != nil || page.Next == nil || len(page.Entries) == limit {
		return page, err
	}
	next, err := s.model.Scan(ctx, p, start, end, page.Next, 1)
	if err != nil || len(next.Entries) == 0 {
		return page, err
	}
	id, err := partitionID(p)
	if err != nil {
		return store.ScanPage{}, err
	}
	page.Next = encodeModelCursor(modelCursor{part: id, start: start, end: end, last: next.Entries[0].Key})
	if next.Next == nil {
		page.Next = nil
	}
	return page, nil
}
