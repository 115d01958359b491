package timers

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: claims in batches.
//
// A partition fired alone costs two commits: its claim, and its
// outcomes' batch carrying the release. A service with a partition per
// entity fires many partitions holding a timer or two, so on a store that
// commits several partitions at once (store.Committer) a worker takes up
// to ClaimBatch due entries from the listing at a time (on a store whose
// calls overlap, no more than an even share of a listed page, so that
// every worker has some; where writes take turns, ClaimBatch: workers
// claiming at once would only queue for the writer) and handles them
// together:
//
//   - one claim: a store.TransactManyOnce whose function runs each
//     partition's claim (claimBatch: the wake time, the first page, the
//     lease) on that partition's Reader, at one snapshot, and commits the
//     leases and parked wake times of those it takes in one commit; the
//     others are counted as a claim of one partition counts them (stale,
//     contended, corrupt). A commit whose guard failed (a store whose
//     reads are not one snapshot) looks at all of them again, as a claim
//     of one partition does;
//   - one fire: each claimed partition's run (RunDue under the claim)
//     and release go on as they would alone, one run at a time on the
//     worker's goroutine, in the claim's order, but each batch a run
//     commits waits until every other run of the batch has one to commit
//     or has ended, and they commit together, in commits within the
//     store's MaxCommitBatches, MaxCommitOps and MaxCommitBytes (see
//     commitShared). A batch that decides its commit (a failed guard, a
//     passed deadline) gets that outcome, and the others are committed
//     again without it: one partition's raced outcome never costs
//     another partition's work, as within a partition (see dropRaced).
//
// Partitions of one timer each then cost two commits for ClaimBatch of
// them. Every guarantee stays the one partition's: each batch keeps its
// guards (lease, parked wake time, timer rows) and commits atomically in
// its partition, the leases and parked wake times are those of single
// claims, and the due index invariant holds batch by batch. The runs of
// a batch take turns, so handlers see no more concurrency than a worker
// gives them; a slow handler delays its neighbours' commits, never past
// the lease. The bucket rank start keeps schedulers off each other's
// entries; a claim that meets another scheduler's loses only the
// partitions that scheduler took (contended), after a conflict re-runs
// its function on the MVCC engine and FoundationDB.

// DefaultClaimBatch is how many due partitions a worker claims in one
// transaction on a store.Committer (see SchedulerConfig.ClaimBatch).
const DefaultClaimBatch = 16

// claimable is a listed partition a worker may claim: not corrupt, not
// backing off, and marked in flight on this Scheduler.
type claimable struct {
	p        store.Partition
	id       string
	listedMs uint64
	c        *claim
	err      error
}

// batched reports whether workers claim several partitions at once.
func (s *Scheduler) batched() bool {
	_, ok := s.store.(store.Committer)
	return ok && s.claimBatch > 1 && s.full.MaxCommitBatches > 1
}

// handleMany looks at several listed entries together: each as handle
// looks at one, claiming and firing those it may in shared commits (see
// the design note). It returns the store's errors, one per failed
// partition.
func (s *Scheduler) handleMany(ctx context.Context, es []store.DueEntry, r *TickReport) []error {
	var cs []*claimable
	for _, e := range es {
		if ctx.Err() != nil {
			break
		}
		if p, ok := s.admit(e, r); ok {
			cs = append(cs, &claimable{p: p, id: string(e.Partition), listedMs: encodedTime(e.At)})
		}
	}
	defer func() {
		for _, c := range cs {
			s.leave(c.id)
		}
	}()
	if len(cs) == 0 {
		return nil
	}
	if len(cs) == 1 {
		if err := s.claimAndFire(ctx, cs[0].p, cs[0].id, cs[0].listedMs, r); err != nil {
			return []error{err}
		}
		return nil
	}
	var errs []error
	if err := s.claimMany(ctx, cs, r); err != nil {
		if isCtxErr(ctx, err) || s.fencedBy(err, len(cs), r) {
			return nil
		}
		// One partition's failure must not fail the others: claim each
		// on its own (a claim that landed left its lease ours, which a
		// claim takes back).
		s.log.Warn("timers: scheduler: claim of several partitions failed; claiming each alone", "partitions", len(cs), "error", err)
		for _, c := range cs {
			if c.c, err = s.claim(ctx, c.p, c.listedMs, r); err != nil && !isCtxErr(ctx, err) {
				errs = append(errs, s.failed(c.id, c.p, "claim", err))
			}
		}
	}
	var claimed []*claimable
	for _, c := range cs {
		if c.c != nil {
			claimed = append(claimed, c)
		}
	}
	s.fireMany(ctx, claimed, r)
	for _, c := range claimed {
		if c.err != nil {
			errs = append(errs, s.failed(c.id, c.p, "fire", c.err))
			continue
		}
		s.backOff(c.id, false)
	}
	return errs
}

// claimMany claims the partitions of cs in one transaction (see the
// design note), setting each one's claim when it was taken and counting
// why in r when not.
func (s *Scheduler) claimMany(ctx context.Context, cs []*claimable, r *TickReport) error {
	ps := make([]store.Partition, len(cs))
	for i, c := range cs {
		ps[i] = c.p
	}
	_, prefetch := s.store.(store.Transactor)
	for attempt := 0; attempt < maxWakeAttempts; attempt++ {
		nowMs := s.nowMs()
		tries := make([]claimTry, len(cs))
		out, err := store.TransactManyOnce(ctx, s.store, ps, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
			bs := make([]*store.Batch, len(rs))
			for i, rd := range rs {
				tries[i] = claimTry{}
				b, err := s.claimReads(ctx, rd, nowMs, prefetch, &tries[i])
				if err != nil {
					return nil, fmt.Errorf("%s: %w", store.PartitionName(ps[i]), err)
				}
				bs[i] = b
			}
			return bs, nil
		})
		if err != nil {
			// Had it landed, the partitions stay parked under our lease:
			// a later tick's parked listing takes them back.
			return fmt.Errorf("claim: %w", err)
		}
		if out.Outcome == store.PreconditionFailed {
			continue // a wake time or lease changed: look again at all
		}
		if out.Outcome != 0 && !out.Committed() {
			return fmt.Errorf("claim: unexpected outcome %v", out)
		}
		for i, c := range cs {
			c.c, _, _ = s.claimed(c.p, c.listedMs == parkedMs, out.BatchOutcome, &tries[i], r)
		}
		return nil
	}
	for _, c := range cs {
		r.Contended++
		s.count(telemetry.MetricSchedulerContended, c.p)
	}
	return nil
}

// fireMany fires the claimed partitions of cs, each as fire does, their
// runs taking turns on this goroutine's behalf and their batches
// committed together (see the design note); it sets each one's error.
func (s *Scheduler) fireMany(ctx context.Context, cs []*claimable, r *TickReport) {
	if len(cs) == 1 {
		cs[0].err = s.fire(ctx, cs[0].p, cs[0].c, r)
		return
	}
	turns := make([]*turn, len(cs))
	for i, c := range cs {
		t := &turn{resume: make(chan struct{}), yield: make(chan *sharedApply)}
		turns[i] = t
		c.c.apply = t.apply
		go func() {
			<-t.resume
			c.err = s.fire(ctx, c.p, c.c, r)
			t.yield <- nil
		}()
	}
	live := turns
	for len(live) > 0 {
		var (
			pending []*sharedApply
			next    []*turn
		)
		for _, t := range live {
			// One run at a time: it goes on until it has a batch to
			// commit, or ends.
			t.resume <- struct{}{}
			if a := <-t.yield; a != nil {
				pending, next = append(pending, a), append(next, t)
			}
		}
		s.commitShared(pending)
		live = next
	}
}

// turn is one run of fireMany: it waits for resume to go on, and yields
// the batch it has to commit (nil: it ended).
type turn struct {
	resume chan struct{}
	yield  chan *sharedApply
}

// sharedApply is a batch a run of fireMany commits with the others.
type sharedApply struct {
	ctx context.Context
	p   store.Partition
	b   *store.Batch
	out store.BatchOutcome
	err error
}

// apply hands b to fireMany and waits for its commit: the run's
// applyFunc.
func (t *turn) apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	a := &sharedApply{ctx: ctx, p: p, b: b}
	t.yield <- a
	<-t.resume
	return a.out, a.err
}

// commitShared commits the pending batches (of distinct partitions) in as
// few commits as the store's limits allow, and sets each one's outcome
// or error: a batch that decides a commit gets that outcome, and the
// commit runs again without it; a commit that failed with nothing
// written (the store refused it as invalid, or failed) runs as one Apply
// per batch, so that each batch meets its own error; one whose result is
// unknown answers every batch with that error.
func (s *Scheduler) commitShared(pending []*sharedApply) {
	for len(pending) > 0 {
		n, ops, bytes := 0, 0, 0
		for n < len(pending) && s.full.CommitFits(n, ops, bytes, pending[n].b) {
			ops, bytes = ops+pending[n].b.Ops(), bytes+pending[n].b.Bytes()
			n++
		}
		s.commitChunk(pending[:n])
		pending = pending[n:]
	}
}

// commitChunk commits batches that fit one commit (see commitShared).
func (s *Scheduler) commitChunk(chunk []*sharedApply) {
	for len(chunk) > 0 {
		if len(chunk) == 1 {
			a := chunk[0]
			a.out, a.err = s.store.Apply(a.ctx, a.p, a.b)
			return
		}
		batches := make([]store.PartitionBatch, len(chunk))
		for i, a := range chunk {
			batches[i] = store.PartitionBatch{Partition: a.p, Batch: a.b}
		}
		out, err := store.Commit(chunk[0].ctx, s.store, sharedBatches(batches))
		switch {
		case errors.Is(err, store.ErrUnknownResult):
			// Every batch may have landed: each run decides as after an
			// unknown result of its own.
			for _, a := range chunk {
				a.err = err
			}
			return
		case err != nil:
			// Nothing landed: each batch alone meets its own error (a
			// batch the store refuses as invalid, a failure of one
			// partition's), and the others commit.
			for _, a := range chunk {
				a.out, a.err = s.store.Apply(a.ctx, a.p, a.b)
			}
			return
		case out.Committed():
			for _, a := range chunk {
				a.out = out.BatchOutcome
			}
			return
		case out.Index < 0 || out.Index >= len(chunk):
			for _, a := range chunk {
				a.err = fmt.Errorf("timers: commit of %d partitions: %w: outcome %v names batch %d", len(chunk), store.ErrUnavailable, out, out.Index)
			}
			return
		}
		// The batch that decided the commit gets its outcome; the others
		// are committed again without it.
		chunk[out.Index].out = out.BatchOutcome
		chunk = append(chunk[:out.Index:out.Index], chunk[out.Index+1:]...)
	}
}

// sharedBatches is the batches a shared commit commits. (A variable, so
// that the tests can check that a version dropping a partition's release
// is caught.)
var sharedBatches = func(batches []store.PartitionBatch) []store.PartitionBatch { return batches }
