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

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// logLines are the lines of a test's log that hold every one of words.
func logLines(logs string, words ...string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		keep := l != ""
		for _, w := range words {
			keep = keep && strings.Contains(l, w)
		}
		if keep {
			out = append(out, l)
		}
	}
	return out
}

// A retried failure is logged at WARN with its attempt ("n of N") and when
// the next attempt comes, the kind by the name it was registered with;
// only the last attempt, which makes the timer a dead letter, is logged
// at ERROR; a permanent failure is an ERROR at once; a kind retried for
// ever says so.
func TestAFailureIsLoggedWithItsAttemptAndTheNext(t *testing.T) {
	pol := timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 2, MaxInterval: time.Minute, MaxAttempts: 3}
	t.Run("retried, then a dead letter", func(t *testing.T) {
		forEachEngine(t, now, func(t *testing.T, e *env) {
			h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
				return nil, errors.New("carrier unavailable")
			}}
			reg := &timers.Registry{}
			require.NoError(t, reg.Register(h, timers.KindConfig{Retry: pol, Name: "ship"}))
			e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now})
			for range pol.MaxAttempts {
				due, ok := e.refDue(t, kindA, "job")
				require.True(t, ok)
				e.clock.Set(due)
				e.run(t, reg, timers.RunConfig{})
			}
			logs := e.logs.String()
			for n := 1; n < pol.MaxAttempts; n++ {
				lines := logLines(logs, fmt.Sprintf(`attempt="%d of 3"`, n))
				require.Len(t, lines, 1, "%s", logs)
				l := lines[0]
				assert.Contains(t, l, "level=WARN")
				assert.Contains(t, l, "timer handler failed; retrying")
				assert.Contains(t, l, "kind=ship")
				assert.Contains(t, l, "next_attempt=")
				assert.Contains(t, l, fmt.Sprintf("retry_in=%s", time.Duration(1<<(n-1))*time.Second))
				assert.Contains(t, l, `error="carrier unavailable"`)
			}
			last := logLines(logs, `attempt="3 of 3"`)
			require.Len(t, last, 1, "%s", logs)
			assert.Contains(t, last[0], "level=ERROR")
			assert.Contains(t, last[0], "no attempts left: a dead letter")
			assert.Contains(t, last[0], "kind=ship")
			assert.NotContains(t, last[0], "next_attempt")
			assert.Len(t, logLines(logs, "level=ERROR"), 1, "ERROR at the last attempt only:\n%s", logs)
			assert.Empty(t, logLines(logs, fmt.Sprintf("kind(%d)", uint16(kindA))), "the kind named as registered")
			require.Len(t, e.deadLetters(t), 1)
		})
	})
	t.Run("next attempt at", func(t *testing.T) {
		forEachEngine(t, now, func(t *testing.T, e *env) {
			h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
				return nil, errors.New("boom")
			}}
			reg := &timers.Registry{}
			require.NoError(t, reg.Register(h, timers.KindConfig{Retry: pol}))
			e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now})
			e.run(t, reg, timers.RunConfig{})
			due, ok := e.refDue(t, kindA, "job")
			require.True(t, ok)
			lines := logLines(e.logs.String(), `attempt="1 of 3"`)
			require.Len(t, lines, 1)
			assert.Contains(t, lines[0], "next_attempt="+due.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
			assert.Contains(t, lines[0], fmt.Sprintf("kind=kind(%d)", uint16(kindA)), "an unnamed kind as Kind.String names it")
		})
	})
	t.Run("permanent", func(t *testing.T) {
		forEachEngine(t, now, func(t *testing.T, e *env) {
			h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
				return nil, timers.Permanent(errors.New("card declined"))
			}}
			reg := &timers.Registry{}
			require.NoError(t, reg.Register(h, timers.KindConfig{Retry: pol, Name: "charge"}))
			e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now})
			e.run(t, reg, timers.RunConfig{})
			lines := logLines(e.logs.String(), "level=ERROR")
			require.Len(t, lines, 1, "%s", e.logs)
			assert.Contains(t, lines[0], `attempt="1 of 3"`)
			assert.Contains(t, lines[0], "a permanent failure: a dead letter")
			assert.Contains(t, lines[0], "kind=charge")
			assert.Empty(t, logLines(e.logs.String(), "level=WARN"))
		})
	})
	t.Run("retried for ever", func(t *testing.T) {
		forEachEngine(t, now, func(t *testing.T, e *env) {
			h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
				return nil, errors.New("boom")
			}}
			e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now})
			reg := registry(t, h) // no MaxAttempts
			for range 3 {
				due, _ := e.refDue(t, kindA, "job")
				e.clock.Set(due)
				e.run(t, reg, timers.RunConfig{})
			}
			assert.Len(t, logLines(e.logs.String(), "level=WARN", "(no limit)", "retry_in="), 3, "%s", e.logs)
			assert.Empty(t, logLines(e.logs.String(), "level=ERROR"))
		})
	})
	t.Run("a name too long", func(t *testing.T) {
		err := (&timers.Registry{}).Register(&handler{kind: kindA}, timers.KindConfig{Name: strings.Repeat("n", timers.MaxKindName+1)})
		assert.ErrorIs(t, err, store.ErrInvalid)
	})
}
