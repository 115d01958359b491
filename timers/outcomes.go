package timers

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: the outcomes of a page commit together.
//
// On FoundationDB every commit is a round trip, so RunDue fires a page of
// due timers and then commits their outcomes in as few batches as the
// store's limits allow, where it once committed each on its own. Each
// timer keeps its semantics: its handler's batch lands atomically with its
// timer's change, guarded as before, and the combined batch is equivalent
// to applying the timers' batches one after another, in order:
//
//   - writes are appended in order, so the last write to a key wins, as it
//     would in sequence;
//   - a precondition of a later timer on a key an earlier timer of the
//     same batch writes is decided when the batch is built, against that
//     write: it holds only if the write leaves exactly what it requires,
//     and is then left out (the store would check it against the state
//     before the earlier write). When it would not hold, the batch ends
//     before the later timer, which goes to the next batch, where the
//     store checks it against the earlier write committed: it fails there,
//     as it would have in sequence, and the timer fires again in a later
//     run;
//   - a batch carrying a deadline, an exact wakeup or a WakeIs is
//     committed alone;
//   - handlers of one kind fire together: before a handler fires, the
//     outcomes of other kinds' timers are committed, so that it sees them.
//     Kinds meet through the rows their batches write (a service's
//     handler queues outcome rows that the outcome delivery reads and
//     pushes to its sink, relay rows that the relay delivers): a handler
//     firing on the state before another kind's outcome would do work the
//     next run repeats (a sink call) once its guard failed. Within a kind
//     the handler's author knows what its timers share (see Handler).
//
// A failed precondition names its index; the run maps it back to its
// timer, counts that timer raced (its outcome is dropped: nothing of it
// lands) and commits the others again without it, so that one timer's
// failed guard never loses another's work. A claim's lease guard or the
// release's wake guard failing makes the run go on as RunDue does when
// that happens to a single outcome (see claimHold). An outcome the store
// rejects as invalid or whose deadline passed is a failed fire, as before:
// the timer's move as its retry policy says, or its dead letter.

// item is the outcome of one fired timer, not yet committed: the handler's
// batch with the timer's guards and change (outcome), or the move later of
// a timer its handler could not fire (!outcome).
type item struct {
	t      change
	b      *store.Batch
	newDue uint64 // the timer's new due time, 0 when deleted
	retry  bool   // a Retry outcome
	snooze bool   // a Snooze outcome
	dead   bool   // the timer's dead letter (see deadLetter)
	// outcome: the handler's outcome; else a move after a failure or a
	// hold, whose failed guard is only logged.
	outcome bool
}

// alone reports whether the item's batch must be committed on its own: a
// deadline, an exact wakeup or a WakeIs would apply to every timer of a
// combined batch.
func (it *item) alone() bool {
	if !it.b.Deadline.IsZero() || it.b.Wakeup != nil && it.b.Wakeup.Exact {
		return true
	}
	for _, c := range it.b.Preconditions {
		if c.Op == store.MustWakeAt {
			return true
		}
	}
	return false
}

// precondition owners beside the items' indices.
const (
	ownerLease = -1 // the claim's lease guard
	ownerWake  = -2 // the release's wake guard
)

// combined is a batch of several items' outcomes being built.
type combined struct {
	b store.Batch
	// owners[i] is the index (in the items committed) of the item whose
	// precondition is b.Preconditions[i], or ownerLease, ownerWake.
	owners []int
	// release: the batch releases the claim.
	release bool
	// apply is the batch to apply: &b, or the batch of the one item of a
	// run without a claim (whose preconditions are all the item's).
	apply *store.Batch
}

// owner is the owner of the batch's i-th precondition.
func (cb *combined) owner(i int) int {
	if cb.apply != &cb.b {
		return 0
	}
	return cb.owners[i]
}

// commitOtherKinds commits the outcomes queued so far when one of them is
// of another kind than kind, whose handler is about to fire.
func (r *run) commitOtherKinds(ctx context.Context, kind Kind) error {
	for i := range r.items {
		if r.items[i].outcome && r.items[i].t.Kind != kind {
			err := r.commitAll(ctx, false)
			r.items = r.items[:0]
			return err
		}
	}
	return nil
}

// commitAll commits r.items, in order, in as few batches as the store's
// limits and the items' keys allow (see the design note), and notes what
// each leaves behind. final says no due timer follows them: under a claim
// the last batch also releases it. It fails with the store's error,
// noting every item not committed as still due at its own time.
func (r *run) commitAll(ctx context.Context, final bool) error {
	items := r.items
	if len(items) == 0 {
		return nil
	}
	full := r.full()
	if len(items) > 1 {
		// An item alone needs no check before: the store's validation
		// of its batch decides (see reject).
		for i := range items {
			if err := r.precheck(ctx, &items[i], full); err != nil {
				return r.unfinished(items, err)
			}
		}
	}
	// One allocation of each slice: room for every item's guards and
	// writes, and the claim's.
	var cb combined
	pre, writes := 2, 1
	for i := range items {
		pre += len(items[i].b.Preconditions)
		writes += len(items[i].b.Writes)
	}
	for len(items) > 0 {
		n := r.group(items, final, full, &cb, pre, writes)
		out, err := r.apply(ctx, cb.apply)
		switch {
		case err == nil && out.Committed():
			if cb.release {
				r.cfg.claim.released = true
			}
			for i := range n {
				r.settle(&items[i])
			}
			items = items[n:]
		case err == nil && out.Outcome == store.PreconditionFailed && out.FailedIndex >= 0 && out.FailedIndex < len(cb.apply.Preconditions):
			switch j := cb.owner(out.FailedIndex); j {
			case ownerLease:
				// The lease is no longer ours: the rest of the run
				// commits as without a claim.
				r.cfg.claim.lost = true
			case ownerWake:
				// A timer written during the run lowered the parked wake
				// time: the Scheduler releases the claim, reading it.
				r.cfg.claim.wakeMoved = true
			default:
				r.raced(&items[j], out)
				items = dropRaced(items, j)
			}
		case err == nil && out.Outcome == store.DeadlinePassed && n == 1 && items[0].outcome:
			if err := r.reject(ctx, &items[0], "timer outcome passed its deadline", errors.New(out.String())); err != nil {
				return r.unfinished(items, err)
			}
		case errors.Is(err, store.ErrInvalid) && n == 1 && items[0].outcome:
			if err := r.reject(ctx, &items[0], "store rejected the timer's outcome", err); err != nil {
				return r.unfinished(items, err)
			}
		case errors.Is(err, store.ErrInvalid) && n > 1:
			// A limit the store counts otherwise than Validate: commit
			// one item a batch from here on.
			r.single = true
		default:
			if err == nil {
				err = fmt.Errorf("unexpected outcome %v", out)
			}
			return r.unfinished(items, fmt.Errorf("timers: apply %v timer outcome in %s: %w", items[0].t.Kind, store.PartitionName(r.p), err))
		}
	}
	return nil
}

// apply applies b to the run's partition: through the claim's commit
// when it has one (see claimHold.apply), else with the store's Apply.
func (r *run) apply(ctx context.Context, b *store.Batch) (store.BatchOutcome, error) {
	if h := r.cfg.claim; h != nil && h.apply != nil {
		return h.apply(ctx, r.p, b)
	}
	return r.s.Apply(ctx, r.p, b)
}

// unfinished notes the items not committed as still due at their own
// time and returns err.
func (r *run) unfinished(items []item, err error) error {
	for i := range items {
		r.noteNext(items[i].t.dueMs)
	}
	return err
}

// dropRaced returns items without items[j], whose own guard failed: the
// others are committed again without it. (A variable, so that the tests
// can check that a version dropping more is caught.)
var dropRaced = func(items []item, j int) []item {
	return append(items[:j:j], items[j+1:]...)
}

// full is the most one batch may hold on the run's store.
func (r *run) full() store.Capabilities {
	if h := r.cfg.claim; h != nil {
		return h.full
	}
	return r.s.Capabilities().Full()
}

// precheck turns an outcome that cannot commit, even alone (it fails
// validation with the claim's lease guard, which every outcome under a
// claim carries), into the timer's failure (see failure), before it can
// spoil a combined batch. It fails, leaving the item as it is, when the
// store does (the dead letter's read).
func (r *run) precheck(ctx context.Context, it *item, full store.Capabilities) error {
	if !it.outcome {
		return nil
	}
	if h := r.cfg.claim; h != nil {
		full.MaxBatchOps -= 1
		full.MaxBatchBytes -= len(h.leaseKey) + len(h.lease)
	}
	if err := it.b.Validate(full); err != nil {
		return r.reject(ctx, it, "store rejected the timer's outcome", err)
	}
	return nil
}

// reject counts a failed fire whose outcome cannot commit and replaces it
// with the timer's failure (see failure). It fails when the dead letter's
// read does, leaving the item as it is.
func (r *run) reject(ctx context.Context, it *item, msg string, cause error) error {
	r.report.Failed++
	r.count(telemetry.MetricTimersFailed, it.t.Kind)
	mv, err := r.failure(ctx, it.t, cause, 0)
	if err != nil {
		r.log.Error("timers: "+msg+"; its retry could not be planned", "kind", r.kindName(it.t.Kind), "due_at_ms", it.t.dueMs, "error", cause, "store_error", err)
		return err
	}
	r.logFailure(msg, it.t, mv, cause)
	*it = mv
	return nil
}

// raced notes an item whose own precondition failed: nothing of it
// landed, and the timer stays due at its own time.
func (r *run) raced(it *item, out store.BatchOutcome) {
	r.noteNext(it.t.dueMs)
	if !it.outcome {
		r.log.Info("timers: timer changed meanwhile; not moved", "kind", r.kindName(it.t.Kind), "outcome", out.String())
		return
	}
	r.report.Raced++
	r.count(telemetry.MetricTimersRaced, it.t.Kind)
	r.log.Info("timers: timer outcome raced; nothing applied", "kind", r.kindName(it.t.Kind),
		"due_at_ms", it.t.dueMs, "failed", out.Failed.String())
}

// settle notes what a committed item left behind: the timer's new due
// time, and counts its outcome.
func (r *run) settle(it *item) {
	if it.newDue != 0 {
		r.noteNext(it.newDue)
	}
	if it.dead {
		r.report.DeadLettered++
		r.count(telemetry.MetricTimersDeadLettered, it.t.Kind)
	}
	if !it.outcome {
		return
	}
	switch {
	case it.snooze:
		r.report.Snoozed++
	case it.retry:
		r.report.Retried++
		r.count(telemetry.MetricTimersRetried, it.t.Kind)
	default:
		r.report.Fired++
		r.count(telemetry.MetricTimersFired, it.t.Kind)
	}
}

// group builds in cb the batch of the longest run of items, from the
// first, that one batch can hold (see the design note), with the claim's
// guard and, when it holds every item left of a final page, the claim's
// release; it returns how many items the batch holds (at least one).
func (r *run) group(items []item, final bool, full store.Capabilities, cb *combined, pre, writes int) int {
	h := r.cfg.claim
	claimed := h != nil && !h.lost
	if !claimed && (len(items) == 1 || r.single || items[0].alone()) {
		// One item without a claim: its own batch, as it is.
		it := &items[0]
		if it.newDue != 0 {
			it.b.WakeAt(wakeTime(it.newDue))
		}
		cb.apply, cb.release = it.b, false
		return 1
	}
	if cb.b.Preconditions == nil {
		cb.b.Preconditions = make([]store.Precondition, 0, pre)
		cb.b.Writes = make([]store.Write, 0, writes)
		cb.owners = make([]int, 0, pre)
	}
	cb.apply = &cb.b
	cb.b = store.Batch{Preconditions: cb.b.Preconditions[:0], Writes: cb.b.Writes[:0]}
	cb.owners, cb.release = cb.owners[:0], false
	if r.written == nil && len(items) > 1 {
		r.written = make(map[string]store.Write)
	}
	clear(r.written)
	ops, bytes := 0, 0
	if claimed {
		ops, bytes = 1, len(h.leaseKey)+len(h.lease)
	}
	n := 0
	for j := range items {
		it := &items[j]
		if n > 0 && (r.single || it.alone() || items[0].alone()) {
			break
		}
		iops, ibytes, ok := r.fits(it, n == 0)
		if !ok || n > 0 && (ops+iops > full.MaxBatchOps || bytes+ibytes > full.MaxBatchBytes) {
			break
		}
		for _, c := range it.b.Preconditions {
			if w, ok := r.written[string(c.Key)]; ok && c.Op != store.MustWakeAt {
				if holdsAfter(c, w) {
					continue // implied by the earlier write
				}
			}
			cb.b.Preconditions = append(cb.b.Preconditions, c)
			cb.owners = append(cb.owners, j)
		}
		for _, w := range it.b.Writes {
			cb.b.Writes = append(cb.b.Writes, w)
			if len(items) > 1 {
				r.written[string(w.Key)] = w
			}
		}
		if !it.b.Deadline.IsZero() {
			cb.b.Deadline = it.b.Deadline
		}
		if w := it.b.Wakeup; w != nil {
			if w.Exact {
				cb.b.Wakeup = w
			} else {
				cb.b.WakeAt(w.At)
			}
		}
		if !claimed && it.newDue != 0 {
			cb.b.WakeAt(wakeTime(it.newDue))
		}
		ops, bytes = ops+iops, bytes+ibytes
		n++
	}
	if !claimed {
		return n
	}
	cb.b.Preconditions = append(cb.b.Preconditions, store.Equals(h.leaseKey, h.lease))
	cb.owners = append(cb.owners, ownerLease)
	own := cb.b.Wakeup
	if final && n == len(items) && !h.wakeMoved && (own == nil || !own.Exact) &&
		ops+2 <= full.MaxBatchOps && bytes+len(h.leaseKey) <= full.MaxBatchBytes {
		// The release: the wake time the run leaves, every item of this
		// batch included, replaces the parked one.
		next := r.nextDueMs
		for i := range n {
			next = earlierWake(next, realWakeMs(items[i].newDue))
		}
		if own != nil {
			next = earlierWake(next, encodedTime(own.At))
		}
		cb.owners = append(cb.owners, ownerWake)
		wake, ceiling := h.releaseWake(next, r.report.Paused)
		setWake(cb.b.Delete(h.leaseKey), parkedMs, wake, ceiling)
		cb.release = true
	}
	return n
}

// fits returns the operations and bytes item it adds to a combined batch
// (its preconditions counted in full, though group may leave some out)
// and whether it may join one: an item that cannot be checked against the
// keys written before it, because it needs a precondition decided that no
// earlier write decides, must start a batch. first says it would.
func (r *run) fits(it *item, first bool) (ops, bytes int, ok bool) {
	ops, bytes = it.b.Ops(), it.b.Bytes()
	if first {
		return ops, bytes, true
	}
	for _, c := range it.b.Preconditions {
		if c.Op == store.MustWakeAt {
			continue
		}
		if w, written := r.written[string(c.Key)]; written && !holdsAfter(c, w) {
			// In sequence it would be checked against the earlier write
			// and fail: the next batch checks it so.
			return ops, bytes, false
		}
	}
	return ops, bytes, true
}

// holdsAfter reports whether precondition c holds once write w, the last
// write to its key, has landed.
func holdsAfter(c store.Precondition, w store.Write) bool {
	if w.Op == store.OpDelete {
		return c.Holds(nil)
	}
	v := w.Value
	if v == nil {
		v = store.Value{}
	}
	return c.Holds(v)
}
