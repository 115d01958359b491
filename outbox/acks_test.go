package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// pending is one undelivered outcome, as the delivery handler finds it.
type pending struct {
	rid   refdomain.ReservationID
	seq   uint64
	value store.Value
}

// seedOutcomes appends terminal outcomes for rids and returns them.
func (e *env) seedOutcomes(t *testing.T, rids ...refdomain.ReservationID) []pending {
	t.Helper()
	e.seedTicketed(t, rids...)
	ob := e.builder(t)
	out := make([]pending, len(rids))
	for i, rid := range rids {
		seq, err := appendReservation(ob, rid, ticket, committed(refdomain.MustRepoName("repo")))
		require.NoError(t, err)
		out[i] = pending{rid, seq, mustEncode(committed(refdomain.MustRepoName("repo")))}
	}
	e.finish(t, ob)
	return out
}

func (e *env) acks(t *testing.T) *outbox.Acks {
	t.Helper()
	a, err := outbox.NewAcks(e.caps, e.get(t, outbox.BacklogKey()))
	require.NoError(t, err)
	return a
}

func TestAcksDeleteRowsAndShrinkTheBacklogToNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		rows := e.seedOutcomes(t, refdomain.MustReservationID("a"), refdomain.MustReservationID("b"), refdomain.MustReservationID("c"))
		size := uint64(len(rows[0].value))

		a := e.acks(t)
		require.NoError(t, ackReservation(a, rows[0].rid, rows[0].seq, rows[0].value))
		require.NoError(t, ackReservation(a, rows[1].rid, rows[1].seq, rows[1].value))
		assert.Equal(t, gen.Backlog{Rows: 1, Bytes: size}, a.Remaining())
		b := store.NewBatch()
		require.NoError(t, a.Finish(b))
		assert.Equal(t, 2*outbox.AckOps+outbox.AckFixedOps, b.Ops())
		e.mustApply(t, b)

		assert.Nil(t, e.get(t, resKey(t, refdomain.MustReservationID("a"))))
		assert.Nil(t, e.get(t, resKey(t, refdomain.MustReservationID("b"))))
		assert.NotNil(t, e.get(t, resKey(t, refdomain.MustReservationID("c"))))
		assert.Len(t, e.scan(t, gen.TagOutcomePendingKey), 1)
		bl, ok := e.backlog(t)
		require.True(t, ok)
		assert.Equal(t, gen.Backlog{Rows: 1, Bytes: size}, bl)

		a = e.acks(t)
		require.NoError(t, ackReservation(a, rows[2].rid, rows[2].seq, rows[2].value))
		assert.Equal(t, gen.Backlog{}, a.Remaining())
		b = store.NewBatch()
		require.NoError(t, a.Finish(b))
		e.mustApply(t, b)
		_, ok = e.backlog(t)
		assert.False(t, ok, "acknowledging the last row deletes the backlog")
		assert.Empty(t, e.scan(t, gen.TagOutcomePendingKey))
		start, end := refdomain.ClassRange(refdomain.TagReservationKey)
		assert.Empty(t, e.scanRange(t, start, end))
	})
}

// An acknowledgment that keeps its record guards it and deletes only the
// pending row; a changed record fails the guard all the same.
func TestAcksThatKeepTheRecordGuardItAndDeleteOnlyThePendingRow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		rows := e.seedOutcomes(t, refdomain.MustReservationID("a"), refdomain.MustReservationID("b"))
		key := resKey(t, rows[0].rid)
		a := e.acks(t)
		require.NoError(t, a.Ack(outbox.Ack{ID: gen.MustOutcomeID("a"), Seq: rows[0].seq, Key: key, Value: rows[0].value, Keep: true}))
		b := store.NewBatch()
		require.NoError(t, a.Finish(b))
		assert.Contains(t, b.Preconditions, store.Equals(key, rows[0].value))
		for _, w := range b.Writes {
			assert.NotEqual(t, key, w.Key, "the kept record is not written")
		}
		assert.Equal(t, outbox.AckOps-1+outbox.AckFixedOps, b.Ops())
		e.mustApply(t, b)
		assert.Equal(t, rows[0].value, e.get(t, key), "the record stays")
		assert.Len(t, e.scan(t, gen.TagOutcomePendingKey), 1, "its pending row went")
		bl, ok := e.backlog(t)
		require.True(t, ok)
		assert.Equal(t, uint64(1), bl.Rows)

		// A kept record changed since its delivery fails the guard.
		key = resKey(t, rows[1].rid)
		a = e.acks(t)
		require.NoError(t, a.Ack(outbox.Ack{ID: gen.MustOutcomeID("b"), Seq: rows[1].seq, Key: key, Value: rows[1].value, Keep: true}))
		b = store.NewBatch()
		require.NoError(t, a.Finish(b))
		e.mustApply(t, store.NewBatch().Put(key, mustEncode(aborted())))
		out := e.apply(t, b)
		assert.Equal(t, store.PreconditionFailed, out.Outcome)
		assert.Len(t, e.scan(t, gen.TagOutcomePendingKey), 1)
	})
}

func TestAcksWithNothingAcknowledgedStillGuardTheBacklog(t *testing.T) {
	e := newEnv(t, memengine.New())
	e.seedOutcomes(t, refdomain.MustReservationID("a"))
	fresh := e.get(t, outbox.BacklogKey())
	a := e.acks(t)
	b := store.NewBatch()
	require.NoError(t, a.Finish(b))
	assert.Equal(t, []store.Precondition{store.Equals(outbox.BacklogKey(), fresh)}, b.Preconditions)
	assert.Empty(t, b.Writes)
}

// An outcome appended after the fresh backlog read fails the shared guard:
// nothing is acknowledged, and the next plan sees both rows.
func TestAnAppendDuringAcknowledgmentFailsTheBacklogGuard(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		rows := e.seedOutcomes(t, refdomain.MustReservationID("first"))
		a := e.acks(t)
		require.NoError(t, ackReservation(a, rows[0].rid, rows[0].seq, rows[0].value))
		b := store.NewBatch()
		require.NoError(t, a.Finish(b))

		hooked := false
		e.faults.BeforeApply(func(context.Context, store.Partition, *store.Batch) error {
			if !hooked {
				hooked = true
				e.seedOutcomes(t, refdomain.MustReservationID("second"))
			}
			return nil
		})
		out := e.apply(t, b)
		e.faults.Clear()
		require.Equal(t, store.PreconditionFailed, out.Outcome)
		assert.Equal(t, outbox.BacklogKey(), out.Failed.Key)
		bl, _ := e.backlog(t)
		assert.Equal(t, uint64(2), bl.Rows)
		assert.NotNil(t, e.get(t, resKey(t, refdomain.MustReservationID("first"))), "not acknowledged")
	})
}

func TestAnAcknowledgmentLandsOnlyOnTheDeliveredValue(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		rows := e.seedOutcomes(t, refdomain.MustReservationID("a"))
		a := e.acks(t)
		require.NoError(t, ackReservation(a, rows[0].rid, rows[0].seq, rows[0].value))
		b := store.NewBatch()
		require.NoError(t, a.Finish(b))
		e.mustApply(t, store.NewBatch().Put(resKey(t, refdomain.MustReservationID("a")), mustEncode(aborted())))

		out := e.apply(t, b)
		require.Equal(t, store.PreconditionFailed, out.Outcome)
		assert.Equal(t, resKey(t, refdomain.MustReservationID("a")), out.Failed.Key)
		assert.Len(t, e.scan(t, gen.TagOutcomePendingKey), 1, "the row stays pending")
	})
}

func TestAckRejectsRowsItCannotPlan(t *testing.T) {
	e := newEnv(t, memengine.New())
	rows := e.seedOutcomes(t, refdomain.MustReservationID("a"))
	a := e.acks(t)
	key := resKey(t, refdomain.MustReservationID("a"))
	require.ErrorIs(t, a.Ack(outbox.Ack{Seq: 1, Key: key, Value: rows[0].value}), store.ErrInvalid, "invalid id")
	require.ErrorIs(t, a.Ack(outbox.Ack{ID: gen.MustOutcomeID("a"), Seq: 1, Value: rows[0].value}), store.ErrInvalid, "no key")
	require.ErrorIs(t, ackReservation(a, refdomain.MustReservationID("a"), rows[0].seq, nil), store.ErrInvalid, "absent")
	require.Zero(t, a.Len())
	require.NoError(t, ackReservation(a, refdomain.MustReservationID("a"), rows[0].seq, rows[0].value))
	require.ErrorIs(t, ackReservation(a, refdomain.MustReservationID("a"), rows[0].seq, rows[0].value), store.ErrInvalid, "twice")
	require.ErrorIs(t, ackReservation(a, refdomain.MustReservationID("b"), 9, rows[0].value), store.ErrCorrupt, "more rows than the backlog holds")
	assert.Equal(t, 1, a.Len())

	b := store.NewBatch()
	require.NoError(t, a.Finish(b))
	require.ErrorIs(t, a.Finish(b), store.ErrInvalid, "a second Finish")
	require.ErrorIs(t, ackReservation(a, refdomain.MustReservationID("c"), 9, rows[0].value), store.ErrInvalid, "an Ack after Finish")
}

func TestAcksStopAtTheBatchLimit(t *testing.T) {
	e := newEnv(t, memengine.New())
	caps := e.caps
	caps.MaxBatchOps = 20 // room for (20 - 2) / 3 = 6 rows
	huge, err := gen.EncodeBacklog(gen.Backlog{Rows: 100, Bytes: 1_000})
	require.NoError(t, err)
	a, err := outbox.NewAcks(caps, huge)
	require.NoError(t, err)
	for i := range 6 {
		require.NoError(t, ackReservation(a, refdomain.MustReservationID(string(rune('a'+i))), uint64(i+1), mustEncode(aborted())))
	}
	err = ackReservation(a, refdomain.MustReservationID("z"), 99, mustEncode(aborted()))
	require.ErrorIs(t, err, store.ErrInvalid)
	b := store.NewBatch()
	require.NoError(t, a.Finish(b))
	assert.Equal(t, 20, b.Ops())
}

func TestNewAcksRejectsACorruptBacklog(t *testing.T) {
	_, err := outbox.NewAcks(store.Capabilities{MaxBatchOps: 100}, store.Value("junk"))
	require.ErrorIs(t, err, store.ErrCorrupt)
}
