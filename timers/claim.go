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

	// lost: a batch found the lease no longer ours; the rest of the run
	// commits as without a claim.
	lost bool
	// released: the run's last batch released the claim.
	released bool
	// wakeMoved: a batch found the parked wake time lowered; the release
	// reads it first.
	wakeMoved bool
}
