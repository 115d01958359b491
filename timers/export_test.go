package timers

import (
	"context"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// StartListingsAt makes every listing of s start at bucket b.
func StartListingsAt(s *Scheduler, b int) { s.firstBucket = func(int) int { return b } }

// DropRacedNeighbourToo makes a failed guard among batched outcomes drop
// its timer's next neighbour as well (a mutant the model must catch),
// until the returned function restores it.
func DropRacedNeighbourToo() (restore func()) {
	orig := dropRaced
	dropRaced = func(items []item, j int) []item {
		n := j + 2
		if n > len(items) {
			n = len(items)
		}
		return append(items[:j:j], items[n:]...)
	}
	return func() { dropRaced = orig }
}

// StartBucket is the bucket s's next listing at now starts at, of n.
func StartBucket(s *Scheduler, now time.Time, n int) int {
	nowMs, err := store.EncodeTime(now)
	if err != nil {
		panic(err)
	}
	return s.startBucket(context.Background(), nowMs, n, 1)
}

// AddReports is Report.add: a Tick's report sums its runs'.
func AddReports(a, b Report) Report {
	a.add(b)
	return a
}

// DropReleaseOfLast makes every commit of several partitions' batches a
// worker shares drop its last batch's wake change (a mutant the tests
// and models must catch), until the returned function restores it.
func DropReleaseOfLast() (restore func()) {
	orig := sharedBatches
	sharedBatches = func(batches []store.PartitionBatch) []store.PartitionBatch {
		if len(batches) < 2 {
			return batches
		}
		batches = append([]store.PartitionBatch(nil), batches...)
		last := &batches[len(batches)-1]
		b := last.Batch
		stripped := &store.Batch{Writes: b.Writes, Deadline: b.Deadline}
		for _, c := range b.Preconditions {
			if c.Op != store.MustWakeAt {
				stripped.Preconditions = append(stripped.Preconditions, c)
			}
		}
		last.Batch = stripped
		return batches
	}
	return func() { sharedBatches = orig }
}

// ReleasePausedAt makes a release that left due timers for a pause set
// the wake time to the run's next timer, forgetting them ("next"), or to
// the earliest of them, waking the partition at every tick ("paused"):
// mutants the pause tests must catch, until the returned function
// restores the rule.
func ReleasePausedAt(mode string) (restore func()) {
	orig := pausedRelease
	pausedRelease = func(h *claimHold, next uint64) (uint64, uint64) {
		if mode == "next" {
			return next, 0
		}
		return earlierWake(h.pausedFirstMs, next), 0
	}
	return func() { pausedRelease = orig }
}
