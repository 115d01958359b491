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
