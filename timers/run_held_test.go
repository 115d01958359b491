package timers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Timers of a kind without a handler wait HeldBackoff, value unchanged,
// counted and logged once per run per kind; the partition wakes for them,
// and once a handler is registered they fire with no write in between.
func TestAnUnknownKindWaitsAndFiresOnceRegistered(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		for _, ref := range []string{"x", "y", "z"} {
			e.schedule(t, timers.Timer{Kind: 1200, Reference: ref, DueAt: now.Add(-10 * time.Millisecond), Value: store.Value(ref)})
		}
		e.schedule(t, timers.Timer{Kind: 1201, Reference: "w", DueAt: now.Add(-9 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "known", DueAt: now.Add(-time.Millisecond)})
		h := &handler{kind: kindA, fire: done}
		reg := registry(t, h)

		rep := e.run(t, reg, timers.RunConfig{})
		assert.Equal(t, 2, rep.UnknownKind, "two kinds")
		assert.Equal(t, 4, rep.Held, "four timers")
		assert.Equal(t, 1, rep.Fired, "the registered kind still fires")
		assert.Equal(t, now.Add(timers.DefaultHeldBackoff), rep.NextDue, "held timers wake the partition after the backoff")
		assert.Equal(t, 2, strings.Count(e.logs.String(), "no handler registered"), e.logs.String())
		pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "namespace"}
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricTimersUnknownKind, pk,
			telemetry.Label{Name: telemetry.LabelTimerKind, Value: "1200"}))
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricTimersUnknownKind, pk,
			telemetry.Label{Name: telemetry.LabelTimerKind, Value: "1201"}))
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{
			{now.Add(timers.DefaultHeldBackoff), 1200, "x", "x"}, {now.Add(timers.DefaultHeldBackoff), 1200, "y", "y"}, {now.Add(timers.DefaultHeldBackoff), 1200, "z", "z"}, {now.Add(timers.DefaultHeldBackoff), 1201, "w", ""},
		}, rows, "moved by the backoff, values kept")
		w, ok, err := e.inner.(store.DueIndex).NextWake(e.ctx, e.p)
		require.NoError(t, err)
		require.True(t, ok)
		assert.False(t, w.After(now.Add(timers.DefaultHeldBackoff)), "the partition wakes for them")

		rep = e.run(t, reg, timers.RunConfig{})
		assert.Zero(t, rep.UnknownKind, "not looked at again before the backoff")
		assert.Equal(t, 2, strings.Count(e.logs.String(), "no handler registered"), "nor logged")

		e.clock.Set(now.Add(timers.DefaultHeldBackoff))
		rep = e.run(t, reg, timers.RunConfig{})
		assert.Equal(t, 2, rep.UnknownKind)
		assert.Equal(t, uint64(4), e.metrics.CounterSum(telemetry.MetricTimersUnknownKind), "counted again after the backoff")

		// Once a handler is registered, the next run fires them.
		require.NoError(t, reg.Register(&handler{kind: 1200, fire: done}, timers.KindConfig{}))
		require.NoError(t, reg.Register(&handler{kind: 1201, fire: done}, timers.KindConfig{}))
		e.clock.Set(now.Add(2 * timers.DefaultHeldBackoff))
		rep = e.run(t, reg, timers.RunConfig{})
		assert.Equal(t, 4, rep.Fired)
		rows, _ = e.timersIn(t)
		assert.Empty(t, rows)
	})
}

// corruptTimerKey is a key inside the timer class whose fields do not
// parse: a string where the due time should be.
func corruptTimerKey() store.Key {
	start, _ := gen.ClassRange(gen.TagTimerKey)
	return append(append(store.Key{}, start...), 0x02, 'x', 0x00)
}

func TestACorruptTimerKeyIsKeptLoggedAndCounted(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.put(t, corruptTimerKey(), store.Value("v"))
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "ok", DueAt: now.Add(-time.Millisecond)})
		reg := registry(t, &handler{kind: kindA, fire: done})
		rep := e.run(t, reg, timers.RunConfig{})

		assert.Equal(t, 1, rep.Corrupt)
		assert.Equal(t, 1, rep.Held)
		assert.Equal(t, 1, rep.Fired, "the scan goes on past it")
		assert.Equal(t, "v", string(e.get(t, corruptTimerKey())), "not deleted")
		assert.Contains(t, e.logs.String(), "corrupt timer key")
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricTimersCorrupt,
			telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "namespace"}))
		assert.Equal(t, now.Add(timers.DefaultHeldBackoff), rep.NextDue, "the partition wakes again for it after the backoff")

		// A busy partition runs again before the backoff: the row is
		// counted, not logged again.
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "again", DueAt: now})
		rep = e.run(t, reg, timers.RunConfig{})
		assert.Equal(t, 1, rep.Corrupt)
		assert.Equal(t, 1, strings.Count(e.logs.String(), "corrupt timer key"), "logged once per interval")
	})
}

func TestACorruptReferenceEntryKeepsItsTimer(t *testing.T) {
	refKey, err := timers.RefKey(kindA, "r")
	require.NoError(t, err)
	timerKey, err := timers.TimerKey(now.Add(-time.Millisecond), kindA, "r")
	require.NoError(t, err)
	otherDue, err := gen.EncodeU64Value(gen.U64Value{Value: encoded(now.Add(100 * time.Millisecond))})
	require.NoError(t, err)
	cases := []struct {
		name string
		ref  store.Value // nil: no entry
		logs string
	}{
		{"missing", nil, "no reference entry"},
		{"naming another due time", otherDue, "names another timer"},
		{"undecodable", store.Value{gen.VersionTimerRefV2, 0xde, 0xad}, "corrupt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, now, func(t *testing.T, e *env) {
				b := store.NewBatch().Put(timerKey, store.Value("v"))
				if tc.ref != nil {
					b.Put(refKey, tc.ref)
				}
				e.apply(t, b)
				h := &handler{kind: kindA, fire: done}
				rep := e.run(t, registry(t, h), timers.RunConfig{})

				assert.Empty(t, h.seen(), "an inconsistent timer is not fired")
				assert.Equal(t, 1, rep.Corrupt)
				assert.Equal(t, 1, rep.Held)
				assert.Contains(t, e.logs.String(), tc.logs)
				assert.Equal(t, "v", string(e.get(t, timerKey)), "kept")
				assert.Equal(t, []byte(tc.ref), []byte(e.get(t, refKey)))
			})
		})
	}
}

// Two timer rows of one (kind, reference): the one its reference entry
// does not name is an orphan, reported corrupt; the other fires.
func TestAnOrphanTimerRowIsReportedCorrupt(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond), Value: store.Value("named")})
		orphan, err := timers.TimerKey(now.Add(-2*time.Millisecond), kindA, "r")
		require.NoError(t, err)
		e.put(t, orphan, store.Value("orphan"))
		h := &handler{kind: kindA, fire: done}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 1, rep.Fired)
		assert.Equal(t, 1, rep.Corrupt)
		require.Len(t, h.calls, 1)
		assert.Equal(t, "named", string(h.calls[0].Value))
		assert.Equal(t, "orphan", string(e.get(t, orphan)), "kept")
	})
}
