package relay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// relayTimerValue reads the relay timer's value (nil when there is none).
func (e *env) relayTimerValue(t testing.TB) store.Value {
	t.Helper()
	due, ok := e.timerDue(t)
	if !ok {
		return nil
	}
	k, err := timers.TimerKey(due, timers.KindRelay, "")
	require.NoError(t, err)
	v, _, err := e.inner.Get(e.ctx, source, k)
	require.NoError(t, err)
	return v
}

// TestQuarantineRowEndsTheHoldAndRestoreRowHoldsAgain: a corrupt row holds
// its source; moved aside with QuarantineRow, the relay timer is due at
// once with no hold and the rows behind it are delivered exactly once;
// put back with RestoreRow, the row holds the source again.
func TestQuarantineRowEndsTheHoldAndRestoreRowHoldsAgain(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, repeat(5, put(ta, "k", "v"))...)
		e.putSource(t, relayKey(3), store.Value("garbage"))
		e.step(t)
		e.step(t)
		require.Equal(t, []uint64{3, 4, 5}, e.queued(t), "held by row 3")
		require.NotEmpty(t, e.relayTimerValue(t), "the hold is in the timer's value")

		now := e.now().Add(time.Hour)
		e.clock.Set(now)
		b := store.NewBatch()
		q, m, err := relay.QuarantineRow(e.ctx, store.ReaderOf(e.inner, source), b, e.inner.Capabilities(), relayKey(3), quarantine.Note{At: now, Reason: "garbage"})
		require.NoError(t, err)
		assert.Equal(t, store.Value("garbage"), q.Value)
		assert.False(t, m.From.IsZero())
		assert.True(t, m.To.Equal(now))
		out, err := e.inner.Apply(e.ctx, source, b)
		require.NoError(t, err)
		require.True(t, out.Committed())
		due, _ := e.timerDue(t)
		assert.True(t, due.Equal(now), "the relay timer is due now: %v", due)
		assert.Empty(t, e.relayTimerValue(t), "with no hold")

		e.drain(t, 5)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, 1, 2, 4, 5)

		r := store.ReaderOf(e.inner, source)
		got, err := quarantine.Read(e.ctx, r, relayKey(3))
		require.NoError(t, err)
		b = store.NewBatch()
		m, err = relay.RestoreRow(e.ctx, r, b, e.inner.Capabilities(), got, e.now())
		require.NoError(t, err)
		assert.True(t, m.From.IsZero(), "the drained source had no timer: it is created")
		out, err = e.inner.Apply(e.ctx, source, b)
		require.NoError(t, err)
		require.True(t, out.Committed())
		assert.Equal(t, []uint64{3}, e.queued(t))
		e.step(t)
		assert.Equal(t, []uint64{3}, e.queued(t), "the restored row holds the source again")
		assert.NotEmpty(t, e.relayTimerValue(t))
	})
}

// TestQuarantineRowRefusals: a key that is no relay row's, a missing row
// and a row quarantined already are refused, adding nothing.
func TestQuarantineRowRefusals(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "v"))
		r := store.ReaderOf(e.inner, source)
		caps := e.inner.Capabilities()
		check := func(key store.Key, want error) {
			t.Helper()
			b := store.NewBatch()
			_, _, err := relay.QuarantineRow(e.ctx, r, b, caps, key, quarantine.Note{At: e.now()})
			require.ErrorIs(t, err, want)
			assert.Empty(t, b.Writes)
			assert.Empty(t, b.Preconditions)
		}
		check(relay.ScanKey(), store.ErrInvalid)
		check(relayKey(9), quarantine.ErrNoRow)
		b := store.NewBatch()
		_, _, err := relay.QuarantineRow(e.ctx, r, b, caps, relayKey(1), quarantine.Note{At: e.now()})
		require.NoError(t, err)
		out, err := e.inner.Apply(e.ctx, source, b)
		require.NoError(t, err)
		require.True(t, out.Committed())
		e.putSource(t, relayKey(1), encodeRow(t, ta, "k", "again"))
		check(relayKey(1), quarantine.ErrQuarantined)
		_, err = relay.RestoreRow(e.ctx, r, store.NewBatch(), caps, quarantine.Entry{Key: relay.ScanKey()}, e.now())
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}

// TestUnblockRemovesOneTargetAndRetriesItNow: the target leaves the
// blocked targets, the others stay, the relay timer moves to now with its
// value; a target not blocked is refused with the blocked ones; a scan
// state changed meanwhile fails the batch.
func TestUnblockRemovesOneTargetAndRetriesItNow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		r := store.ReaderOf(e.inner, source)
		caps := e.inner.Capabilities()
		b := store.NewBatch()
		u, err := relay.Unblock(e.ctx, r, b, caps, ids(ta)[0], e.now())
		require.ErrorIs(t, err, relay.ErrNotBlocked, "no scan state")
		assert.Empty(t, u.Blocked)

		blocked := ids(ta, tb)
		if string(blocked[0]) > string(blocked[1]) {
			blocked[0], blocked[1] = blocked[1], blocked[0]
		}
		scan, err := gen.EncodeRelayScanV1(gen.RelayScanV1{CycleEnd: 9, Cursor: 4, Blocked: blocked})
		require.NoError(t, err)
		e.putSource(t, relay.ScanKey(), scan)
		hold := []byte("hold")
		ref, _, err := timers.ReadRef(e.ctx, e.inner, source, timers.KindRelay, "")
		require.NoError(t, err)
		sb := store.NewBatch()
		require.NoError(t, timers.Schedule(sb, caps, ref, timers.Timer{Kind: timers.KindRelay, DueAt: e.now().Add(time.Minute), Value: hold}))
		out, err := e.inner.Apply(e.ctx, source, sb)
		require.NoError(t, err)
		require.True(t, out.Committed())

		_, err = relay.Unblock(e.ctx, r, b, caps, ids(tc)[0], e.now())
		require.ErrorIs(t, err, relay.ErrNotBlocked)
		assert.Empty(t, b.Writes)

		u, err = relay.Unblock(e.ctx, r, b, caps, ids(ta)[0], e.now())
		require.NoError(t, err)
		assert.Equal(t, relay.Unblocked{CycleEnd: 9, Cursor: 4, Blocked: blocked, Timer: timers.Moved{From: e.now().Add(time.Minute), To: e.now()}}, u)
		out, err = e.inner.Apply(e.ctx, source, b.Clone())
		require.NoError(t, err)
		require.True(t, out.Committed())
		assert.Equal(t, gen.RelayScanV1{CycleEnd: 9, Cursor: 4, Blocked: ids(tb)}, e.scanState(t))
		due, _ := e.timerDue(t)
		assert.True(t, due.Equal(e.now()))
		assert.Equal(t, store.Value(hold), e.relayTimerValue(t), "unblock keeps the timer's value")

		out, err = e.inner.Apply(e.ctx, source, b)
		require.NoError(t, err)
		assert.False(t, out.Committed(), "an unblock applied over a changed scan state")
		e.putSource(t, relay.ScanKey(), []byte{0xEE})
		_, err = relay.Unblock(e.ctx, r, store.NewBatch(), caps, ids(tb)[0], e.now())
		require.ErrorIs(t, err, store.ErrCorrupt)
	})
}
