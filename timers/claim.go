package timers

import (
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: a fired partition is two transactions.
//
// A Scheduler fires a partition in two transactions: the claim
// (Scheduler.claim: one transaction that reads the wake time, the lease
// and the first page of due timers with their reference entries, and
// writes the lease and the parked wake time), then the commit of the
// timers' outcomes (see commitAll), into whose last batch the release is
// folded: under a claim each outcome batch also requires the lease (so a
// run that lost its lease stops changing timers without waking the
// partition), moves leave the parked wake time alone (RunDue notes their
// due times instead), and the batch after which no due timer remains
// deletes the lease and replaces the parked wake time with the run's
// NextDue. A batch that fails only for the claim's sake (the lease is
// no longer ours, or a timer written during the run lowered the parked
// wake time) is committed again without the claim, or without the
// release, and the Scheduler releases the claim itself, re-reading the
// wake time: the fold saves a commit where it can and never decides
// anything the plain path would not.

// claimHold is a Scheduler's claim of the partition a RunDue fires.
type claimHold struct {
	leaseKey store.Key
	// lease is the lease row as the claim wrote it.
	lease store.Value
	// full is the store's Capabilities().Full(): a release is folded only
	// into a batch that still passes it.
	full store.Capabilities
	// page is the first page of the timer class, read by the claim's
	// transaction (nil: RunDue reads it).
	page *timerPage
	// apply commits the run's batches (the store's Apply, or a commit
	// shared with other partitions' runs: see fireMany).
	apply applyFunc
	// paused, when set, says which kinds the run leaves where they are
	// (see pause.go): the kinds paused for the whole store, and the
	// library's when the partition's queues are paused. generation is the
	// pause generation the Scheduler read.
	paused     func(Kind) bool
	generation uint64
	// pausedFirstMs is the due time of the earliest timer the run left
	// for a pause (0: none).
	pausedFirstMs uint64

	// lost: a batch found the lease no longer ours; the rest of the run
	// commits as without a claim.
	lost bool
	// released: the run's last batch released the claim.
	released bool
	// wakeMoved: a batch found the parked wake time lowered; the release
	// reads it first.
	wakeMoved bool
}

// releaseWake is the wake time a release sets, next being the run's
// NextDue (0: none), and its ceiling (0: none): next itself when the run
// left no due timer for a pause (paused 0); else a paused wake time under
// the claim's generation (see pause.go), with the earliest due time the
// run left (the paused timers', next's) as its ceiling, so that a timer
// written into the partition before a resume makes it due at once, to be
// left paused again with that timer counted, instead of replacing the
// paused wake time by its own due time and hiding the paused timers from
// the resume.
func (h *claimHold) releaseWake(next uint64, paused int) (wake, ceiling uint64) {
	if paused == 0 || h.pausedFirstMs == 0 {
		return next, 0
	}
	return pausedRelease(h, next)
}

// pausedRelease is releaseWake's rule for a run that left due timers for
// a pause. (A variable, so that the tests can check that a release that
// forgets them, or wakes the partition at them, is caught.)
var pausedRelease = func(h *claimHold, next uint64) (wake, ceiling uint64) {
	return pausedWakeMs(h.generation, next), earlierWake(h.pausedFirstMs, next)
}

// setWake adds to b the change of the partition's wake time from expect
// to want, with ceiling as its ceiling when want is a paused wake time.
func setWake(b *store.Batch, expect, want, ceiling uint64) {
	if ceiling != 0 && ceiling < want && want >= pausedBaseMs {
		b.SetWakeCeiling(store.DecodeTime(expect), store.DecodeTime(want), store.DecodeTime(ceiling))
		return
	}
	b.SetWake(store.DecodeTime(expect), store.DecodeTime(want))
}
