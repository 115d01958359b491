package timers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// claim is a lease this Scheduler holds on a partition.
type claim struct {
	// lease is the lease row as written: the finishing batch requires it.
	lease store.Value
	// nowMs is the time of the claim, and of the run.
	nowMs uint64
	// page is the first page of due timers, read by the claim.
	page *timerPage
	// recovered: the claim took over another owner's expired lease.
	recovered bool
	// queuesPaused: the partition's queues are paused (PausePartition).
	queuesPaused bool
	// apply commits the run's and the release's batches: the store's
	// Apply, or, when the claim was made with others, the commit they
	// share (see fireMany).
	apply applyFunc
}

// applyFunc applies a guarded batch to a partition, as store.Store.Apply.
type applyFunc func(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error)

// handle looks at one listed entry: it parses the partition, claims it and
// fires it. It fails with the store's errors only; a partition skipped for
// any other reason is counted in r.
func (s *Scheduler) handle(ctx context.Context, e store.DueEntry, r *TickReport) error {
	if ctx.Err() != nil {
		return nil
	}
	p, ok := s.admit(e, r)
	if !ok {
		return nil
	}
	id := string(e.Partition)
	defer s.leave(id)
	return s.claimAndFire(ctx, p, id, encodedTime(e.At), r)
}

// admit returns the partition a listed entry names, marked in flight on
// this Scheduler (the caller leaves it), unless it names none (corrupt),
// this Scheduler backs off from it, or it is already in flight here:
// those it counts in r.
func (s *Scheduler) admit(e store.DueEntry, r *TickReport) (store.Partition, bool) {
	p, err := s.partition(e.Partition)
	if err != nil {
		r.Corrupt++
		s.metrics.Add(telemetry.MetricSchedulerCorrupt, nil, 1)
		if s.corrupt.allow(string(e.Partition), s.nowMs(), corruptLogInterval) {
			s.log.Error("timers: scheduler: due index entry names no partition the store can address; skipped (logged once an hour)",
				"identity", fmt.Sprintf("%x", e.Partition), "wake_ms", encodedTime(e.At), "error", err)
		}
		return nil, false
	}
	id := string(e.Partition)
	if s.fenced() {
		r.Fenced++
		return nil, false
	}
	if s.backingOff(id) {
		r.BackedOff++
		return nil, false
	}
	if !s.enter(id) {
		// Another Tick of this Scheduler is firing it.
		if encodedTime(e.At) != parkedMs {
			r.Contended++
			s.count(telemetry.MetricSchedulerContended, p)
		}
		return nil, false
	}
	return p, true
}

// claimAndFire claims partition p (identity id, listed at listedMs) and
// fires it, failing with the store's errors only.
func (s *Scheduler) claimAndFire(ctx context.Context, p store.Partition, id string, listedMs uint64, r *TickReport) error {
	c, err := s.claim(ctx, p, listedMs, r)
	if err != nil {
		if isCtxErr(ctx, err) || s.fencedBy(err, 1, r) {
			return nil
		}
		return s.failed(id, p, "claim", err)
	}
	if c == nil {
		return nil
	}
	if err := s.fire(ctx, p, c, r); err != nil {
		return s.failed(id, p, "fire", err)
	}
	s.backOff(id, false)
	return nil
}

// corruptLogInterval is how often an entry that names no partition is
// logged again: it stays in the due index (no batch can reach its
// partition to change it) and is listed at every tick.
const corruptLogInterval = time.Hour

// partition returns the partition a due index entry names: what
// ParsePartition makes of its identity when it knows it, else the
// identity itself (store.Identity), which addresses the same rows. It
// fails only for an identity that is not a tuple.
func (s *Scheduler) partition(identity []byte) (store.Partition, error) {
	if s.parse != nil {
		if p, err := s.parse(identity); err == nil && p != nil {
			return p, nil
		}
	}
	return store.ParseIdentity(identity)
}

// failed counts and logs a failure of partition p (identity id), backs off
// from it, and returns the error naming it.
func (s *Scheduler) failed(id string, p store.Partition, what string, err error) error {
	s.backOff(id, true)
	s.count(telemetry.MetricSchedulerErrors, p)
	s.log.Error("timers: scheduler: partition "+what+" failed", "partition", store.PartitionName(p), "error", err)
	return fmt.Errorf("timers: scheduler: %s %s: %w", what, store.PartitionName(p), err)
}

// claimState is what a claim's transaction found.
type claimState int

const (
	claimTaken     claimState = iota // the batch takes the lease
	claimStale                       // the wake time is no longer due
	claimContended                   // another worker holds the lease
	claimCorrupt                     // the lease does not decode
)

// claim takes partition p's lease and parks its wake time, expecting the
// wake time listedMs the index listed, in one transaction (see
// claimReads). The page feeds the fire. It returns nil, counting why in
// r, unless the claim committed.
func (s *Scheduler) claim(ctx context.Context, p store.Partition, listedMs uint64, r *TickReport) (*claim, error) {
	// The first page feeds the fire only when it is read in the claim's
	// transaction: a timer written after the scan then fails the claim (a
	// conflict, and the function runs again) or lowers the parked wake
	// time after it. On a store that is not a Transactor each read is its
	// own snapshot, and a timer written between the scan and the claim's
	// commit could be missed by the run and by its release: there RunDue
	// scans once the claim has committed.
	_, prefetch := s.store.(store.Transactor)
	for attempt := 0; attempt < maxWakeAttempts; attempt++ {
		nowMs := s.nowMs()
		var t claimTry
		out, err := store.TransactOnce(ctx, s.store, p, func(ctx context.Context, rd store.Reader) (*store.Batch, error) {
			t = claimTry{}
			return s.claimReads(ctx, rd, nowMs, prefetch, &t)
		})
		if err != nil {
			// Had it landed, the partition stays parked under our lease:
			// a later tick's parked listing takes it back.
			return nil, fmt.Errorf("claim: %w", err)
		}
		if c, again, err := s.claimed(p, listedMs == parkedMs, out, &t, r); !again {
			return c, err
		}
	}
	// The wake time kept moving under busy writers: the next tick looks.
	r.Contended++
	s.count(telemetry.MetricSchedulerContended, p)
	return nil, nil
}

// claimTry is what one run of a claim's function found.
type claimTry struct {
	state claimState
	c     *claim // claimTaken only
	wake  uint64 // the wake time read
}

// claimReads reads, through rd, in order, the wake time (stale unless due
// or parked), the first page of due timers with their reference entries
// (when prefetch: rd reads one snapshot) and the lease (held by another
// worker and live, or of a newer version: contended; not decodable:
// corrupt; absent, expired or ours: taken), records in t what it found, and returns the claim's
// batch: the lease replaced by this Scheduler's, the wake time read
// replaced by ParkedWake, guarded by both. Nothing to write unless taken.
func (s *Scheduler) claimReads(ctx context.Context, rd store.Reader, nowMs uint64, prefetch bool, t *claimTry) (*store.Batch, error) {
	wr, ok := rd.(store.WakeReader)
	if !ok { // NewScheduler requires a store.DueIndex: unreachable
		return nil, fmt.Errorf("store %T reads no wake time: %w", s.store, store.ErrInvalid)
	}
	read, ok, err := wr.NextWake(ctx)
	if err != nil {
		return nil, fmt.Errorf("read wake time: %w", err)
	}
	if t.wake = encodedTime(read); !ok || t.wake > nowMs && t.wake != parkedMs && !pausedDue(t.wake, s.pauseView().generation, nowMs) {
		t.state = claimStale
		return nil, nil
	}
	var (
		pg       *timerPage
		observed store.Value
		pause    store.Value
	)
	if prefetch {
		pageLimit := min(DefaultPageSize, s.run.Budget.MaxTimers) + 1
		page, vals, err := readTimers(ctx, rd, true, nil, pageLimit, nowMs, s.leaseKey, partitionPauseKey)
		if err != nil {
			return nil, err
		}
		pg, observed, pause = &page, vals[0], vals[1]
	} else {
		vals, err := rd.GetMany(ctx, []store.Key{s.leaseKey, partitionPauseKey})
		if err != nil {
			return nil, fmt.Errorf("read lease: %w", err)
		}
		if len(vals) != 2 {
			return nil, fmt.Errorf("read lease: %d values for 2 keys: %w", len(vals), store.ErrCorrupt)
		}
		observed, pause = vals[0], vals[1]
	}
	recovered := false
	if observed != nil {
		held, err := leaseValues.Decode(observed)
		switch {
		case errors.Is(err, store.ErrNewerVersion):
			// A newer binary's scheduler holds it: contended until it
			// goes, as any lease of another (its expiry cannot be read).
			t.state = claimContended
			return nil, nil
		case err != nil:
			t.state = claimCorrupt
			return nil, nil
		case held.Owner != s.owner && held.ExpiresAtMs > nowMs:
			t.state = claimContended
			return nil, nil
		}
		recovered = held.Owner != s.owner
	}
	expires := addMs(nowMs, s.leaseMs)
	lease, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: s.owner, ExpiresAtMs: expires})
	if err != nil { // NewScheduler bounds the owner: unreachable
		return nil, err
	}
	t.state = claimTaken
	t.c = &claim{lease: lease, nowMs: nowMs, page: pg, recovered: recovered, queuesPaused: pause != nil}
	// Parked with the lease's expiry as its ceiling: a timer written
	// during the fire lowers the wake time to at most the expiry, so
	// that it is due when another worker may take over.
	return store.NewBatch().Require(store.Guard(s.leaseKey, observed)).Put(s.leaseKey, lease).
		SetWakeCeiling(store.DecodeTime(t.wake), ParkedWake, store.DecodeTime(expires)), nil
}

// leaseValues reads scheduler leases in every version this binary knows: a
// lease of a newer version is store.ErrNewerVersion, not corrupt.
var leaseValues = gen.NewSchedulerLeaseKeyValues(struct{}{})

// claimed counts what a claim of p found (t) and its commit (out) did,
// and returns the claim when it committed; again when the commit's guard
// failed (the wake time or the lease changed between the reads and the
// commit, on a store that is not a Transactor) and the claim should look
// again. Another worker's live lease on a partition listed parked is the
// normal state of a partition in flight, not contention.
func (s *Scheduler) claimed(p store.Partition, listedParked bool, out store.BatchOutcome, t *claimTry, r *TickReport) (c *claim, again bool, err error) {
	switch {
	case t.state == claimStale:
		r.Stale++
		s.count(telemetry.MetricSchedulerStale, p)
		return nil, false, nil
	case t.state == claimCorrupt:
		r.Corrupt++
		s.metrics.Add(telemetry.MetricSchedulerCorrupt, nil, 1)
		s.log.Error("timers: scheduler: lease does not decode; partition left alone", "partition", store.PartitionName(p))
		return nil, false, nil
	case t.state == claimContended:
		if !listedParked || t.wake != parkedMs {
			r.Contended++
			s.count(telemetry.MetricSchedulerContended, p)
		}
		return nil, false, nil
	case out.Committed():
		r.Claimed++
		s.count(telemetry.MetricSchedulerClaimed, p)
		if t.c.recovered {
			r.Recovered++
			s.count(telemetry.MetricSchedulerRecovered, p)
			s.log.Warn("timers: scheduler: took over an expired lease", "partition", store.PartitionName(p))
		}
		return t.c, false, nil
	case out.Outcome == store.PreconditionFailed:
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("claim: unexpected outcome %v", out)
}

// fire runs partition p's due timers under claim c and releases the
// claim: in the run's last change when it can (see claimHold), else in a
// batch of its own that deletes the lease and sets the wake time to what
// the run left (Report.NextDue, which covers every timer it did not
// delete, even when it failed). The run and the release outlive ctx's
// cancellation, bounded by the lease each.
func (s *Scheduler) fire(ctx context.Context, p store.Partition, c *claim, r *TickReport) error {
	if c.apply == nil {
		c.apply = s.store.Apply
	}
	view := s.pauseView()
	h := &claimHold{leaseKey: s.leaseKey, lease: c.lease, full: s.full, page: c.page, apply: c.apply, generation: view.generation}
	if c.queuesPaused || len(view.kinds) > 0 {
		h.paused = func(k Kind) bool { return view.kinds[k] || c.queuesPaused && k.Queue() }
	}
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
	rep, runErr := runDue(runCtx, s.store, p, s.reg, store.DecodeTime(c.nowMs), s.run, h)
	cancel()
	r.Timers.add(rep)
	if rep.More {
		// At its earliest remaining due time: the next tick lists it with
		// every other partition due by then.
		r.Requeued++
		s.count(telemetry.MetricSchedulerRequeued, p)
	}
	if runErr != nil {
		s.log.Error("timers: scheduler: run failed; partition looked at again",
			"partition", store.PartitionName(p), "next_ms", encodedTime(rep.NextDue), "error", runErr)
	}
	var err error
	if !h.released {
		finishCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
		defer cancel()
		wake, ceiling := h.releaseWake(encodedTime(rep.NextDue), rep.Paused)
		err = s.finish(finishCtx, p, c, wake, ceiling, h.wakeMoved, r)
	}
	if runErr != nil {
		return errors.Join(fmt.Errorf("run due: %w", runErr), err)
	}
	return err
}

// finish releases the lease and sets the wake time to next (0: none;
// with ceiling, when next is a paused wake time: see releaseWake) in
// one batch, guarded by the lease still being c's and the wake time still
// parked. A timer written meanwhile has lowered the wake time (see the
// design note): then it re-reads it and keeps the earlier of the two
// (reading it first when the run saw it lowered: moved). A
// lease no longer ours means it expired and another worker claimed the
// partition: finish counts it and leaves the partition to that worker.
func (s *Scheduler) finish(ctx context.Context, p store.Partition, c *claim, next, ceiling uint64, moved bool, r *TickReport) error {
	expect, want := uint64(parkedMs), next
	if moved {
		m, err := s.wakeOf(ctx, p)
		if err != nil {
			return err
		}
		expect, want = m, earlierWake(m, next)
	}
	for attempt := 1; ; attempt++ {
		b := store.NewBatch().Require(store.Equals(s.leaseKey, c.lease)).Delete(s.leaseKey)
		switch {
		case attempt <= maxWakeAttempts:
			setWake(b, expect, want, ceiling)
		case want != 0:
			b.WakeAt(store.DecodeTime(want))
		}
		out, err := c.apply(ctx, p, b)
		switch {
		case err != nil:
			// The lease expires, or the parked listing takes it back.
			return fmt.Errorf("finish: %w", err)
		case out.Committed():
			return nil
		case wakeMoved(out):
			m, err := s.wakeOf(ctx, p)
			if err != nil {
				return err
			}
			expect, want = m, earlierWake(m, next)
			s.log.Debug("timers: scheduler: wake time moved during the run; keeping the earlier",
				"partition", store.PartitionName(p), "wake_ms", m, "next_ms", next)
		case out.Outcome == store.PreconditionFailed:
			// Nothing of the run is lost with the lease: every timer it
			// moved carried its own WakeAt, and the new owner's run sees
			// the timers it left.
			r.LeaseLost++
			s.count(telemetry.MetricSchedulerLeaseLost, p)
			s.log.Warn("timers: scheduler: lease expired during the run and was taken over",
				"partition", store.PartitionName(p), "lease_ms", s.leaseMs)
			return nil
		default:
			return fmt.Errorf("finish: unexpected outcome %v", out)
		}
	}
}

// wakeMoved reports whether out is the failure of a batch's WakeIs: the
// wake time is no longer the one the batch expected. The scheduler's
// batches carry one WakeIs at most.
func wakeMoved(out store.BatchOutcome) bool {
	return out.Outcome == store.PreconditionFailed && out.Failed.Op == store.MustWakeAt
}

// wakeOf reads p's wake time, 0 when it has none.
func (s *Scheduler) wakeOf(ctx context.Context, p store.Partition) (uint64, error) {
	m, ok, err := s.due.NextWake(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("finish: read wake time: %w", err)
	}
	if !ok {
		return 0, nil
	}
	return encodedTime(m), nil
}

// earlierWake is the earlier of two wake times, 0 meaning none.
func earlierWake(a, b uint64) uint64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// addMs adds d milliseconds to t, saturating short of parkedMs.
func addMs(t, d uint64) uint64 {
	if sum := t + d; sum >= t && sum < parkedMs {
		return sum
	}
	return parkedMs - 1
}

// encodedTime is t as stored data holds it (see store.EncodeTime), for a
// time the store returned or a caller's validation checked.
func encodedTime(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}
