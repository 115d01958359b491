package outbox_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var repairNote = quarantine.Note{At: now.Add(time.Hour), Who: "oncall", Reason: "sink rejects it"}

// pendingKeys lists the pending outcome rows' keys, in sequence order.
func (e *env) pendingKeys(t *testing.T) []store.Key {
	t.Helper()
	var keys []store.Key
	for _, kv := range e.scan(t, gen.TagOutcomePendingKey) {
		keys = append(keys, kv.Key)
	}
	return keys
}

func (e *env) quarantinePending(t *testing.T, key store.Key) (quarantine.Entry, outbox.BacklogChange) {
	t.Helper()
	b := store.NewBatch()
	q, ch, err := outbox.QuarantinePending(e.ctx, store.ReaderOf(e.inner, e.p), b, key, repairNote)
	require.NoError(t, err)
	e.mustApply(t, b)
	return q, ch
}

func (e *env) restorePending(t *testing.T, key store.Key, at time.Time) outbox.BacklogChange {
	t.Helper()
	r := store.ReaderOf(e.inner, e.p)
	q, err := quarantine.Read(e.ctx, r, key)
	require.NoError(t, err)
	b := store.NewBatch()
	ch, err := outbox.RestorePending(e.ctx, r, b, e.caps, q, at)
	require.NoError(t, err)
	e.mustApply(t, b)
	return ch
}

// TestQuarantinePendingKeepsTheBacklogExact: each quarantined pending row
// takes one row and its record's bytes out of the backlog, as an
// acknowledgment would; the last one takes the backlog and the delivery
// timer with it; restoring puts back exactly the rows, the bytes and,
// when the backlog was empty, a delivery timer due at the restore's time
// with a new timer's value.
func TestQuarantinePendingKeepsTheBacklogExact(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		rows := e.seedOutcomes(t, refdomain.MustReservationID("a"), refdomain.MustReservationID("b"))
		size := uint64(len(rows[0].value))
		full, _ := e.backlog(t)
		require.Equal(t, gen.Backlog{Rows: 2, Bytes: 2 * size}, full)
		timerBefore := e.timerRows(t, timers.KindOutcomeDelivery)
		keys := e.pendingKeys(t)
		require.Len(t, keys, 2)

		q, ch := e.quarantinePending(t, keys[0])
		assert.Equal(t, [2]uint64{1, size}, [2]uint64{q.BacklogRows, q.BacklogBytes}, "what the entry records")
		assert.Equal(t, outbox.BacklogChange{Before: full, After: gen.Backlog{Rows: 1, Bytes: size}}, ch)
		bl, _ := e.backlog(t)
		assert.Equal(t, gen.Backlog{Rows: 1, Bytes: size}, bl)
		assert.Equal(t, timerBefore, e.timerRows(t, timers.KindOutcomeDelivery), "the timer stays while rows remain")

		_, ch = e.quarantinePending(t, keys[1])
		assert.True(t, ch.TimerDeleted)
		assert.Equal(t, gen.Backlog{}, ch.After)
		_, ok := e.backlog(t)
		assert.False(t, ok, "the backlog goes with its last row")
		assert.Empty(t, e.timerRows(t, timers.KindOutcomeDelivery), "and the delivery timer with it")
		assert.Empty(t, e.pendingKeys(t))

		at := now.Add(2 * time.Hour)
		ch = e.restorePending(t, keys[1], at)
		require.NotNil(t, ch.Timer)
		assert.True(t, ch.Timer.From.IsZero(), "created")
		fresh, err := outbox.EncodeDeliveryTimer(outbox.DeliveryTimer{})
		require.NoError(t, err)
		assert.Equal(t, map[time.Time]string{at: string(fresh)}, e.timerRows(t, timers.KindOutcomeDelivery))
		ch = e.restorePending(t, keys[0], at.Add(time.Minute))
		assert.Nil(t, ch.Timer, "the timer exists while the backlog has rows: a restore leaves it")
		bl, _ = e.backlog(t)
		assert.Equal(t, full, bl)
		assert.Equal(t, keys, e.pendingKeys(t))
		assert.Len(t, e.timerRows(t, timers.KindOutcomeDelivery), 1)
	})
}

// TestQuarantinePendingIsGuardedOnTheBacklog: an outcome appended between
// the read and the batch fails the quarantine whole.
func TestQuarantinePendingIsGuardedOnTheBacklog(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.seedOutcomes(t, refdomain.MustReservationID("a"))
		b := store.NewBatch()
		_, _, err := outbox.QuarantinePending(e.ctx, store.ReaderOf(e.inner, e.p), b, e.pendingKeys(t)[0], repairNote)
		require.NoError(t, err)
		e.seedOutcomes(t, refdomain.MustReservationID("b"))
		before := e.scanRange(t, []byte{0x00}, []byte{0xFF})
		assert.False(t, e.apply(t, b).Committed(), "the quarantine applied over a changed backlog")
		assert.Equal(t, before, e.scanRange(t, []byte{0x00}, []byte{0xFF}))
	})
}

// TestQuarantinePendingRefusals: a key of another class, a missing row, a
// row quarantined already and a corrupt backlog are refused, adding
// nothing.
func TestQuarantinePendingRefusals(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.seedOutcomes(t, refdomain.MustReservationID("a"))
		r := store.ReaderOf(e.inner, e.p)
		key := e.pendingKeys(t)[0]
		check := func(key store.Key, want error) {
			t.Helper()
			b := store.NewBatch()
			_, _, err := outbox.QuarantinePending(e.ctx, r, b, key, repairNote)
			require.ErrorIs(t, err, want)
			assert.Empty(t, b.Writes)
			assert.Empty(t, b.Preconditions)
		}
		check(outbox.RelayKey(1), store.ErrInvalid)
		check(outbox.BacklogKey(), store.ErrInvalid)
		missing, err := gen.AppendOutcomePendingKey(nil, 99, gen.MustOutcomeID("nope"))
		require.NoError(t, err)
		check(missing, quarantine.ErrNoRow)

		backlog := e.get(t, outbox.BacklogKey())
		e.mustApply(t, store.NewBatch().Put(outbox.BacklogKey(), []byte{0xEE}))
		check(key, store.ErrCorrupt)
		e.mustApply(t, store.NewBatch().Put(outbox.BacklogKey(), backlog))

		e.quarantinePending(t, key)
		e.mustApply(t, store.NewBatch().Put(key, []byte{}))
		check(key, quarantine.ErrQuarantined)

		_, err = outbox.RestorePending(e.ctx, r, store.NewBatch(), e.caps, quarantine.Entry{Key: outbox.RelayKey(1)}, now)
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}

// TestDeliveryTimerRoundTrip: the delivery timer's value encodes and
// decodes; the empty value is the zero timer; a cursor over the bound is
// refused, a value that does not decode is corrupt.
func TestDeliveryTimerRoundTrip(t *testing.T) {
	want := outbox.DeliveryTimer{Attempt: 3, Cursor: store.Cursor("cursor")}
	v, err := outbox.EncodeDeliveryTimer(want)
	require.NoError(t, err)
	got, err := outbox.DecodeDeliveryTimer(v)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = outbox.DecodeDeliveryTimer(nil)
	require.NoError(t, err)
	assert.Equal(t, outbox.DeliveryTimer{}, got)
	_, err = outbox.EncodeDeliveryTimer(outbox.DeliveryTimer{Cursor: bytes.Repeat([]byte{1}, outbox.MaxDeliveryCursorBytes+1)})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = outbox.DecodeDeliveryTimer(store.Value{0xEE})
	require.ErrorIs(t, err, store.ErrCorrupt)
}
