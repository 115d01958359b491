package timers_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Two schedulers, each with several workers, tick concurrently in loops
// while the clock advances; handlers reschedule each timer twice. No
// partition is ever fired by two workers at once, and every due time of
// every timer fires exactly once.
func TestTwoSchedulersFireEveryTimerOnceAndNeverTogether(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		const (
			partitions = 30
			rounds     = 3 // fires per timer: its due time and two reschedules
			step       = 700 * time.Millisecond
			advance    = 50 * time.Millisecond
		)
		type due struct {
			Partition, Reference string
			DueAt                time.Time
		}
		want := make(map[due]int)
		rng := rand.New(rand.NewPCG(1, 2))
		caps := e.layer.Capabilities()
		var lastDue time.Time
		for i := range partitions {
			b := store.NewBatch()
			for j := range 1 + rng.IntN(6) {
				tm := timers.Timer{Kind: kindA, Reference: fmt.Sprintf("t%d", j), DueAt: now.Add(time.Duration(rng.IntN(8_000)-2_000) * time.Millisecond)}
				require.NoError(t, timers.Schedule(b, caps, nil, tm))
				for r := range rounds {
					at := tm.DueAt.Add(time.Duration(r) * step)
					want[due{fmt.Sprintf("namespace(p%03d)", i), tm.Reference, at}]++
					if at.After(lastDue) {
						lastDue = at
					}
				}
			}
			e.apply(t, part(i), b)
		}
		h := &recorder{kind: kindA,
			outcome: func(_ *timers.Ctx, tm timers.DueTimer) timers.Fired {
				if len(tm.Value) < rounds-1 {
					return timers.Reschedule{DueAt: tm.DueAt.Add(step), Value: append(tm.Value, 'x')}
				}
				return timers.Done{}
			},
			during: func(*timers.Ctx, timers.DueTimer) { time.Sleep(50 * time.Microsecond) },
		}
		reg := registry(t, h)
		scheds := []*timers.Scheduler{
			e.scheduler(t, "a", reg, func(c *timers.SchedulerConfig) { c.Workers, c.Budget.MaxTimers = 3, 2 }),
			e.scheduler(t, "b", reg, func(c *timers.SchedulerConfig) { c.Workers, c.Budget.MaxTimers = 3, 2 }),
		}

		var (
			stop    atomic.Bool
			ticks   [2]atomic.Int64
			mu      sync.Mutex
			total   timers.TickReport
			tickErr error
			wg      sync.WaitGroup
		)
		for i, s := range scheds {
			wg.Go(func() {
				for !stop.Load() {
					rep, err := s.Tick(e.ctx)
					mu.Lock()
					total.Claimed += rep.Claimed
					total.Contended += rep.Contended
					total.LeaseLost += rep.LeaseLost
					total.Timers.Raced += rep.Timers.Raced
					if err != nil && tickErr == nil {
						tickErr = err
					}
					mu.Unlock()
					ticks[i].Add(1)
				}
			})
		}
		// Each scheduler completes two ticks between clock moves, so a
		// fire sees the clock move at most once: far less than a lease.
		settle := func() {
			from := [2]int64{ticks[0].Load(), ticks[1].Load()}
			for ticks[0].Load() < from[0]+2 || ticks[1].Load() < from[1]+2 {
				time.Sleep(50 * time.Microsecond)
			}
		}
		for at := now; !at.After(lastDue.Add(advance)); at = at.Add(advance) {
			e.clock.Set(at)
			settle()
		}
		settle()
		stop.Store(true)
		wg.Wait()

		require.NoError(t, tickErr)
		t.Logf("ticks %d+%d, claimed %d, contended %d, fires %d", ticks[0].Load(), ticks[1].Load(), total.Claimed, total.Contended, len(h.seen()))
		assert.Empty(t, h.overlapping(), "partitions fired by two workers at once")
		got := make(map[due]int)
		for _, f := range h.seen() {
			got[due{f.Partition, f.Reference, f.DueAt}]++
			assert.False(t, f.DueAt.After(f.Now), "fired when due")
		}
		assert.Equal(t, want, got, "every due time fired exactly once")
		assert.Zero(t, total.LeaseLost)
		assert.Zero(t, total.Timers.Raced)
		assert.Positive(t, total.Contended, "the schedulers met on some partitions")
		assert.Empty(t, e.entries(t), "no wake time left")
		for i := range partitions {
			_, leased := e.lease(t, part(i))
			assert.False(t, leased, "lease of p%03d", i)
		}
	})
}

// A worker that claimed a partition and never finished (crashed, or
// stuck in a fire past its lease) holds it until the lease expires; then
// another scheduler takes it over and fires it.
func TestAnExpiredLeaseHandsACrashedWorkersPartitionToAnother(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owner     string
		written   bool // a timer was written after the crash: the entry is due, not parked
		wantAtNow timers.TickReport
	}{
		{name: "parked", owner: "crashed", wantAtNow: timers.TickReport{Parked: 1}},
		{name: "woken by a timer write", owner: "crashed", written: true, wantAtNow: timers.TickReport{Due: 1, Contended: 1}},
		{name: "our own, after a restart", owner: "b", wantAtNow: timers.TickReport{Parked: 1, Claimed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
				p := part(0)
				e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-10 * time.Millisecond)})
				e.putLease(t, p, tc.owner, now.Add(leaseDuration))
				if tc.written {
					e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "w", DueAt: now.Add(-5 * time.Millisecond)})
				}
				h := &recorder{kind: kindA}
				b := e.scheduler(t, "b", registry(t, h), nil)

				rep := e.tick(t, b)
				want := tc.wantAtNow
				want.Now = now
				if want.Claimed == 1 {
					want.Timers = timers.Report{Fired: 1, Elapsed: rep.Timers.Elapsed}
					assert.Equal(t, want, rep, "our own lease is taken back at once")
					return
				}
				assert.Equal(t, want, rep)
				assert.Empty(t, h.seen(), "not before the lease expires")

				e.clock.Advance(leaseDuration)
				rep = e.tick(t, b)
				assert.Equal(t, 1, rep.Claimed)
				assert.Equal(t, 1, rep.Recovered)
				wantRefs := []string{"r"}
				if tc.written {
					wantRefs = []string{"r", "w"}
				}
				var refs []string
				for _, f := range h.seen() {
					refs = append(refs, f.Reference)
				}
				assert.Equal(t, wantRefs, refs)
				_, leased := e.lease(t, p)
				assert.False(t, leased)
				_, ok := e.wake(t, p)
				assert.False(t, ok)
				assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricSchedulerRecovered, schedLabel))
			})
		})
	}

	t.Run("stuck in a fire", func(t *testing.T) {
		forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
			p := part(0)
			e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-10 * time.Millisecond)})
			during, entered, release := blockFirst()
			stuck := &recorder{kind: kindA, during: during}
			a := e.scheduler(t, "a", registry(t, stuck), nil)
			h := &recorder{kind: kindA}
			b := e.scheduler(t, "b", registry(t, h), nil)

			aDone := make(chan timers.TickReport)
			go func() {
				rep, err := a.Tick(e.ctx)
				assert.NoError(t, err)
				aDone <- rep
			}()
			<-entered
			rep := e.tick(t, b)
			assert.Equal(t, timers.TickReport{Now: now, Parked: 1}, rep, "in flight on a: left alone")

			e.clock.Advance(leaseDuration)
			rep = e.tick(t, b)
			assert.Equal(t, 1, rep.Recovered)
			assert.Equal(t, 1, rep.Timers.Fired)
			assert.Len(t, h.seen(), 1)

			close(release)
			repA := <-aDone
			assert.Equal(t, 1, repA.LeaseLost, "a finds its lease gone")
			assert.Equal(t, 1, repA.Timers.Raced, "a's outcome does not land a second time")
			assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricSchedulerLeaseLost, schedLabel))
			_, leased := e.lease(t, p)
			assert.False(t, leased)
			assert.Empty(t, e.entries(t))
		})
	})
}

// Two Ticks of one Scheduler never fire one partition together: its own
// lease would let the second claim, so the Scheduler keeps its partitions
// in flight apart.
func TestConcurrentTicksOfOneSchedulerDoNotShareAPartition(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-10 * time.Millisecond)})
		during, entered, release := blockFirst()
		h := &recorder{kind: kindA, during: during}
		s := e.scheduler(t, "me", registry(t, h), nil)
		first := make(chan timers.TickReport)
		go func() {
			rep, err := s.Tick(e.ctx)
			assert.NoError(t, err)
			first <- rep
		}()
		<-entered
		// A timer written meanwhile makes the partition due again.
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "w", DueAt: now.Add(-5 * time.Millisecond)})

		rep := e.tick(t, s)
		assert.Equal(t, timers.TickReport{Now: now, Due: 1, Contended: 1}, rep)

		close(release)
		rep = <-first
		assert.Equal(t, 1, rep.Timers.Fired, "its run had read the timers before w was written")
		w, _ := e.wake(t, p)
		assert.Equal(t, now.Add(-5*time.Millisecond), w, "w keeps the partition due")
		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired)
		var refs []string
		for _, f := range h.seen() {
			refs = append(refs, f.Reference)
		}
		assert.Equal(t, []string{"r", "w"}, refs)
		assert.Empty(t, h.overlapping())
		assert.Empty(t, e.entries(t))
	})
}
