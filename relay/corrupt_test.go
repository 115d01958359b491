package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

func relayKey(seq uint64) store.Key { return store.Key(gen.AppendRelayKey(nil, seq)) }

func (e *env) putSource(t testing.TB, key store.Key, value store.Value) {
	t.Helper()
	out, err := e.inner.Apply(e.ctx, source, store.NewBatch().Put(key, value))
	require.NoError(t, err)
	require.True(t, out.Committed())
}

func (e *env) deleteSource(t testing.TB, key store.Key) {
	t.Helper()
	out, err := e.inner.Apply(e.ctx, source, store.NewBatch().Delete(key))
	require.NoError(t, err)
	require.True(t, out.Committed())
}

func encodeRow(t testing.TB, target store.Partition, key, value string) store.Value {
	return encodeRowTo(t, ids(target)[0], key, value)
}

// encodeRowTo encodes a row whose target identity is id, valid or not.
func encodeRowTo(t testing.TB, id []byte, key, value string) store.Value {
	atMs, err := store.EncodeTime(start) // the row's stored queue time
	require.NoError(t, err)
	v, err := gen.EncodeRelayV1(gen.RelayV1{Target: id, Puts: []gen.RelayPut{{Key: []byte(key), Value: []byte(value)}}, AtMs: atMs})
	require.NoError(t, err)
	return v
}

// Reference: a corrupt row (key or value; a zero sequence is corrupt)
// stops the window; the valid prefix before it is delivered and
// checkpointed; the fire retries; the row is never skipped, fire after
// fire, and delivery resumes after it once it is repaired.
func TestCorruptRowStopsTheWindowAndIsNeverSkipped(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(t testing.TB, e *env) // after rows 1..5 are queued
		repair  func(t testing.TB, e *env)
		prefix  []uint64 // delivered before the corrupt row
		queued  []uint64 // left queued (0: the malformed key)
	}{
		{
			name:    "value",
			corrupt: func(t testing.TB, e *env) { e.putSource(t, relayKey(3), store.Value{gen.VersionRelayV1, 0xde, 0xad}) },
			repair:  func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRow(t, ta, "k", "3")) },
			prefix:  []uint64{1, 2},
			queued:  []uint64{3, 4, 5},
		},
		{
			name:    "target identity not a tuple",
			corrupt: func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRowTo(t, []byte{0xff, 0x01}, "k", "3")) },
			repair:  func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRow(t, ta, "k", "3")) },
			prefix:  []uint64{1, 2},
			queued:  []uint64{3, 4, 5},
		},
		{
			name:    "truncated target identity",
			corrupt: func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRowTo(t, ids(ta)[0][:3], "k", "3")) },
			repair:  func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRow(t, ta, "k", "3")) },
			prefix:  []uint64{1, 2},
			queued:  []uint64{3, 4, 5},
		},
		{
			name:    "empty target identity",
			corrupt: func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRowTo(t, nil, "k", "3")) },
			repair:  func(t testing.TB, e *env) { e.putSource(t, relayKey(3), encodeRow(t, ta, "k", "3")) },
			prefix:  []uint64{1, 2},
			queued:  []uint64{3, 4, 5},
		},
		{
			name:    "key with trailing bytes",
			corrupt: func(t testing.TB, e *env) { e.putSource(t, append(relayKey(2), 0x00), encodeRow(t, ta, "k", "x")) },
			repair:  func(t testing.TB, e *env) { e.deleteSource(t, append(relayKey(2), 0x00)) },
			prefix:  []uint64{1, 2},
			queued:  []uint64{0, 3, 4, 5},
		},
		{
			name:    "zero sequence at the head",
			corrupt: func(t testing.TB, e *env) { e.putSource(t, relayKey(0), encodeRow(t, ta, "k", "x")) },
			repair:  func(t testing.TB, e *env) { e.deleteSource(t, relayKey(0)) },
			prefix:  nil,
			queued:  []uint64{0, 1, 2, 3, 4, 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				e.queue(t, put(ta, "k", "1"), put(ta, "k", "2"), put(ta, "k", "3"), put(ta, "k", "4"), put(ta, "k", "5"))
				tt.corrupt(t, e)

				for i, hold := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
					rep := e.step(t)
					require.Equal(t, 1, rep.Fired, "a corrupt window holds the source back")
					due, ok := e.timerDue(t)
					require.True(t, ok)
					assert.Equal(t, e.now().Add(hold), due, "fire %d", i)
					assert.Equal(t, hold, e.timerHold(t))
					e.requireAppliedOnce(t, ta, tt.prefix...)
					assert.Equal(t, uint64(len(tt.prefix)), e.highWater(t, ta), "nothing past the corrupt row")
				}
				assert.Equal(t, 3, strings.Count(e.logs.String(), "corrupt relay row; tick stopped"), "logged once per hold")
				assert.Equal(t, tt.queued, e.queued(t), "the valid prefix is checkpointed, the rest kept")

				tt.repair(t, e)
				e.drain(t, 5)
				assert.Empty(t, e.queued(t))
				e.requireAppliedOnce(t, ta, 1, 2, 3, 4, 5)
				assert.Equal(t, "5", e.get(t, ta, "k"))
			})
		})
	}
}

// A row of a newer version than this binary reads (store.ErrNewerVersion)
// stops the window as a corrupt row does, the valid prefix delivered, the
// source held with the growing hold, the row never skipped; but it is not
// corrupt: logged as newer and counted in mkitfdb_relay_newer_rows_total.
// Once readable (a binary that reads it would relay it; here it is
// rewritten in this binary's version) delivery goes on.
func TestANewerRowHoldsTheSourceAndIsCountedApart(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "1"), put(ta, "k", "2"), put(ta, "k", "3"), put(ta, "k", "4"), put(ta, "k", "5"))
		newer := append(store.Value{gen.VersionRelayV2 + 1}, encodeRow(t, ta, "k", "3")[1:]...)
		e.putSource(t, relayKey(3), newer)

		for i, hold := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			rep := e.step(t)
			require.Equal(t, 1, rep.Fired, "a newer row holds the source back")
			due, ok := e.timerDue(t)
			require.True(t, ok)
			assert.Equal(t, e.now().Add(hold), due, "fire %d", i)
			e.requireAppliedOnce(t, ta, 1, 2)
			assert.Equal(t, uint64(2), e.highWater(t, ta), "nothing past the newer row")
		}
		assert.Equal(t, 3, strings.Count(e.logs.String(), "relay row of a newer version than this binary reads"), "logged once per hold")
		assert.NotContains(t, e.logs.String(), "corrupt relay row")
		pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: source.Kind()}
		assert.Equal(t, uint64(3), e.metrics.Counter(telemetry.MetricRelayNewerRows, pk))
		assert.Equal(t, []uint64{3, 4, 5}, e.queued(t), "kept, never skipped")

		e.putSource(t, relayKey(3), encodeRow(t, ta, "k", "3"))
		e.drain(t, 5)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, 1, 2, 3, 4, 5)
	})
}

// Reference: the window starts at the cursor's own key, so a malformed key
// queued right after the cursor stops the next fire instead of being
// passed over.
func TestMalformedKeyAfterTheCursorStopsTheNextFire(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, repeat(8, put(ta, "k", "v"))...)
		e.step(t)
		require.Equal(t, uint64(4), e.scanState(t).Cursor)
		e.putSource(t, append(relayKey(4), 0x01), encodeRow(t, ta, "k", "x"))

		rep := e.step(t)
		assert.Equal(t, 1, rep.Fired)
		due, _ := e.timerDue(t)
		assert.Equal(t, e.now().Add(relay.CorruptHoldMin), due, "held back")
		assert.Equal(t, uint64(4), e.highWater(t, ta), "rows 5.. wait behind the malformed key")
		assert.Equal(t, []uint64{0, 5, 6, 7, 8}, e.queued(t))
	}, withBudget(relay.Budget{MaxRows: 1}))
}

// Reference: a scan state that does not decode is logged and the scan
// restarts from the queue's head; rows already delivered are gone and the
// rest are delivered once.
func TestCorruptScanStateRestartsFromTheHeadWithoutLoss(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, repeat(10, put(ta, "k", "v"))...)
		e.step(t)
		require.Equal(t, uint64(4), e.scanState(t).Cursor)
		scanKey := store.Key(gen.AppendRelayScanKey(nil))
		e.putSource(t, scanKey, store.Value{0xde, 0xad})

		rep := e.step(t)
		require.Equal(t, 1, rep.Fired)
		assert.Contains(t, e.logs.String(), "corrupt relay scan state; restarting from source head")
		assert.Equal(t, gen.RelayScanV1{CycleEnd: 10, Cursor: 8}, e.scanState(t), "a fresh cycle, rewritten valid")

		e.drain(t, 5)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, seqRange(1, 10)...)
	}, withBudget(relay.Budget{MaxRows: 1}))
}

// A corrupt outbox sequence is corrupt stored data the relay cannot work
// around: the fire fails with store.ErrCorrupt and the run holds the timer
// for timers.DefaultHeldBackoff, so that the relay retries after a repair.
func TestCorruptOutboxSequenceFailsTheFire(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "v"))
		due, _ := e.timerDue(t)
		e.putSource(t, store.Key(gen.AppendOutboxSequenceKey(nil)), store.Value("bad"))
		rep := e.run(t)
		assert.Equal(t, 1, rep.Corrupt)
		after, ok := e.timerDue(t)
		assert.True(t, ok)
		assert.Equal(t, e.now().Add(timers.DefaultHeldBackoff), after)
		assert.Greater(t, after, due)
		assert.Equal(t, []uint64{1}, e.queued(t))
	})
}

// timerValue reads the relay timer's value (nil: no timer).
func (e *env) timerValue(t testing.TB) store.Value {
	t.Helper()
	due, ok := e.timerDue(t)
	if !ok {
		return nil
	}
	key, err := timers.TimerKey(due, timers.KindRelay, "")
	require.NoError(t, err)
	v, ok, err := e.inner.Get(e.ctx, source, key)
	require.NoError(t, err)
	require.True(t, ok, "the timer row of its reference entry")
	return v
}

// timerHold reads the hold the relay timer's value records (0: none, an
// empty value).
func (e *env) timerHold(t testing.TB) time.Duration {
	t.Helper()
	v := e.timerValue(t)
	if len(v) == 0 {
		return 0
	}
	rt, err := gen.DecodeRelayTimerV1(v)
	require.NoError(t, err)
	return time.Duration(rt.HoldMs) * time.Millisecond
}

// A source held back by a corrupt row waits twice as long at each fire
// that still finds it, up to CorruptHoldMax, the hold in the relay timer's
// value (a timer written before holds were recorded has an empty value,
// and starts at CorruptHoldMin); the hold ends with the row: the first
// fire after the repair delivers on, its timer's value empty again, and a
// row that turns corrupt later starts over at CorruptHoldMin.
func TestCorruptRowHoldGrowsToTheCapAndResetsOnceRepaired(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, repeat(12, put(ta, "k", "v"))...)
		require.Empty(t, e.timerValue(t), "the outbox writes an empty relay timer value")
		good, _, err := e.inner.Get(e.ctx, source, relayKey(2))
		require.NoError(t, err)
		e.putSource(t, relayKey(2), store.Value("garbage"))

		var holds []time.Duration
		for range 11 {
			e.step(t)
			holds = append(holds, e.timerHold(t))
		}
		s := time.Second
		assert.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, relay.CorruptHoldMax, relay.CorruptHoldMax}, holds)
		assert.Equal(t, []uint64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, e.queued(t))

		// The repair an operator makes (see the package doc): the row
		// rewritten valid, guarded by the corrupt value, through
		// store.Transact.
		_, err = store.Transact(e.ctx, e.inner, source, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			v, _, err := r.Get(ctx, relayKey(2))
			if err != nil || string(v) != "garbage" {
				return nil, err // repaired already
			}
			return store.NewBatch().Require(store.Equals(relayKey(2), v)).Put(relayKey(2), good), nil
		}, store.TransactConfig{})
		require.NoError(t, err)
		rep := e.step(t)
		require.Equal(t, 1, rep.Fired)
		assert.Equal(t, uint64(5), e.highWater(t, ta), "delivery resumes at the repaired row")
		assert.Equal(t, time.Duration(0), e.timerHold(t), "the hold ends with the row")
		assert.Empty(t, e.timerValue(t))

		// Corrupt again: the hold starts over.
		e.putSource(t, relayKey(7), store.Value("garbage"))
		e.step(t)
		assert.Equal(t, relay.CorruptHoldMin, e.timerHold(t))
		e.deleteSource(t, relayKey(7)) // the other repair: the row deleted
		e.drain(t, 5)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12)
	}, withBudget(relay.Budget{MaxRows: 1}))
}

// A relay timer value that does not decode holds nothing the relay needs:
// it is logged, the hold starts over at CorruptHoldMin, and a valid value
// replaces it.
func TestUndecodableRelayTimerValueRestartsTheHold(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "1"), put(ta, "k", "2"))
		e.putSource(t, relayKey(2), store.Value("garbage"))
		due, _ := e.timerDue(t)
		b := store.NewBatch()
		ref, _, err := timers.ReadRef(e.ctx, e.inner, source, timers.KindRelay, "")
		require.NoError(t, err)
		require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), ref, timers.Timer{Kind: timers.KindRelay, DueAt: due, Value: store.Value{0xff}}))
		out, err := e.inner.Apply(e.ctx, source, b)
		require.NoError(t, err)
		require.True(t, out.Committed())

		e.step(t)
		assert.Contains(t, e.logs.String(), "relay timer value does not decode; the hold restarts")
		assert.Equal(t, relay.CorruptHoldMin, e.timerHold(t))
		assert.Equal(t, uint64(1), e.highWater(t, ta))
	})
}
