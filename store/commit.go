package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/clock"
)

// Design note: one commit for many partitions.
//
// A guarded batch is atomic inside its partition. A producer that writes
// to many partitions at once (a timer for each of a hundred customers, a
// scheduler releasing the partitions it fired) would otherwise pay a
// commit per partition: on FoundationDB a round trip each, on bbolt an
// fsync each. A Committer commits several partitions' batches as one:
// every batch's preconditions are checked against the snapshot the
// writes commit on, and either every batch lands or none does. It is one
// transaction of the engine under the store (one FoundationDB
// transaction, one bbolt write transaction), so the commit's size is the
// engine's to bound: Capabilities states the bounds (MaxCommitBatches,
// MaxCommitOps, MaxCommitBytes), which a commit is validated against
// before any I/O. Each batch keeps what it means on its own: its Wakeup
// changes its partition's wake time and due index entry exactly as Apply
// would. The partitions of one commit are distinct, so no batch's guard
// depends on another batch's writes.

// PartitionBatch is one partition's guarded batch in a commit of several
// partitions (see Committer).
type PartitionBatch struct {
	Partition Partition
	Batch     *Batch
}

// CommitOutcome is what a commit of several partitions' batches reports:
// Committed when every batch landed; otherwise the outcome of the batch
// that decided the commit, with nothing written: the first batch, in the
// commit's order, whose deadline had passed or one of whose preconditions
// failed.
type CommitOutcome struct {
	BatchOutcome
	// Index is the deciding batch's index among the commit's batches (for
	// TransactMany: among its partitions), and Partition its partition;
	// both are set for PreconditionFailed and DeadlinePassed only.
	Index     int
	Partition Partition
}

func (o CommitOutcome) String() string {
	if o.Outcome == PreconditionFailed || o.Outcome == DeadlinePassed {
		return fmt.Sprintf("batch %d (%s): %v", o.Index, PartitionName(o.Partition), o.BatchOutcome)
	}
	return o.BatchOutcome.String()
}

// TransactManyFunc is TransactFunc for several partitions: it reads what
// it needs through rs (rs[i] reads the i-th partition TransactMany was
// given) and returns the batches to commit together, one per partition,
// in that order (a shorter slice leaves the rest without one); a nil or
// empty batch writes nothing to its partition. It keeps TransactFunc's
// contract: it may run several times, derives everything from what it
// reads, must recognise its own work done, and must not call the store.
type TransactManyFunc func(ctx context.Context, rs []Reader) ([]*Batch, error)

// Committer is implemented by stores that commit several partitions'
// batches in one atomic commit (see the design note above): fdblayer's
// Layer on every engine. Callers ask for it with a type assertion, as
// Transactor callers do; [Commit] and [TransactMany] do, and commit one
// partition at a time without it.
type Committer interface {
	// Commit applies batches, of distinct partitions, atomically: every
	// precondition of every batch is checked against the snapshot the
	// writes commit on, and either every batch lands (Committed) or none
	// does (the first batch whose deadline passed, or one of whose
	// preconditions failed, named by CommitOutcome). Each batch's Wakeup
	// changes its partition's wake time as Apply would. Unknown results,
	// retries and errors are Apply's, the error naming the commit's first
	// partition.
	//
	// It fails with ErrInvalid, before any I/O, when batches is empty,
	// names a partition twice or a nil batch, a batch fails
	// Validate(Capabilities().Full()), or a commit of several batches
	// passes MaxCommitBatches, MaxCommitOps or MaxCommitBytes (see
	// Capabilities.ValidateCommit). It does not retain or modify the
	// batches and is safe for concurrent use.
	Commit(ctx context.Context, batches []PartitionBatch) (CommitOutcome, error)

	// TransactManyOnce is Transactor.TransactOnce over several distinct
	// partitions: fn's reads, through one Reader per partition (a
	// WakeReader where the store keeps a due index), come from one
	// transaction's snapshot, and the batches fn returns commit in the
	// same transaction as Commit commits them, a read that another writer
	// changes before the commit making fn run again. The batches are
	// validated as Commit validates them; nil or empty ones are left out,
	// and when every one is, the zero CommitOutcome is returned, nothing
	// written. CommitOutcome.Index names the deciding batch's partition
	// among ps. The reads of one run share MaxTransactReadBytes.
	TransactManyOnce(ctx context.Context, ps []Partition, fn TransactManyFunc) (CommitOutcome, error)
}

// ValidateCommit checks a commit of batches against c without I/O, as a
// Committer does: each batch against c.Full(), and, when there are
// several, their count against MaxCommitBatches and their operations and
// bytes (Batch.Ops and Batch.Bytes summed) against MaxCommitOps and
// MaxCommitBytes. It fails with an error wrapping ErrInvalid naming the
// batch and limit, for an empty commit, a nil partition or batch, or a
// partition named twice (compared by identity).
func (c Capabilities) ValidateCommit(batches []PartitionBatch) error {
	if len(batches) == 0 {
		return fmt.Errorf("%w: empty commit", ErrInvalid)
	}
	full := c.Full()
	ops, bytes := 0, 0
	var seen map[string]int
	if len(batches) > 1 {
		seen = make(map[string]int, len(batches))
	}
	for i, pb := range batches {
		if pb.Partition == nil || pb.Batch == nil {
			return fmt.Errorf("%w: commit batch %d: nil partition or batch", ErrInvalid, i)
		}
		if err := pb.Batch.Validate(full); err != nil {
			return fmt.Errorf("commit batch %d (%s): %w", i, PartitionName(pb.Partition), err)
		}
		if seen != nil {
			id, err := pb.Partition.AppendTuple(nil)
			if err != nil {
				return fmt.Errorf("%w: commit batch %d: partition %s does not encode: %w", ErrInvalid, i, PartitionName(pb.Partition), err)
			}
			if j, dup := seen[string(id)]; dup {
				return fmt.Errorf("%w: commit batches %d and %d name one partition, %s: merge them", ErrInvalid, j, i, PartitionName(pb.Partition))
			}
			seen[string(id)] = i
		}
		ops, bytes = ops+pb.Batch.Ops(), bytes+pb.Batch.Bytes()
	}
	if len(batches) == 1 {
		return nil
	}
	switch {
	case len(batches) > c.MaxCommitBatches:
		return fmt.Errorf("%w: commit of %d batches, limit %d (MaxCommitBatches)", ErrInvalid, len(batches), c.MaxCommitBatches)
	case ops > c.MaxCommitOps:
		return fmt.Errorf("%w: commit of %d operations, limit %d (MaxCommitOps)", ErrInvalid, ops, c.MaxCommitOps)
	case bytes > c.MaxCommitBytes:
		return fmt.Errorf("%w: commit of %d bytes, limit %d (MaxCommitBytes)", ErrInvalid, bytes, c.MaxCommitBytes)
	}
	return nil
}

// CommitFits reports whether a commit holding ops operations and bytes
// bytes in n batches may take one more batch b, within c's commit limits
// (b alone always fits, if it is valid): the check of a caller packing
// batches into commits greedily.
func (c Capabilities) CommitFits(n, ops, bytes int, b *Batch) bool {
	return n == 0 || n+1 <= c.MaxCommitBatches && ops+b.Ops() <= c.MaxCommitOps && bytes+b.Bytes() <= c.MaxCommitBytes
}

// Commit applies batches of distinct partitions to s in one atomic commit
// when s is a Committer (see Committer.Commit); on another store a commit
// of one batch is Apply's, and one of several fails with ErrInvalid
// before any I/O. It is safe for concurrent use.
func Commit(ctx context.Context, s Store, batches []PartitionBatch) (CommitOutcome, error) {
	if s == nil {
		return CommitOutcome{}, fmt.Errorf("%w: commit: nil store", ErrInvalid)
	}
	if c, ok := s.(Committer); ok {
		return c.Commit(ctx, batches)
	}
	if len(batches) != 1 {
		if err := s.Capabilities().ValidateCommit(batches); err != nil {
			return CommitOutcome{}, fmt.Errorf("store: commit: %w", err)
		}
		return CommitOutcome{}, fmt.Errorf("%w: store: commit of %d batches: store %T commits one partition at a time", ErrInvalid, len(batches), s)
	}
	return applyOne(ctx, s, batches[0], 0)
}

// applyOne applies one batch with Apply, as a commit's batch i.
func applyOne(ctx context.Context, s Store, pb PartitionBatch, i int) (CommitOutcome, error) {
	if pb.Partition == nil || pb.Batch == nil {
		return CommitOutcome{}, fmt.Errorf("%w: commit batch %d: nil partition or batch", ErrInvalid, i)
	}
	out, err := s.Apply(ctx, pb.Partition, pb.Batch)
	co := CommitOutcome{BatchOutcome: out}
	if err == nil && !out.Committed() {
		co.Index, co.Partition = i, pb.Partition
	}
	return co, err
}

// TransactManyOnce runs fn on partitions ps of s and commits the batches
// it returns once: in one transaction when s is a Committer (see
// Committer.TransactManyOnce), else by running fn on reads of s (each
// its own snapshot, as TransactOnce's fallback reads) and applying what
// it returns, which must then be one batch at most (ErrInvalid
// otherwise, nothing written). fn's error is returned as it is; when fn
// returns no batch to write, the zero CommitOutcome. It fails with
// ErrInvalid for a nil store or fn, or no partition, and is safe for
// concurrent use.
func TransactManyOnce(ctx context.Context, s Store, ps []Partition, fn TransactManyFunc) (CommitOutcome, error) {
	if s == nil || fn == nil || len(ps) == 0 {
		return CommitOutcome{}, fmt.Errorf("%w: transact many: nil store or function, or no partition", ErrInvalid)
	}
	if c, ok := s.(Committer); ok {
		return c.TransactManyOnce(ctx, ps, fn)
	}
	rs := make([]Reader, len(ps))
	ends := make([]func(), len(ps))
	for i, p := range ps {
		rs[i], ends[i] = newReader(s, p)
	}
	bs, err := fn(ctx, rs)
	for _, end := range ends {
		end()
	}
	if err != nil {
		return CommitOutcome{}, err
	}
	batches, at, err := CommitBatches(ps, bs)
	if err != nil || len(batches) == 0 {
		return CommitOutcome{}, err
	}
	if len(batches) > 1 {
		return CommitOutcome{}, fmt.Errorf("%w: store: transact many: %d batches: store %T commits one partition at a time", ErrInvalid, len(batches), s)
	}
	return applyOne(ctx, s, batches[0], at[0])
}

// CommitBatches pairs the batches a TransactManyFunc returned for ps
// with their partitions, leaving out nil and empty ones, and returns, for
// each batch kept, its partition's index in ps. It fails with ErrInvalid
// when fn returned more batches than partitions.
func CommitBatches(ps []Partition, bs []*Batch) (batches []PartitionBatch, at []int, err error) {
	if len(bs) > len(ps) {
		return nil, nil, fmt.Errorf("%w: transact many: %d batches for %d partitions", ErrInvalid, len(bs), len(ps))
	}
	for i, b := range bs {
		if b == nil || b.Ops() == 0 && b.Wakeup == nil {
			continue
		}
		batches = append(batches, PartitionBatch{Partition: ps[i], Batch: b})
		at = append(at, i)
	}
	return batches, at, nil
}

// TransactMany is Transact over several partitions: it runs fn and
// commits the batches it returns with [TransactManyOnce], and after a
// failed precondition or an unknown commit result waits its backoff and
// runs fn again, within cfg.Retries (see [TransactConfig]). It returns
// and fails as Transact does, its errors naming the deciding batch's
// partition (or the first partition), and is safe for concurrent use.
func TransactMany(ctx context.Context, s Store, ps []Partition, fn TransactManyFunc, cfg TransactConfig) (CommitOutcome, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return CommitOutcome{}, err
	}
	if s == nil || fn == nil || len(ps) == 0 {
		return CommitOutcome{}, fmt.Errorf("%w: transact many: nil store or function, or no partition", ErrInvalid)
	}
	var fnErr error
	run := func(ctx context.Context, rs []Reader) ([]*Batch, error) {
		bs, err := fn(ctx, rs)
		fnErr = err
		return bs, err
	}
	var (
		last    CommitOutcome
		unknown error
	)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := clock.Sleep(ctx, jitter(cfg.MinBackoff, cfg.MaxBackoff, attempt-1)); err != nil {
				return last, transactError(ps[0], attempt, unknown, "ended during backoff: %w", err)
			}
		}
		if err := ctx.Err(); err != nil {
			return last, transactError(ps[0], attempt, unknown, "%w", err)
		}
		fnErr = nil
		out, err := TransactManyOnce(ctx, s, ps, run)
		switch {
		case err != nil && err == fnErr:
			return last, err
		case errors.Is(err, ErrUnknownResult):
			unknown, last = err, CommitOutcome{}
			if ctx.Err() != nil || attempt == cfg.Retries {
				return last, transactError(ps[0], attempt+1, nil, "%w", err)
			}
			continue
		case err != nil:
			return out, transactError(ps[0], attempt+1, unknown, "%w", err)
		case out.Outcome == 0:
			return out, nil
		}
		last = out
		switch out.Outcome {
		case Committed:
			return out, nil
		case DeadlinePassed:
			return out, transactError(out.Partition, attempt+1, unknown, "%w at %v", ErrDeadlinePassed, out.Now)
		case PreconditionFailed:
			if attempt == cfg.Retries {
				return out, transactError(out.Partition, attempt+1, unknown, "%w: precondition %d, %v", ErrPreconditionFailed, out.FailedIndex, out.Failed)
			}
		default:
			return out, transactError(ps[0], attempt+1, unknown, "%w: store reported %v", ErrUnavailable, out.Outcome)
		}
	}
}
