package timers

import (
	"context"

	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: the claim's release rides on the run's last change.
//
// A Scheduler fires a partition in three steps: claim (lease and parked
// wake time, one commit), RunDue (one commit per timer), release (lease
// deleted and wake time set, one commit). On FoundationDB each commit is a
// round trip, and most fires change one timer, so the release is folded
// into the run's last change: under a claim, each change also requires the
// lease (so a run that lost its lease stops changing timers without waking
// the partition), moves leave the parked wake time alone (RunDue notes
// their due times instead), and the change after which no due timer
// remains deletes the lease and replaces the parked wake time with the
// run's NextDueMs, in the same batch. A change whose batch fails only for
// the claim's sake (the lease is no longer ours, or a timer written during
// the run lowered the parked wake time) is applied again as it would be
// without a claim, and the Scheduler releases the claim itself, re-reading
// the wake time: the fold saves a commit where it can and never decides
// anything the plain path would not.

// claimHold is a Scheduler's claim of the partition a RunDue fires.
type claimHold struct {
	leaseKey store.Key
	// lease is the lease row as the claim wrote it.
	lease store.Value
	// full is the store's Capabilities().Full(): a release is folded only
	// into a batch that still passes it.
	full store.Capabilities

	// lost: a change found the lease no longer ours; the rest of the run
	// applies its changes as without a claim.
	lost bool
	// released: the run's last change released the claim.
	released bool
	// wakeMoved: a change found the parked wake time lowered; the release
	// reads it first.
	wakeMoved bool
}

// withClaim makes RunDue fire under claim h (see the design note).
func withClaim(h *claimHold) Option { return func(o *config) { o.claim = h } }

// apply applies b, the change of timer t leaving it at newDue (0:
// deleted), under the claim. done is false when b failed only for the
// claim's sake: b is then as it was passed, to apply without the claim.
func (h *claimHold) apply(ctx context.Context, r *run, t change, b *store.Batch, newDue uint64) (out store.BatchOutcome, err error, done bool) {
	np, nw, own := len(b.Preconditions), len(b.Writes), b.Wakeup
	release := t.last && (own == nil || !own.Exact) && h.fits(b)
	b.Require(store.Equals(h.leaseKey, h.lease))
	wakeGuard := -1 // the index of the release's WakeIs
	if release {
		next := earlierWake(r.report.NextDueMs, newDue)
		if own != nil {
			next = earlierWake(next, own.AtMs)
		}
		wakeGuard = len(b.Preconditions)
		b.Delete(h.leaseKey).SetWake(ParkedWakeMs, next)
	}
	out, err = r.s.Apply(ctx, r.p, b)
	if err == nil && out.Outcome == store.PreconditionFailed &&
		(out.FailedIndex == np || out.FailedIndex == wakeGuard) {
		h.lost = h.lost || out.FailedIndex == np
		h.wakeMoved = h.wakeMoved || out.FailedIndex == wakeGuard
		b.Preconditions, b.Writes, b.Wakeup = b.Preconditions[:np], b.Writes[:nw], own
		return out, nil, false
	}
	h.released = err == nil && out.Committed() && release
	return out, err, true
}

// fits reports whether b, with the lease guard and the release (the
// lease's delete and the wake time's WakeIs), still passes the store's
// limits.
func (h *claimHold) fits(b *store.Batch) bool {
	return b.Ops()+3 <= h.full.MaxBatchOps &&
		b.Bytes()+2*len(h.leaseKey)+len(h.lease) <= h.full.MaxBatchBytes
}
