package timers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A partition whose backlog the budget cuts at every run stays due at its
// earliest remaining timer (its wake time never passes a timer it still
// holds), and gets one budget per tick: the partitions due meanwhile are
// fired in the same tick, not starved.
func TestABacklogGetsOneBudgetPerTickBesideOtherDuePartitions(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		const backlog, perRun = 40, 5
		caps := e.layer.Capabilities()
		for i := 0; i < backlog; i += 20 {
			b := store.NewBatch()
			for j := i; j < i+20; j++ {
				tm := timers.Timer{Kind: kindA, Reference: fmt.Sprintf("b%02d", j), DueAt: now.Add(time.Duration(j-9_000) * time.Millisecond)}
				require.NoError(t, timers.Schedule(b, caps, nil, tm))
			}
			e.apply(t, part(0), b)
		}
		// Once the first tick has listed p000, timers fall due in three
		// other partitions.
		once := false
		e.faults.AfterRead(func(_ context.Context, c storetest.Call) error {
			if !once && c.Method == storetest.MethodScanDue {
				once = true
				for i := 1; i <= 3; i++ {
					e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "new", DueAt: now.Add(-5 * time.Second)})
				}
			}
			return nil
		})
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) {
			c.Workers, c.Budget.MaxTimers = 1, perRun
		})

		rep := e.tick(t, s)
		assert.Equal(t, 1, rep.Claimed)
		assert.Equal(t, 1, rep.Requeued)
		assert.True(t, rep.Timers.More)
		assert.Equal(t, perRun, rep.Timers.Fired)
		var order []time.Time
		for _, en := range e.entries(t) {
			order = append(order, en.At)
		}
		assert.Equal(t, []time.Time{now.Add((perRun - 9_000) * time.Millisecond), now.Add(-5 * time.Second), now.Add(-5 * time.Second), now.Add(-5 * time.Second)}, order,
			"the backlog stays due at its earliest remaining timer")

		fired := len(h.seen())
		rep = e.tick(t, s)
		assert.Equal(t, 4, rep.Claimed)
		assert.Equal(t, 1, rep.Requeued)
		assert.ElementsMatch(t, []string{"namespace(p001)", "namespace(p002)", "namespace(p003)",
			"namespace(p000)", "namespace(p000)", "namespace(p000)", "namespace(p000)", "namespace(p000)"},
			partitionsOf(h.seen()[fired:]), "the others in the same tick as the backlog's next budget")

		ticks := 2
		for {
			rep = e.tick(t, s)
			if rep.Claimed == 0 {
				break
			}
			ticks++
			assert.Equal(t, perRun, rep.Timers.Fired)
		}
		assert.Equal(t, backlog/perRun, ticks, "a budget's worth per tick")
		assert.Equal(t, uint64(backlog/perRun-1), e.metrics.Counter(telemetry.MetricSchedulerRequeued, schedLabel))
		assert.Empty(t, e.entries(t))
	})
}

// Run ticks again at once after claiming, and otherwise sleeps until the
// next wake time, never longer than PollInterval.
func TestRunWaitsForTheNextWakeTimeBoundedByPollInterval(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		e.schedule(t, part(0), timers.Timer{Kind: kindA, Reference: "soon", DueAt: now.Add(300 * time.Millisecond)})
		e.schedule(t, part(1), timers.Timer{Kind: kindA, Reference: "later", DueAt: now.Add(4500 * time.Millisecond)})
		h := &recorder{kind: kindA}
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		w := &manualWaiter{clock: e.clock, stop: func(_ []time.Duration, at time.Time) {
			if at.After(now.Add(4500 * time.Millisecond)) {
				cancel()
			}
		}}
		e.stopSpinning(t, cancel, 100)
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) { c.Waiter = w })

		require.NoError(t, s.Run(ctx))

		assert.Equal(t, []fire{{"namespace(p000)", "soon", now.Add(300 * time.Millisecond), now.Add(300 * time.Millisecond)}, {"namespace(p001)", "later", now.Add(4500 * time.Millisecond), now.Add(4500 * time.Millisecond)}}, h.seen())
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{300 * ms, time.Second, time.Second, time.Second, time.Second, 200 * ms, time.Second}, w.recorded())
		assert.Equal(t, uint64(9), e.metrics.CounterSum(telemetry.MetricSchedulerTicks), "one tick per wait, and one after each claim")
	})
}

// Due partitions Run cannot take (a lease held elsewhere, held timers of
// an unknown kind) do not make it spin: it waits PollInterval between
// ticks, or less to reach a later wake time.
func TestRunDoesNotSpinOnPartitionsItCannotFire(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		held := part(0)
		e.schedule(t, held, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		v, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: "other", ExpiresAtMs: encoded(now.Add(time.Minute))})
		require.NoError(t, err)
		e.apply(t, held, store.NewBatch().Put(gen.AppendSchedulerLeaseKey(nil), v))
		e.schedule(t, part(1), timers.Timer{Kind: 999, Reference: "unknown", DueAt: now.Add(-time.Millisecond)})
		e.schedule(t, part(2), timers.Timer{Kind: kindA, Reference: "later", DueAt: now.Add(1500 * time.Millisecond)})
		h := &recorder{kind: kindA}
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		w := &manualWaiter{clock: e.clock, stop: func(waits []time.Duration, _ time.Time) {
			if len(waits) == 4 {
				cancel()
			}
		}}
		e.stopSpinning(t, cancel, 100)
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) { c.Waiter = w })

		require.NoError(t, s.Run(ctx))

		assert.Equal(t, []time.Duration{time.Second, 500 * time.Millisecond, time.Second, time.Second}, w.recorded())
		assert.Equal(t, []fire{{"namespace(p002)", "later", now.Add(1500 * time.Millisecond), now.Add(1500 * time.Millisecond)}}, h.seen())
		// Ticks at now (claims p001), now, now+1s, now+1.5s (claims p002),
		// now+1.5s, now+2.5s.
		assert.Equal(t, uint64(6), e.metrics.CounterSum(telemetry.MetricSchedulerTicks))
		assert.Equal(t, uint64(2), e.metrics.Counter(telemetry.MetricSchedulerClaimed, schedLabel))
		assert.Equal(t, uint64(6), e.metrics.Counter(telemetry.MetricSchedulerContended, schedLabel))
	})
}

// Cancelling Run's context stops it from claiming more, but a fire in
// flight finishes, outcome and finishing batch included, before Run
// returns.
func TestRunFinishesInFlightFiresWhenCancelled(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		e.schedule(t, part(1), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		during, entered, release := blockFirst()
		h := &recorder{kind: kindA, during: during}
		ctx, cancel := context.WithCancel(e.ctx)
		// One claim at a time: a claim of both would have both in flight.
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) { c.Workers, c.ClaimBatch = 1, 1 })
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()

		<-entered
		cancel()
		select {
		case err := <-done:
			t.Fatalf("Run returned with a fire in flight: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return")
		}

		require.Len(t, h.seen(), 1, "nothing claimed after the cancel")
		fired, other := p, part(1)
		if h.seen()[0].Partition != store.PartitionName(p) {
			fired, other = other, fired
		}
		rows, err := e.layer.Scan(e.ctx, fired, nil, store.Key{0xFE}, nil, 10)
		require.NoError(t, err)
		assert.Empty(t, rows.Entries, "the fire's outcome landed and the lease was released")
		_, ok := e.wake(t, fired)
		assert.False(t, ok)
		w, _ := e.wake(t, other)
		assert.Equal(t, now.Add(-time.Millisecond), w, "the other partition waits for the next Run")
	})
}

func TestRunReturnsTheWaitersError(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		boom := errors.New("boom")
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		e.stopSpinning(t, cancel, 100)
		s := e.scheduler(t, "me", registry(t), func(c *timers.SchedulerConfig) { c.Waiter = errWaiter{boom} })
		require.ErrorIs(t, s.Run(ctx), boom)
	})
}

type errWaiter struct{ err error }

func (w errWaiter) Wait(context.Context, time.Duration) error { return w.err }
