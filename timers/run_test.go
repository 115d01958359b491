package timers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// now is the time the tests run at.
var now = time.UnixMilli(10_000)

const (
	kindA timers.Kind = 1000
	kindB timers.Kind = 1001
)

func TestDoneDeletesTheTimerWithTheHandlersBatch(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-5 * time.Millisecond), Value: store.Value("v")})
		h := &handler{kind: kindA, fire: func(_ context.Context, c *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
			assert.Equal(t, now, c.Now)
			assert.Equal(t, e.p, c.Partition)
			assert.NotNil(t, c.Logger)
			assert.NotNil(t, c.Metrics)
			assert.Equal(t, "v", string(tm.Value))
			assert.Equal(t, now.Add(-5*time.Millisecond), tm.DueAt)
			return timers.Done{Batch: store.NewBatch().Put(store.Key("side"), store.Value("effect"))}, nil
		}}
		rep := e.run(t, registry(t, h), timers.RunConfig{})

		assert.Equal(t, timers.Report{Fired: 1, Elapsed: rep.Elapsed}, rep)
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows)
		_, ok := e.refDue(t, kindA, "r")
		assert.False(t, ok, "reference entry deleted with the timer")
		assert.Equal(t, "effect", string(e.get(t, store.Key("side"))))
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricTimersFired,
			telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "namespace"},
			telemetry.Label{Name: telemetry.LabelTimerKind, Value: "1000"}))
	})
}

func TestRescheduleMovesTheTimerAndWakesThePartition(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("old")})
		// A scheduler set the wake time far ahead; the move must lower it.
		di := e.inner.(store.DueIndex)
		wake, ok, err := di.NextWake(e.ctx, e.p)
		require.NoError(t, err)
		require.True(t, ok)
		e.apply(t, store.NewBatch().SetWake(wake, now.Add(10*time.Second)))
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return timers.Reschedule{DueAt: now.Add(500 * time.Millisecond), Value: store.Value("new"),
				Batch: store.NewBatch().Put(store.Key("side"), store.Value("x"))}, nil
		}}
		applies := e.captureApplies()
		rep := e.run(t, registry(t, h), timers.RunConfig{})

		assert.Equal(t, 1, rep.Fired)
		assert.Equal(t, now.Add(500*time.Millisecond), rep.NextDue)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(500 * time.Millisecond), kindA, "r", "new"}}, rows)
		due, ok := e.refDue(t, kindA, "r")
		assert.True(t, ok)
		assert.Equal(t, now.Add(500*time.Millisecond), due)
		assert.Equal(t, "x", string(e.get(t, store.Key("side"))))
		require.Len(t, *applies, 1, "one Apply carries the handler's batch and the move")
		require.NotNil(t, (*applies)[0].Wakeup)
		assert.Equal(t, store.Wakeup{At: now.Add(500 * time.Millisecond)}, *(*applies)[0].Wakeup)
		wake, _, err = di.NextWake(e.ctx, e.p)
		require.NoError(t, err)
		assert.Equal(t, now.Add(500*time.Millisecond), wake)
	})
}

func TestRescheduleIsMonotonic(t *testing.T) {
	old := now.Add(-100 * time.Millisecond)
	after := old.Add(time.Millisecond)
	cases := []struct {
		name string
		want time.Time
		got  time.Time
	}{
		{"before the old due time", old.Add(-50 * time.Millisecond), after},
		{"at the old due time", old, after},
		{"zero", time.Time{}, after},
		{"one after", after, after},
		{"later", now.Add(7 * time.Millisecond), now.Add(7 * time.Millisecond)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, memengine.New(), now)
			e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: old})
			h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
				return timers.Reschedule{DueAt: tc.want}, nil
			}}
			rep := e.run(t, registry(t, h), timers.RunConfig{})
			assert.Equal(t, 1, rep.Fired)
			assert.Len(t, h.seen(), 1, "a timer fires at most once per run")
			rows, _ := e.timersIn(t)
			require.Len(t, rows, 1)
			assert.Equal(t, tc.got, rows[0].DueAt)
			due, _ := e.refDue(t, kindA, "r")
			assert.Equal(t, tc.got, due)
			assert.Equal(t, tc.got, rep.NextDue)
		})
	}
}

func TestRetryMovesTheTimerByTheBackoffKeepingItsValue(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond), Value: store.Value("v")})
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return timers.Retry{}, nil
		}}
		applies := e.captureApplies()
		rep := e.run(t, registry(t, h), timers.RunConfig{})

		assert.Equal(t, 1, rep.Retried)
		assert.Zero(t, rep.Fired)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(timers.RetryBackoff), kindA, "r", "v"}}, rows)
		require.Len(t, *applies, 1)
		assert.Equal(t, now.Add(timers.RetryBackoff), (*applies)[0].Wakeup.At)
		assert.Equal(t, uint64(1), e.metrics.CounterSum(telemetry.MetricTimersRetried))
	})
}

func TestPointerOutcomesAreAccepted(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	for _, ref := range []string{"done", "resched", "retry"} {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: ref, DueAt: now})
	}
	h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
		switch tm.Reference {
		case "done":
			return &timers.Done{}, nil
		case "resched":
			return &timers.Reschedule{DueAt: now.Add(3 * time.Millisecond)}, nil
		}
		return &timers.Retry{}, nil
	}}
	rep := e.run(t, registry(t, h), timers.RunConfig{})
	assert.Equal(t, 2, rep.Fired)
	assert.Equal(t, 1, rep.Retried)
	rows, _ := e.timersIn(t)
	assert.Equal(t, []stored{{now.Add(3 * time.Millisecond), kindA, "resched", ""}, {now.Add(timers.RetryBackoff), kindA, "retry", ""}}, rows)
}

// Another writer moves or rewrites the timer after the handler read it and
// before its outcome is applied: exactly one of the two changes lands.
func TestAConcurrentChangeBetweenFireAndApplyLeavesExactlyOneOutcome(t *testing.T) {
	cases := []struct {
		name   string
		change timers.Timer
	}{
		{"moved later", timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(50 * time.Millisecond), Value: store.Value("theirs")}},
		{"rewritten in place", timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-10 * time.Millisecond), Value: store.Value("theirs")}},
		{"moved to a due time already passed", timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-5 * time.Millisecond), Value: store.Value("theirs")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, now, func(t *testing.T, e *env) {
				e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-10 * time.Millisecond), Value: store.Value("mine")})
				hooked := 0
				e.faults.BeforeApply(func(ctx context.Context, p store.Partition, b *store.Batch) error {
					if hooked++; hooked == 1 {
						e.schedule(t, tc.change)
					}
					return nil
				})
				h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
					return timers.Reschedule{DueAt: now.Add(999 * time.Millisecond), Value: store.Value("ours"),
						Batch: store.NewBatch().Put(store.Key("side"), store.Value("ours"))}, nil
				}}
				rep := e.run(t, registry(t, h), timers.RunConfig{})

				assert.Equal(t, 1, rep.Raced)
				assert.Zero(t, rep.Fired)
				assert.Len(t, h.seen(), 1, "a raced timer is not fired again in the run")
				rows, _ := e.timersIn(t)
				assert.Equal(t, []stored{{tc.change.DueAt, kindA, "r", "theirs"}}, rows)
				due, _ := e.refDue(t, kindA, "r")
				assert.Equal(t, tc.change.DueAt, due)
				assert.Nil(t, e.get(t, store.Key("side")), "the handler's batch did not land")
				assert.Equal(t, uint64(1), e.metrics.CounterSum(telemetry.MetricTimersRaced))
			})
		})
	}
}

func TestAFailedHandlerGuardCountsAsRaced(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("v")})
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return timers.Done{Batch: store.NewBatch().Require(store.Equals(store.Key("missing"), store.Value("x")))}, nil
		}}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 1, rep.Raced)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now, kindA, "r", "v"}}, rows, "the timer stays where it was")
	})
}

func TestHandlerFailuresAreIsolated(t *testing.T) {
	cases := []struct {
		name string
		fire func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error)
		logs string
	}{
		{"error", func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, errors.New("sink down")
		}, "sink down"},
		{"panic", func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			panic("handler bug")
		}, "handler bug"},
		{"nil outcome", func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, nil
		}, "no outcome"},
		{"outcome the store rejects", func(_ context.Context, c *timers.Ctx, _ timers.DueTimer) (timers.Fired, error) {
			big := make(store.Value, c.Store.Capabilities().MaxValueBytes+1)
			return timers.Reschedule{DueAt: now.Add(time.Millisecond), Value: big}, nil
		}, "store rejected"},
		{"deadline passed", func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return timers.Done{Batch: store.NewBatch().Put(store.Key("side"), store.Value("x")).
				WithDeadline(now.Add(-time.Millisecond))}, nil
		}, "deadline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, now, func(t *testing.T, e *env) {
				e.schedule(t, timers.Timer{Kind: kindA, Reference: "bad", DueAt: now.Add(-2 * time.Millisecond), Value: store.Value("v")})
				e.schedule(t, timers.Timer{Kind: kindB, Reference: "good", DueAt: now.Add(-time.Millisecond)})
				bad := &handler{kind: kindA, fire: tc.fire}
				good := &handler{kind: kindB, fire: done}
				rep := e.run(t, registry(t, bad, good), timers.RunConfig{})

				assert.Equal(t, 1, rep.Failed)
				assert.Equal(t, 1, rep.Fired, "the other timer still fires")
				assert.Equal(t, []string{"good"}, good.seen())
				rows, _ := e.timersIn(t)
				assert.Equal(t, []stored{{now.Add(timers.RetryBackoff), kindA, "bad", "v"}}, rows,
					"the failed timer stays, moved by the retry backoff")
				assert.Nil(t, e.get(t, store.Key("side")))
				assert.Contains(t, e.logs.String(), tc.logs)
				assert.Equal(t, uint64(1), e.metrics.CounterSum(telemetry.MetricTimersFailed))
				assert.Equal(t, now.Add(timers.RetryBackoff), rep.NextDue)
			})
		})
	}
}

// A handler that finds corrupt data stops at it: the timer, value kept,
// waits HeldBackoff (so a repair is seen) and wakes the partition then.
func TestAHandlerReportingCorruptDataHoldsItsTimer(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-2 * time.Millisecond), Value: store.Value("junk")})
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, fmt.Errorf("decode timer value: %w", store.ErrCorrupt)
		}}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 1, rep.Corrupt)
		assert.Equal(t, 1, rep.Held)
		assert.Zero(t, rep.Failed)
		assert.Equal(t, now.Add(timers.DefaultHeldBackoff), rep.NextDue, "the partition wakes for it after the backoff")
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(timers.DefaultHeldBackoff), kindA, "r", "junk"}}, rows, "kept, moved by the backoff")
		assert.Contains(t, e.logs.String(), "corrupt")
	})
}

func TestAStoreFailureEndsTheRunWithTheReportSoFar(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		// Pages of two timers (a page reads one row past its size), each
		// page's outcomes committed in one batch: the second fails.
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "a", DueAt: now.Add(-3 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "b", DueAt: now.Add(-2 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "c", DueAt: now.Add(-time.Millisecond)})
		e.faults.FailNth(storetest.MethodApply, 2, nil)
		h := &handler{kind: kindA, fire: done}
		rep, err := e.runErr(registry(t, h), timers.RunConfig{PageSize: 1})
		require.ErrorIs(t, err, store.ErrUnavailable)
		assert.Equal(t, 2, rep.Fired)
		assert.Equal(t, now.Add(-time.Millisecond), rep.NextDue, "the timer whose outcome did not commit stays due")
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(-time.Millisecond), kindA, "c", ""}}, rows)
	})
}

func TestACancelledContextEndsTheRun(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "a", DueAt: now.Add(-2 * time.Millisecond)})
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "b", DueAt: now.Add(-time.Millisecond)})
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	h := &handler{kind: kindA, fire: func(ctx context.Context, _ *timers.Ctx, _ timers.DueTimer) (timers.Fired, error) {
		cancel()
		return nil, ctx.Err()
	}}
	rep, err := e.runErr(registry(t, h), timers.RunConfig{})
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, rep.Failed, "a fire cut by the run's own context is not a handler failure")
	assert.Equal(t, []string{"a"}, h.seen())
	e.ctx = context.Background()
	rows, _ := e.timersIn(t)
	assert.Len(t, rows, 2, "both timers stay")
}

func TestRunDueRejectsMissingArguments(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	_, err := timers.RunDue(e.ctx, e.inner, e.p, nil, now, timers.RunConfig{})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = timers.RunDue(e.ctx, nil, e.p, registry(t), now, timers.RunConfig{})
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestNothingDueFiresNothingAndReportsTheNextDueTime(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "later", DueAt: now.Add(30 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "latest", DueAt: now.Add(60 * time.Millisecond)})
		h := &handler{kind: kindA, fire: done}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, timers.Report{NextDue: now.Add(30 * time.Millisecond), Elapsed: rep.Elapsed}, rep)
		assert.Empty(t, h.seen())
		assert.False(t, strings.Contains(e.logs.String(), "level=WARN"), e.logs.String())
	})
}
