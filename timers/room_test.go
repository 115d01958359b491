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

// fillBatch returns a batch of puts that uses exactly the operations and
// bytes caps leaves a builder (MaxBatchOps - ReservedBatchOps,
// MaxBatchBytes), plus extraOps puts of one byte more.
func fillBatch(t *testing.T, caps store.Capabilities, extraOps int) *store.Batch {
	t.Helper()
	ops, bytes := caps.MaxBatchOps-caps.ReservedBatchOps, caps.MaxBatchBytes
	b := store.NewBatch()
	for i := range ops {
		key := store.Key(fmt.Sprintf("fill/%04d", i))
		left := bytes - b.Bytes() - len(key) - (ops-i-1)*(len(key)) // room for the keys still to come
		v := make(store.Value, max(0, min(left, caps.MaxValueBytes)))
		b.Put(key, v)
	}
	require.Equal(t, caps.MaxBatchBytes, b.Bytes(), "the batch holds exactly the bytes")
	require.NoError(t, b.Validate(caps))
	for i := range extraOps {
		b.Put(store.Key(fmt.Sprintf("more/%d", i)), nil)
	}
	return b
}

// TestHandlerCapabilitiesFitARealFire: a handler whose batch uses all of
// HandlerCapabilities (every operation and byte it leaves) has its
// outcome land, Done and Reschedule alike, under a Scheduler's claim
// (the lease guard and the release beside it) and run alone; past the
// slack its outcome leaves (a Done writes one operation less than a
// Reschedule, a release that does not fit lands in a batch of its own,
// and without a claim there is no lease guard) one operation more fails
// the timer, nothing of it written.
func TestHandlerCapabilitiesFitARealFire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		slack   int // the operations the outcome leaves unused, under a claim
		outcome func(b *store.Batch, dt timers.DueTimer) timers.Fired
	}{
		{"done", 1, func(b *store.Batch, _ timers.DueTimer) timers.Fired { return timers.Done{Batch: b} }},
		{"reschedule", 0, func(b *store.Batch, dt timers.DueTimer) timers.Fired {
			return timers.Reschedule{DueAt: now.Add(time.Minute), Value: dt.Value, Batch: b}
		}},
	} {
		for _, claimed := range []bool{true, false} {
			// The room of the claim's release (two operations) is slack
			// too: a release that does not fit lands on its own.
			slack := tc.slack + 2
			if !claimed {
				slack++ // and the lease guard's
			}
			for _, extra := range []int{0, slack + 1} {
				name := fmt.Sprintf("%s/claimed=%v/extra=%d", tc.name, claimed, extra)
				t.Run(name, func(t *testing.T) {
					forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
						p := e.p // the partition RunDue runs alone
						e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "full", DueAt: now.Add(-time.Millisecond), Value: store.Value("value of the timer")})
						h := &handler{kind: kindA, fire: func(ctx context.Context, c *timers.Ctx, dt timers.DueTimer) (timers.Fired, error) {
							return tc.outcome(fillBatch(t, timers.HandlerCapabilities(c.Store.Capabilities(), dt), extra), dt), nil
						}}
						var rep timers.Report
						if claimed {
							s := e.scheduler(t, "me", registry(t, h), nil)
							rep = e.tick(t, s).Timers
						} else {
							rep = e.run(t, registry(t, h), timers.RunConfig{})
						}
						fill, err := e.layer.Scan(e.ctx, p, store.Key("fill/"), store.Key("fill0"), nil, 1)
						require.NoError(t, err)
						if extra == 0 {
							assert.Equal(t, 1, rep.Fired, "the outcome fits")
							assert.Len(t, fill.Entries, 1, "the handler's batch landed")
							return
						}
						assert.Equal(t, 1, rep.Failed, "one operation past the slack does not fit")
						assert.Empty(t, fill.Entries, "nothing of it landed")
					})
				})
			}
		}
	}
}

// TestHandlerCapabilitiesFitAFireAfterAFailure: a timer of a periodic
// kind whose last fire failed with the longest error has a reference
// entry of the retry state's record; a handler filling what
// HandlerCapabilities leaves still has its Done (a move to the next
// period) land, and one operation more fails it.
func TestHandlerCapabilitiesFitAFireAfterAFailure(t *testing.T) {
	// Run alone: the lease guard's and the release's room (three
	// operations) are slack.
	for _, extra := range []int{0, 4} {
		t.Run(fmt.Sprintf("extra=%d", extra), func(t *testing.T) {
			forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
				e.schedule(t, e.p, timers.Timer{Kind: kindA, Reference: "full", DueAt: now, Value: store.Value("value of the timer")})
				h := &handler{kind: kindA, fire: func(ctx context.Context, c *timers.Ctx, dt timers.DueTimer) (timers.Fired, error) {
					if dt.Attempts == 0 {
						return nil, errors.New(strings.Repeat("x", 2000))
					}
					return timers.Done{Batch: fillBatch(t, timers.HandlerCapabilities(c.Store.Capabilities(), dt), extra)}, nil
				}}
				reg := &timers.Registry{}
				require.NoError(t, reg.Register(h, timers.KindConfig{Retry: fixedRetry, Period: timers.Every(time.Hour)}))
				rep := e.run(t, reg, timers.RunConfig{})
				require.Equal(t, 1, rep.Failed)
				e.clock.Set(now.Add(timers.RetryBackoff))
				rep = e.run(t, reg, timers.RunConfig{})
				require.Len(t, h.calls, 2)
				require.Len(t, h.calls[1].LastError, 512)
				if extra == 0 {
					assert.Equal(t, 1, rep.Fired, "the outcome fits")
					due, ok := e.refDue(t, kindA, "full")
					assert.True(t, ok)
					assert.Equal(t, now.Add(time.Hour), due, "moved to its next period")
					return
				}
				assert.Equal(t, 1, rep.Failed, "one operation past the slack does not fit")
			})
		})
	}
}
