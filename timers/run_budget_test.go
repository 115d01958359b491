package timers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// seedDue schedules n timers of kind, due one millisecond apart from
// now-n, with references t00, t01, ...
func seedDue(t *testing.T, e *env, kind timers.Kind, n int) []string {
	t.Helper()
	refs := make([]string, n)
	for i := range n {
		refs[i] = fmt.Sprintf("t%02d", i)
		e.schedule(t, timers.Timer{Kind: kind, Reference: refs[i], DueAt: now.Add(time.Duration(i-n) * time.Millisecond)})
	}
	return refs
}

func TestDueTimersFireOldestFirstAndFutureOnesWait(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		// Scheduled out of order; the key order is due-time order.
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "c", DueAt: now})
		e.schedule(t, timers.Timer{Kind: kindB, Reference: "a", DueAt: now.Add(-30 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "future", DueAt: now.Add(time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "b", DueAt: now.Add(-20 * time.Millisecond)})
		var mu sync.Mutex
		var order []string
		record := func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
			mu.Lock()
			order = append(order, tm.Reference)
			mu.Unlock()
			return timers.Done{}, nil
		}
		rep := e.run(t, registry(t, &handler{kind: kindA, fire: record}, &handler{kind: kindB, fire: record}), timers.RunConfig{})
		assert.Equal(t, []string{"a", "b", "c"}, order)
		assert.Equal(t, 3, rep.Fired)
		assert.False(t, rep.More)
		assert.Equal(t, now.Add(time.Millisecond), rep.NextDue)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(time.Millisecond), kindA, "future", ""}}, rows)
	})
}

func TestTheTimerBudgetCutsTheRunAndTheNextRunResumes(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		refs := seedDue(t, e, kindA, 5)
		h := &handler{kind: kindA, fire: done}
		reg := registry(t, h)
		budget := timers.Budget{MaxTimers: 2}

		rep := e.run(t, reg, timers.RunConfig{Budget: budget})
		assert.Equal(t, 2, rep.Fired)
		assert.True(t, rep.More)
		assert.Equal(t, now.Add(-3*time.Millisecond), rep.NextDue, "the first timer the budget left")

		rep = e.run(t, reg, timers.RunConfig{Budget: budget})
		assert.Equal(t, 2, rep.Fired)
		assert.True(t, rep.More)

		rep = e.run(t, reg, timers.RunConfig{Budget: budget})
		assert.Equal(t, 1, rep.Fired)
		assert.False(t, rep.More, "nothing due is left")
		assert.Equal(t, refs, h.seen())
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows)
	})
}

func TestABudgetExactlySpentWithNothingLeftIsNotMore(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	seedDue(t, e, kindA, 2)
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "later", DueAt: now.Add(9 * time.Millisecond)})
	rep := e.run(t, registry(t, &handler{kind: kindA, fire: done}), timers.RunConfig{Budget: timers.Budget{MaxTimers: 2}})
	assert.Equal(t, 2, rep.Fired)
	assert.False(t, rep.More)
	assert.Equal(t, now.Add(9*time.Millisecond), rep.NextDue)
}

func TestTheDurationBudgetIsMeasuredOnTheInjectedClock(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		refs := seedDue(t, e, kindA, 6)
		// Each fire takes 400 ms of the manual clock: fires start at 0,
		// 400 and 800 ms into the run; the fourth would start at 1200.
		h := &handler{kind: kindA, fire: func(_ context.Context, c *timers.Ctx, _ timers.DueTimer) (timers.Fired, error) {
			e.clock.Advance(400 * time.Millisecond)
			return timers.Done{}, nil
		}}
		reg := registry(t, h)
		budget := timers.Budget{MaxTimers: 100, MaxDuration: time.Second}

		rep := e.run(t, reg, timers.RunConfig{Budget: budget})
		assert.Equal(t, 3, rep.Fired)
		assert.True(t, rep.More)
		assert.Equal(t, 1200*time.Millisecond, rep.Elapsed)

		rep = e.run(t, reg, timers.RunConfig{Budget: budget})
		assert.Equal(t, 3, rep.Fired)
		assert.Equal(t, refs, h.seen(), "the second run resumes where the first stopped")
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows)
	})
}

func TestTheScanIsPagedNeverReadingTheWholeClass(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		seedDue(t, e, kindA, 10)
		for i := range 10 {
			e.schedule(t, timers.Timer{Kind: kindA, Reference: fmt.Sprintf("f%02d", i), DueAt: now.Add(time.Duration(1+i) * time.Millisecond)})
		}
		var mu sync.Mutex
		var limits []int
		e.faults.AfterRead(func(_ context.Context, c storetest.Call) error {
			if c.Method == storetest.MethodScan {
				mu.Lock()
				limits = append(limits, c.Limit)
				mu.Unlock()
			}
			return nil
		})
		h := &handler{kind: kindA, fire: done}
		rep := e.run(t, registry(t, h), timers.RunConfig{Budget: timers.Budget{MaxTimers: 100}, PageSize: 3})
		assert.Equal(t, 10, rep.Fired)
		assert.Equal(t, now.Add(time.Millisecond), rep.NextDue)
		assert.GreaterOrEqual(t, len(limits), 3, "10 due timers in pages of 3 rows and one more")
		for _, l := range limits {
			assert.LessOrEqual(t, l, 4)
		}
		rows, _ := e.timersIn(t)
		assert.Len(t, rows, 10, "the future timers stay")
	})
}

func TestTheScanPageShrinksToTheBudget(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	seedDue(t, e, kindA, 10)
	var limits []int
	e.faults.AfterRead(func(_ context.Context, c storetest.Call) error {
		if c.Method == storetest.MethodScan {
			limits = append(limits, c.Limit)
		}
		return nil
	})
	rep := e.run(t, registry(t, &handler{kind: kindA, fire: done}), timers.RunConfig{Budget: timers.Budget{MaxTimers: 2}})
	assert.Equal(t, 2, rep.Fired)
	assert.Equal(t, []int{3}, limits, "two to fire and one to tell whether more are due")
}

func TestEachTimerFiresAtMostOncePerRun(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "again", DueAt: now.Add(-50 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "other", DueAt: now.Add(-10 * time.Millisecond)})
		// "again" asks to run again right away: a due time the scan has not
		// passed yet, so it meets the moved timer again in this run.
		h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
			if tm.Reference == "again" {
				return timers.Reschedule{DueAt: now.Add(-5 * time.Millisecond)}, nil
			}
			return timers.Done{}, nil
		}}
		// Pages of one row, so that the scan meets the moved timer again;
		// a budget of exactly two fires: meeting it is not a timer the
		// budget cut.
		rep := e.run(t, registry(t, h), timers.RunConfig{Budget: timers.Budget{MaxTimers: 2}, PageSize: 1})
		assert.Equal(t, []string{"again", "other"}, h.seen())
		assert.Equal(t, 2, rep.Fired)
		assert.False(t, rep.More)
		assert.Equal(t, now.Add(-5*time.Millisecond), rep.NextDue, "the moved timer is still due")
		rep = e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 1, rep.Fired, "the next run fires it")
	})
}

func TestARowCancelledBetweenScanAndFireIsSkipped(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "gone", DueAt: now.Add(-time.Millisecond)})
	once := sync.Once{}
	e.faults.AfterRead(func(_ context.Context, c storetest.Call) error {
		if c.Method == storetest.MethodScan {
			once.Do(func() {
				observed, _, err := timers.ReadRef(e.ctx, e.inner, e.p, kindA, "gone")
				require.NoError(t, err)
				b := store.NewBatch()
				require.NoError(t, timers.Cancel(b, observed, kindA, "gone"))
				e.apply(t, b)
			})
		}
		return nil
	})
	h := &handler{kind: kindA, fire: done}
	rep := e.run(t, registry(t, h), timers.RunConfig{})
	assert.Empty(t, h.seen())
	assert.Equal(t, timers.Report{Elapsed: rep.Elapsed}, rep)
}
