package timers_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

const bucketParts = 48 // partitions due, spread over the buckets

// armBuckets makes bucketParts partitions due a millisecond before now.
func armBuckets(t *testing.T, e *schedEnv) {
	for i := range bucketParts {
		e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
	}
	buckets := map[int]bool{}
	for _, d := range bucketsOf(t, e) {
		buckets[d] = true
	}
	require.Greater(t, len(buckets), 4, "the partitions spread over the buckets")
}

// bucketsOf lists the buckets of the due index's entries.
func bucketsOf(t *testing.T, e *schedEnv) []int {
	es, err := e.layer.ScanDue(e.ctx, store.DueQuery{Until: now, Limit: 1000})
	require.NoError(t, err)
	var out []int
	for _, d := range es {
		out = append(out, d.Bucket)
	}
	return out
}

// A scheduler finds every due partition whatever bucket its listing
// starts at.
func TestATickFindsEveryDuePartitionFromAnyBucket(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		n := e.layer.DueBuckets()
		for start := range n {
			e.clock.Set(now)
			armBuckets(t, e)
			h := &recorder{kind: kindA}
			s := e.scheduler(t, fmt.Sprintf("from-%d", start), registry(t, h), nil)
			timers.StartListingsAt(s, start)
			rep := e.tick(t, s)
			assert.Equal(t, bucketParts, rep.Claimed, "from bucket %d", start)
			assert.Len(t, h.seen(), bucketParts, "from bucket %d", start)
			assert.Empty(t, e.entries(t))
		}
	})
}

// Two schedulers listing from different buckets at once fire every
// partition exactly once between them.
func TestTwoSchedulersFromDifferentBucketsFireEachPartitionOnce(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		n := e.layer.DueBuckets()
		for round, starts := range [][2]int{{0, n / 2}, {3, 4}, {n - 1, 0}} {
			armBuckets(t, e)
			h := &recorder{kind: kindA}
			reg := registry(t, h)
			var wg sync.WaitGroup
			for i, start := range starts {
				s := e.scheduler(t, fmt.Sprintf("round%d-%d", round, i), reg, nil)
				timers.StartListingsAt(s, start)
				wg.Go(func() {
					_, err := s.Tick(e.ctx)
					assert.NoError(t, err)
				})
			}
			wg.Wait()
			e.checkDueIndex(t)
			seen := map[string]int{}
			for _, f := range h.seen() {
				seen[f.Partition]++
			}
			assert.Len(t, seen, bucketParts, "starts %v: every partition fired", starts)
			for p, k := range seen {
				assert.Equal(t, 1, k, "starts %v: %s fired once", starts, p)
			}
			assert.Empty(t, h.overlaps)
			assert.Empty(t, e.entries(t))
		}
	})
}

// Schedulers that know each other start their listings at buckets spread
// evenly over the index: the one of rank r among m (by owner) at r*B/m;
// one whose membership expired leaves its share to the others.
func TestSchedulersShareOutTheBuckets(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		n := e.layer.DueBuckets()
		var ss []*timers.Scheduler
		for _, owner := range []string{"c", "a", "d", "b"} {
			s := e.scheduler(t, owner, registry(t), nil)
			e.tick(t, s) // registers it
			ss = append(ss, s)
		}
		for i, want := range []int{2 * n / 4, 0, 3 * n / 4, n / 4} {
			assert.Equal(t, want, timers.StartBucket(ss[i], now, n), "owner %d", i)
		}
		// Past a lease, only those that renewed count.
		later := now.Add(leaseDuration + time.Millisecond)
		e.clock.Set(later)
		e.tick(t, ss[0])
		e.tick(t, ss[1])
		assert.Equal(t, n/2, timers.StartBucket(ss[0], later, n), "c, second of a and c")
		assert.Equal(t, 0, timers.StartBucket(ss[1], later, n))
	})
}
