package timers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The release of a claim rides on the run's last change when it can; when
// that batch fails for the claim's sake, the change lands alone and the
// Scheduler releases the claim itself. Each case counts the commits (Apply
// calls) of one tick and checks what the partition is left with; every
// tick also checks the due index invariant.
func TestTheReleaseFoldsIntoTheLastChangeOrFallsBack(t *testing.T) {
	leaseKey := gen.AppendSchedulerLeaseKey(nil)
	seqKey := store.Key("sequence")
	other, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: "other", ExpiresAtMs: encoded(now.Add(time.Minute))})
	require.NoError(t, err)
	cases := []struct {
		name string
		// second: a second due timer, later than the first.
		second bool
		budget int
		// during runs inside the first fire; outcome is the handler's.
		during  func(e *schedEnv, p store.Partition)
		outcome func(c *timers.Ctx, t timers.DueTimer) (timers.Fired, error)
		commits int
		check   func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport)
	}{
		{
			name:    "folded",
			commits: 2, // claim; outcome with the release
			check: func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport) {
				assert.Equal(t, 1, rep.Timers.Fired)
				_, ok := e.wake(t, p)
				assert.False(t, ok)
			},
		},
		{
			name:   "handler error",
			during: func(*schedEnv, store.Partition) {},
			outcome: func(*timers.Ctx, timers.DueTimer) (timers.Fired, error) {
				return nil, errors.New("sink down")
			},
			commits: 2, // claim; the retry move with the release
			check: func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport) {
				assert.Equal(t, 1, rep.Timers.Failed)
				w, _ := e.wake(t, p)
				assert.Equal(t, now.Add(timers.RetryBackoff), w)
			},
		},
		{
			name: "timer raced",
			during: func(e *schedEnv, p store.Partition) {
				e.apply(e.t, p, store.NewBatch().Put(seqKey, store.Value("2")))
			},
			commits: 3, // claim; raced outcome with the release; the release alone
			check: func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport) {
				assert.Equal(t, 1, rep.Timers.Raced)
				w, _ := e.wake(t, p)
				assert.Equal(t, now.Add(-10*time.Millisecond), w, "the raced timer stays due")
			},
		},
		{
			name: "wake moved by a writer",
			during: func(e *schedEnv, p store.Partition) {
				e.schedule(e.t, p, timers.Timer{Kind: kindB, Reference: "written", DueAt: now.Add(500 * time.Millisecond)})
			},
			commits: 4, // claim; outcome with the release; the outcome alone; the release
			check: func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport) {
				assert.Equal(t, 1, rep.Timers.Fired)
				w, _ := e.wake(t, p)
				assert.Equal(t, now.Add(500*time.Millisecond), w, "the written timer keeps its wake time")
			},
		},
		{
			name: "lease lost",
			during: func(e *schedEnv, p store.Partition) {
				e.apply(e.t, p, store.NewBatch().Put(leaseKey, other))
			},
			commits: 4, // claim; outcome with the release; the outcome alone; the release, failing
			check: func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport) {
				assert.Equal(t, 1, rep.Timers.Fired, "the outcome still lands: its own guards decide")
				assert.Equal(t, 1, rep.LeaseLost)
				l, _ := e.lease(t, p)
				assert.Equal(t, "other", l.Owner, "left to its new owner")
				w, _ := e.wake(t, p)
				assert.Equal(t, timers.ParkedWake, w)
			},
		},
		{
			name:    "budget cut",
			second:  true,
			budget:  1,
			commits: 3, // claim; the first outcome, under the lease; the release
			check: func(t *testing.T, e *schedEnv, p store.Partition, rep timers.TickReport) {
				assert.Equal(t, 1, rep.Timers.Fired)
				assert.Equal(t, 1, rep.Requeued)
				w, _ := e.wake(t, p)
				assert.Equal(t, now.Add(-5*time.Millisecond), w, "due at the timer the budget left")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
				e.t = t
				p := part(0)
				e.apply(t, p, store.NewBatch().Put(seqKey, store.Value("1")))
				e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "first", DueAt: now.Add(-10 * time.Millisecond)})
				if tc.second {
					e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "second", DueAt: now.Add(-5 * time.Millisecond)})
				}
				fired := 0
				h := &handler{kind: kindA, fire: func(ctx context.Context, c *timers.Ctx, dt timers.DueTimer) (timers.Fired, error) {
					fired++
					v, _, err := c.Store.Get(ctx, c.Partition, seqKey)
					require.NoError(t, err)
					if fired == 1 && tc.during != nil {
						tc.during(e, p)
					}
					if tc.outcome != nil {
						return tc.outcome(c, dt)
					}
					return timers.Done{Batch: store.NewBatch().Require(store.Equals(seqKey, v))}, nil
				}}
				s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) {
					c.Workers, c.Budget.MaxTimers = 1, tc.budget
				})

				// Commits: the partition's Apply and TransactOnce calls
				// with something to write (the claim's among them).
				n := 0
				countCommits := func(c storetest.Call) bool {
					if c.Batch != nil && c.Batch.Ops() > 0 && store.PartitionName(c.Partition) == store.PartitionName(p) {
						n++
					}
					return false
				}
				e.faults.FailWhen(storetest.MethodApply, countCommits, nil)
				e.faults.FailWhen(storetest.MethodTransact, countCommits, nil)
				commits := func() int { return n }
				before := commits()
				rep := e.tick(t, s)
				assert.Equal(t, 1, rep.Claimed)
				assert.Equal(t, tc.commits, commits()-before, "commits")
				tc.check(t, e, p, rep)
				if tc.name != "lease lost" {
					_, leased := e.lease(t, p)
					assert.False(t, leased, "released")
				}
			})
		})
	}
}
