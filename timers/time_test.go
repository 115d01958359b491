package timers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// TestTimesAreKeptToTheMillisecond: a due time with a fraction of a
// millisecond reads back truncated, from the reference entry, the handler's
// DueTimer and the run's Ctx alike, and a Reschedule's too.
func TestTimesAreKeptToTheMillisecond(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		due := now.Add(-5 * time.Millisecond).Add(700 * time.Microsecond)
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: due, Value: store.Value("v")})
		_, read, err := timers.ReadRef(e.ctx, e.inner, e.p, kindA, "r")
		require.NoError(t, err)
		assert.True(t, read.Equal(due.Truncate(time.Millisecond)), "read back %v, want %v", read, due.Truncate(time.Millisecond))
		assert.Equal(t, due.UnixMilli(), read.UnixMilli())
		next := now.Add(500 * time.Millisecond).Add(999 * time.Microsecond)
		var seen timers.DueTimer
		var runNow time.Time
		h := &handler{kind: kindA, fire: func(_ context.Context, c *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
			seen, runNow = tm, c.Now
			return timers.Reschedule{DueAt: next, Value: tm.Value}, nil
		}}
		e.clock.Set(now.Add(300 * time.Microsecond))
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 1, rep.Fired)
		assert.True(t, seen.DueAt.Equal(read), "the handler saw %v, want %v", seen.DueAt, read)
		assert.True(t, runNow.Equal(now), "the run's time %v, want %v", runNow, now)
		assert.True(t, rep.NextDue.Equal(next.Truncate(time.Millisecond)), "next due %v", rep.NextDue)
		_, moved, err := timers.ReadRef(e.ctx, e.inner, e.p, kindA, "r")
		require.NoError(t, err)
		assert.Equal(t, now.Add(500*time.Millisecond), moved)
	})
}

// TestTimesBeforeTheEpochAreInvalid: a time before the Unix epoch is
// refused with store.ErrInvalid wherever it enters, and nothing is
// written; a Reschedule to one fails its timer, which stays.
func TestTimesBeforeTheEpochAreInvalid(t *testing.T) {
	before := time.Unix(0, 0).Add(-time.Millisecond)
	forEachEngine(t, now, func(t *testing.T, e *env) {
		_, err := timers.TimerKey(before, kindA, "r")
		assert.ErrorIs(t, err, store.ErrInvalid, "TimerKey")
		b := store.NewBatch()
		err = timers.Schedule(b, e.inner.Capabilities(), nil, timers.Timer{Kind: kindA, Reference: "r", DueAt: before})
		assert.ErrorIs(t, err, store.ErrInvalid, "Schedule")
		assert.Zero(t, b.Ops(), "Schedule added nothing")
		assert.Nil(t, b.Wakeup)
		_, err = timers.RunDue(e.ctx, e.inner, e.p, registry(t), before, timers.RunConfig{})
		assert.ErrorIs(t, err, store.ErrInvalid, "RunDue")

		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond), Value: store.Value("v")})
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return timers.Reschedule{DueAt: before}, nil
		}}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 1, rep.Failed, "the outcome is invalid")
		due, ok := e.refDue(t, kindA, "r")
		require.True(t, ok)
		assert.Equal(t, now.Add(timers.RetryBackoff), due, "moved later as a failed timer is")
		assert.True(t, errors.Is(err, store.ErrInvalid))
	})
}
