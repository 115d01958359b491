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
	"github.com/mkit-dev/mkitfdb/timers"
)

// isDeadLetterRead matches a Get of a dead letter's key: the read a run
// makes before it writes one.
func isDeadLetterRead(c storetest.Call) bool {
	_, err := gen.ParseDeadLetterKey(c.Key)
	return err == nil
}

// A run reads a dead letter's key before it writes the dead letter. When
// that read fails (the store is briefly unavailable) the run fails, as it
// does when any store call fails, and spends nothing: the timer keeps its
// due time, attempts and last error, and no dead letter is written. The
// handler's outcome is recorded as the handler gave it once the store
// answers: a Permanent error makes a dead letter at once, whatever
// attempts remain, and the dead letter's last error is the handler's.
func TestAFailedDeadLetterReadFailsTheRunAndSpendsNothing(t *testing.T) {
	pol := timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 1, MaxInterval: time.Second, MaxAttempts: 3}
	for _, tc := range []struct {
		name string
		// before is how many attempts fail (with "attempt n") before the
		// fire whose dead letter's read fails.
		before  int
		outcome func() (timers.Fired, error)
		lastErr string
		perm    bool
	}{
		{"Retry with a Permanent error, attempts left", 0,
			func() (timers.Fired, error) {
				return timers.Retry{Err: timers.Permanent(errors.New("no such order"))}, nil
			},
			"no such order", true},
		{"Retry with a Permanent error, after a failure", 1,
			func() (timers.Fired, error) {
				return timers.Retry{Err: timers.Permanent(errors.New("no such order"))}, nil
			},
			"no such order", true},
		{"Retry on the last attempt", 2,
			func() (timers.Fired, error) {
				return timers.Retry{After: time.Second, Err: errors.New("still down")}, nil
			},
			"still down", false},
		{"a Permanent error", 0,
			func() (timers.Fired, error) { return nil, timers.Permanent(errors.New("no such order")) },
			"no such order", true},
		{"an error on the last attempt", 2,
			func() (timers.Fired, error) { return nil, errors.New("still down") },
			"still down", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, now, func(t *testing.T, e *env) {
				h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
					if tm.Attempts < tc.before {
						return nil, fmt.Errorf("attempt %d", tm.Attempts+1)
					}
					return tc.outcome()
				}}
				reg := &timers.Registry{}
				require.NoError(t, reg.Register(h, timers.KindConfig{Retry: pol}))
				e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("v")})
				step := func() (timers.Report, error) {
					due, ok := e.refDue(t, kindA, "r")
					require.True(t, ok, "the timer is live")
					e.clock.Set(due)
					return e.runErr(reg, timers.RunConfig{})
				}
				for range tc.before {
					_, err := step()
					require.NoError(t, err)
				}
				due, _ := e.refDue(t, kindA, "r")

				// Briefly: the first dead letter read fails, later ones
				// are answered.
				failed := false
				e.faults.FailWhen(storetest.MethodGet, func(c storetest.Call) bool {
					if failed || !isDeadLetterRead(c) {
						return false
					}
					failed = true
					return true
				}, nil)
				rep, err := step()
				require.True(t, failed, "the dead letter's key was read")
				require.ErrorIs(t, err, storetest.ErrInjected, "a store failure fails the run")
				assert.Zero(t, rep.DeadLettered+rep.Retried)
				assert.Empty(t, e.deadLetters(t), "nothing written")
				got, ok := e.refDue(t, kindA, "r")
				require.True(t, ok, "the timer is kept")
				assert.Equal(t, due, got, "at its due time")

				e.faults.Clear()
				rep, err = step()
				require.NoError(t, err)
				assert.Equal(t, 1, rep.DeadLettered)
				calls := h.calls
				require.Len(t, calls, tc.before+2)
				last := calls[len(calls)-1]
				assert.Equal(t, tc.before, last.Attempts, "the failed run spent no attempt")
				if tc.before > 0 {
					assert.Equal(t, fmt.Sprintf("attempt %d", tc.before), last.LastError, "nor recorded an error")
				}
				dls := e.deadLetters(t)
				require.Len(t, dls, 1)
				assert.Equal(t, tc.lastErr, dls[0].LastError, "the handler's own error")
				assert.Equal(t, tc.perm, dls[0].Permanent)
				assert.Equal(t, tc.before+1, dls[0].Attempts)
				_, ok = e.refDue(t, kindA, "r")
				assert.False(t, ok, "a dead letter is no timer")
			})
		})
	}
}
