package timers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testlog"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// forEachFormat runs fn as a subtest per engine and mkit format: on a
// new store (format 2, the formats this binary knows) and on a store that
// holds rows written before formats existed (format 1).
func forEachFormat(t *testing.T, fn func(t *testing.T, e *env, format uint32)) {
	for _, eng := range testengine.All {
		for _, format := range []uint32{1, 2} {
			t.Run(fmt.Sprintf("%s/format=%d", eng.Name, format), func(t *testing.T) {
				engine := fdbsim.AsDistributed(eng.Open(t, "timers.bbolt"))
				clk := clock.NewManual(now)
				if format == 1 {
					// Rows written before formats: a Layer whose gate
					// records nothing writes one, and stays open (a
					// Layer's Close closes the engine).
					old, err := fdblayer.Open(engine, fdblayer.Config{Clock: clk, Gate: evolve.GateConfig{ReadOnly: true}})
					require.NoError(t, err)
					out, err := old.Apply(context.Background(), storetest.Partition{Name: "before formats"}, store.NewBatch().Put(store.Key("k"), store.Value("v")))
					require.NoError(t, err)
					require.True(t, out.Committed())
				}
				l, err := fdblayer.Open(engine, fdblayer.Config{Clock: clk})
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				require.Equal(t, format, l.Format(gen.SchemaNamespace))
				fn(t, newEnvOver(t, l, clk), format)
			})
		}
	}
}

// refVersion is the version of timer (kindA, ref)'s reference entry.
func (e *env) refVersion(t testing.TB, ref string) uint8 {
	t.Helper()
	v, _, err := timers.ReadRef(e.ctx, e.inner, e.p, kindA, ref)
	require.NoError(t, err)
	require.NotNil(t, v)
	ver, err := gen.VersionOfTimerRefKeyValue(v)
	require.NoError(t, err)
	return ver
}

// A failing timer at format 2 keeps its attempts and last error in a
// TimerRefV2, backs off and becomes a dead letter after MaxAttempts; at
// format 1 its entry stays a U64Value (what a binary before retry
// policies reads), every fire sees no attempt, waits the first interval,
// and it is never dead-lettered.
func TestRetryStateIsKeptFromFormatTwo(t *testing.T) {
	forEachFormat(t, func(t *testing.T, e *env, format uint32) {
		pol := timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 2, MaxInterval: time.Hour, MaxAttempts: 3}
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, errors.New("declined")
		}}
		reg := &timers.Registry{}
		require.NoError(t, reg.Register(h, timers.KindConfig{Retry: pol}))
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now})
		var waits []time.Duration
		for range 5 {
			due, ok := e.refDue(t, kindA, "r")
			if !ok {
				break
			}
			e.clock.Set(due)
			e.run(t, reg, timers.RunConfig{})
			if next, ok := e.refDue(t, kindA, "r"); ok {
				waits = append(waits, next.Sub(due))
				want := uint8(gen.VersionTimerRefV2)
				if format == 1 {
					want = gen.VersionU64Value
				}
				assert.Equal(t, want, e.refVersion(t, "r"))
			}
		}
		var attempts []int
		var lastErrs []string
		for _, c := range h.calls {
			attempts, lastErrs = append(attempts, c.Attempts), append(lastErrs, c.LastError)
		}
		if format == 1 {
			assert.Equal(t, []int{0, 0, 0, 0, 0}, attempts)
			assert.Equal(t, []string{"", "", "", "", ""}, lastErrs)
			assert.Equal(t, []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second}, waits, "the first interval, every time")
			assert.Empty(t, e.deadLetters(t), "never dead-lettered")
			return
		}
		assert.Equal(t, []int{0, 1, 2}, attempts)
		assert.Equal(t, []string{"", "declined", "declined"}, lastErrs)
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, waits)
		assert.Len(t, e.deadLetters(t), 1, "dead after 3 attempts")
	})
}

// A periodic timer that fails once: at format 2 its retry keeps the
// period's scheduled time, so the handler sees it and the next period is
// counted from it; at format 1 the retry's due time stands for it, and an
// Every kind's next period shifts by the retry's wait. A Cron kind's next
// period is the same at both formats. Nothing else differs: each period
// fires, and the timer goes on.
func TestPeriodicTimersAtEitherFormat(t *testing.T) {
	forEachFormat(t, func(t *testing.T, e *env, format uint32) {
		everyMinute, err := timers.Cron("* * * * *")
		require.NoError(t, err)
		for _, tc := range []struct {
			name   string
			kind   timers.Kind
			period timers.Period
			first  time.Time
			// next is the period after the fire at each format.
			next map[uint32]time.Time
		}{
			{"every", kindA, timers.Every(time.Minute), now,
				map[uint32]time.Time{1: now.Add(time.Minute + time.Second), 2: now.Add(time.Minute)}},
			{"cron", kindB, everyMinute, time.UnixMilli(60_000),
				map[uint32]time.Time{1: time.UnixMilli(120_000), 2: time.UnixMilli(120_000)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				failed := false
				h := &handler{kind: tc.kind, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
					if !failed {
						failed = true
						return nil, errors.New("once")
					}
					return timers.Done{}, nil
				}}
				reg := &timers.Registry{}
				require.NoError(t, reg.Register(h, timers.KindConfig{Retry: timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 1, MaxInterval: time.Second}, Period: tc.period}))
				e.schedule(t, timers.Timer{Kind: tc.kind, Reference: tc.name, DueAt: tc.first})
				for range 2 {
					due, ok := e.refDue(t, tc.kind, tc.name)
					require.True(t, ok)
					e.clock.Set(due)
					e.run(t, reg, timers.RunConfig{})
				}
				require.Len(t, h.calls, 2)
				assert.Equal(t, tc.first, h.calls[0].Period)
				retry := tc.first.Add(time.Second)
				assert.Equal(t, retry, h.calls[1].DueAt)
				if format == 1 {
					assert.Equal(t, retry, h.calls[1].Period, "the retry's due time stands for the period")
				} else {
					assert.Equal(t, tc.first, h.calls[1].Period, "the period's own time")
				}
				next, ok := e.refDue(t, tc.kind, tc.name)
				require.True(t, ok, "a periodic timer goes on")
				assert.Equal(t, tc.next[format], next)
			})
		}
	})
}

// Reference entries written before formats existed as TimerRefV2 (by a
// binary with retry policies and no gate) read at format 1 as at any: the
// handler sees their attempts; the next move rewrites the entry in the
// version the format allows.
func TestATimerRefV2OfAFormatOneStoreIsRead(t *testing.T) {
	forEachFormat(t, func(t *testing.T, e *env, format uint32) {
		refKey, err := timers.RefKey(kindA, "r")
		require.NoError(t, err)
		key, err := timers.TimerKey(now, kindA, "r")
		require.NoError(t, err)
		v2, err := gen.EncodeTimerRefV2(gen.TimerRefV2{DueAtMs: encoded(now), Attempts: 2, LastError: "before"})
		require.NoError(t, err)
		e.apply(t, store.NewBatch().Put(key, store.Value("v")).Put(refKey, v2).WakeAt(now))
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, errors.New("again")
		}}
		e.run(t, registry(t, h), timers.RunConfig{})
		require.Len(t, h.calls, 1)
		assert.Equal(t, 2, h.calls[0].Attempts)
		assert.Equal(t, "before", h.calls[0].LastError)
		want := uint8(gen.VersionTimerRefV2)
		if format == 1 {
			want = gen.VersionU64Value
		}
		assert.Equal(t, want, e.refVersion(t, "r"))
	})
}

// newerRef is a reference entry of a version above TimerRefKey's family:
// a newer binary wrote it.
var newerRef = store.Value{gen.VersionTimerRefV2 + 1, 0x01, 0x02}

// A reference entry of a newer version is neither fired nor corrupt: the
// timer is left in place, counted Newer (and Held) and in
// mkitfdb_timers_newer_total, logged once, and the partition woken
// HeldBackoff later; the timers beside it fire.
func TestANewerReferenceEntryIsHeld(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		refKey, err := timers.RefKey(kindA, "newer")
		require.NoError(t, err)
		key, err := timers.TimerKey(now.Add(-time.Second), kindA, "newer")
		require.NoError(t, err)
		e.apply(t, store.NewBatch().Put(key, store.Value("v")).Put(refKey, newerRef).WakeAt(now))
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "plain", DueAt: now})
		h := &handler{kind: kindA, fire: done}
		reg := registry(t, h)
		rep := e.run(t, reg, timers.RunConfig{HeldBackoff: 30 * time.Second})

		assert.Equal(t, []string{"plain"}, h.seen())
		assert.Equal(t, 1, rep.Newer)
		assert.Equal(t, 1, rep.Held)
		assert.Zero(t, rep.Corrupt, "a newer entry is not corrupt")
		assert.Equal(t, 1, rep.Fired)
		assert.Equal(t, now.Add(30*time.Second), rep.NextDue)
		assert.Equal(t, "v", string(e.get(t, key)), "left in place")
		assert.Equal(t, []byte(newerRef), []byte(e.get(t, refKey)))
		pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: e.p.Kind()}
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricTimersNewer, pk))
		assert.Zero(t, e.metrics.CounterSum(telemetry.MetricTimersCorrupt))
		assert.Contains(t, e.logs.String(), "newer version")

		rep = e.run(t, reg, timers.RunConfig{HeldBackoff: 30 * time.Second})
		assert.Equal(t, 1, rep.Newer, "held again, never skipped")
		assert.Equal(t, 1, strings.Count(e.logs.String(), "timer reference entry is of a newer version"), "logged once per interval")
	})
}

// A handler that meets a row of a newer version (an error wrapping
// store.ErrNewerVersion) holds its timer HeldBackoff later, value and
// attempts unchanged: counted Newer, not Failed, no attempt spent, never a
// dead letter.
func TestAHandlerThatMeetsANewerRowHoldsItsTimer(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		newer := &wire.VersionError{Family: "OrderKey", Version: 3, Newest: 2}
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, fmt.Errorf("read the order: %w", newer)
		}}
		reg := &timers.Registry{}
		require.NoError(t, reg.Register(h, timers.KindConfig{Retry: timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 1, MaxInterval: time.Second, MaxAttempts: 1}}))
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("v")})
		for i := range 3 {
			rep := e.run(t, reg, timers.RunConfig{HeldBackoff: 30 * time.Second})
			assert.Equal(t, 1, rep.Newer, "fire %d", i)
			assert.Zero(t, rep.Failed)
			assert.Zero(t, rep.DeadLettered, "MaxAttempts 1 would have made it one")
			due, ok := e.refDue(t, kindA, "r")
			require.True(t, ok)
			assert.Equal(t, e.clock.Now().Add(30*time.Second), due)
			e.clock.Set(due)
		}
		for _, c := range h.calls {
			assert.Zero(t, c.Attempts)
			assert.Equal(t, "v", string(c.Value))
		}
		assert.Empty(t, e.deadLetters(t))
	})
}

// A Scheduler whose store is fenced claims nothing: two binaries share
// one engine (two Layers, as two processes), the older knowing mkit format
// 1; the newer raises mkit to 2 (refused while the older runs, then forced
// past it, as past a process known to be dead); the older's gate fences
// the store at its refresh, and its Scheduler counts the due partition
// Fenced, logs it once, and leaves it to the newer binary's, which fires
// it.
func TestAFencedSchedulerClaimsNothing(t *testing.T) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := context.Background()
			engine := fdbsim.AsDistributed(eng.Open(t, "timers.bbolt"))
			clk := clock.NewManual(now)
			seed, err := fdblayer.Open(engine, fdblayer.Config{Clock: clk, Gate: evolve.GateConfig{ReadOnly: true}})
			require.NoError(t, err)
			p := storetest.Partition{Name: "p"}
			out, err := seed.Apply(ctx, storetest.Partition{Name: "before formats"}, store.NewBatch().Put(store.Key("k"), store.Value("v")))
			require.NoError(t, err)
			require.True(t, out.Committed())
			oldL, err := fdblayer.Open(engine, fdblayer.Config{Clock: clk, Gate: evolve.GateConfig{Process: "old", Known: map[string]uint32{gen.SchemaNamespace: 1}}})
			require.NoError(t, err)
			newL, err := fdblayer.Open(engine, fdblayer.Config{Clock: clk, Gate: evolve.GateConfig{Process: "new"}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = newL.Close() }) // closes the engine last
			t.Cleanup(func() { _ = oldL.Gate().Close() })

			raise := evolve.RaiseConfig{By: "test", Reason: "retry state"}
			err = newL.Gate().Raise(ctx, gen.SchemaNamespace, 2, raise)
			var re *evolve.RaiseError
			require.ErrorAs(t, err, &re)
			require.Len(t, re.Unaware, 1)
			assert.Equal(t, "old", re.Unaware[0].Name)
			raise.Force = true
			require.NoError(t, newL.Gate().Raise(ctx, gen.SchemaNamespace, 2, raise))

			obs, _, err := timers.ReadRef(ctx, newL, p, kindA, "r")
			require.NoError(t, err)
			b := store.NewBatch()
			require.NoError(t, timers.Schedule(b, newL.Capabilities(), obs, timers.Timer{Kind: kindA, Reference: "r", DueAt: now}))
			out, err = newL.Apply(ctx, p, b)
			require.NoError(t, err)
			require.True(t, out.Committed())

			require.ErrorIs(t, oldL.Gate().Sync(ctx), evolve.ErrNewerFormat, "the old binary's refresh sees the raise")
			_, err = oldL.Apply(ctx, p, store.NewBatch().Put(store.Key("x"), store.Value("y")))
			require.ErrorIs(t, err, store.ErrNewerFormat)
			require.ErrorIs(t, err, store.ErrUnavailable)

			logs := &testlog.Buffer{}
			newScheduler := func(l *fdblayer.Layer, owner string, h *handler) *timers.Scheduler {
				s, err := timers.NewScheduler(timers.SchedulerConfig{Store: l, Registry: registry(t, h), Owner: owner,
					Clock: clk, Logger: slogTo(logs), LeaseDuration: 10 * time.Second})
				require.NoError(t, err)
				return s
			}
			oldH, newH := &handler{kind: kindA, fire: done}, &handler{kind: kindA, fire: done}
			oldS := newScheduler(oldL, "old", oldH)
			for range 2 {
				rep, err := oldS.Tick(ctx)
				require.NoError(t, err, "a fenced store is not a failure of the tick")
				assert.Equal(t, 1, rep.Fenced)
				assert.Zero(t, rep.Claimed)
				assert.Zero(t, rep.Errors)
			}
			assert.Empty(t, oldH.seen())
			assert.Equal(t, 1, strings.Count(logs.String(), "refuses this binary's writes"), "logged once")

			rep, err := newScheduler(newL, "new", newH).Tick(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, rep.Claimed)
			assert.Equal(t, []string{"r"}, newH.seen())
		})
	}
}

// slogTo is a logger writing text to w.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
