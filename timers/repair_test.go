package timers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

var repairT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const kindShip timers.Kind = 1000

func (e *env) reader() store.Reader { return store.ReaderOf(e.inner, e.p) }

func (e *env) checkDueIndex(t *testing.T) {
	t.Helper()
	require.NoError(t, timerstest.CheckDueIndex(e.ctx, e.inner, []store.Partition{e.p}))
}

func keysOf(t *testing.T, due time.Time, kind timers.Kind, ref string) (row, refKey store.Key) {
	t.Helper()
	row, err := timers.TimerKey(due, kind, ref)
	require.NoError(t, err)
	refKey, err = timers.RefKey(kind, ref)
	require.NoError(t, err)
	return row, refKey
}

// TestQuarantineMovesATimerWithItsReferenceEntry: named by its row or by
// its reference entry, a timer moves aside whole, the due index invariant
// holding; Restore puts both back and lowers the wake time to its due
// time.
func TestQuarantineMovesATimerWithItsReferenceEntry(t *testing.T) {
	forEachEngine(t, repairT0, func(t *testing.T, e *env) {
		due := repairT0.Add(time.Minute)
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "ship/1", DueAt: due, Value: []byte("box")})
		row, ref := keysOf(t, due, kindShip, "ship/1")
		for _, named := range []store.Key{row, ref} {
			b := store.NewBatch()
			q, err := timers.Quarantine(e.ctx, e.reader(), b, named, quarantine.Note{At: repairT0, Reason: "poison"})
			require.NoError(t, err)
			assert.Equal(t, row, q.Entry.Key, "the row's key is the quarantine key")
			assert.Equal(t, store.Value("box"), q.Entry.Value)
			assert.Equal(t, ref, q.Entry.Companion)
			assert.Nil(t, q.KeptRef)
			e.apply(t, b)
			rows, _ := e.timersIn(t)
			assert.Empty(t, rows)
			_, ok := e.refDue(t, kindShip, "ship/1")
			assert.False(t, ok)
			e.checkDueIndex(t)

			r := e.reader()
			got, err := quarantine.Read(e.ctx, r, row)
			require.NoError(t, err)
			b = store.NewBatch()
			wake, err := timers.Restore(e.ctx, r, b, got)
			require.NoError(t, err)
			assert.True(t, wake.Equal(due), "wakes at %v", wake)
			e.apply(t, b)
			rows, _ = e.timersIn(t)
			assert.Equal(t, []stored{{DueAt: due.Local(), Kind: kindShip, Reference: "ship/1", Value: "box"}}, rows)
			refDue, ok := e.refDue(t, kindShip, "ship/1")
			assert.True(t, ok && refDue.Equal(due))
			e.checkDueIndex(t)
		}
	})
}

// TestQuarantineLeavesAReferenceEntryThatNamesAnotherRow: an orphan row
// moves alone; the entry of its (kind, reference), which names another
// row, stays, guarded as read.
func TestQuarantineLeavesAReferenceEntryThatNamesAnotherRow(t *testing.T) {
	forEachEngine(t, repairT0, func(t *testing.T, e *env) {
		due := repairT0.Add(time.Minute)
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "ship/1", DueAt: due})
		orphan, ref := keysOf(t, due.Add(time.Hour), kindShip, "ship/1")
		e.put(t, orphan, []byte("orphan"))
		b := store.NewBatch()
		q, err := timers.Quarantine(e.ctx, e.reader(), b, orphan, quarantine.Note{At: repairT0})
		require.NoError(t, err)
		assert.Equal(t, orphan, q.Entry.Key)
		assert.Nil(t, q.Entry.Companion)
		assert.Equal(t, ref, q.KeptRef)
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "ship/1", DueAt: due.Add(time.Second)})
		out, err := e.inner.Apply(e.ctx, e.p, b)
		require.NoError(t, err)
		assert.False(t, out.Committed(), "the entry it left changed: the batch must fail")
	})
}

// TestQuarantineRefusals: the library's queue timers, keys of other
// classes, missing rows and rows quarantined already are refused, adding
// nothing.
func TestQuarantineRefusals(t *testing.T) {
	forEachEngine(t, repairT0, func(t *testing.T, e *env) {
		due := repairT0.Add(time.Minute)
		e.schedule(t, timers.Timer{Kind: timers.KindRelay, DueAt: due})
		e.schedule(t, timers.Timer{Kind: timers.KindOutcomeDelivery, DueAt: due})
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "ship/1", DueAt: due})
		relayRow, relayRef := keysOf(t, due, timers.KindRelay, "")
		deliveryRow, deliveryRef := keysOf(t, due, timers.KindOutcomeDelivery, "")
		shipRow, _ := keysOf(t, due, kindShip, "ship/1")
		missing, _ := keysOf(t, due, kindShip, "nope")
		check := func(key store.Key, want error) {
			t.Helper()
			b := store.NewBatch()
			_, err := timers.Quarantine(e.ctx, e.reader(), b, key, quarantine.Note{At: repairT0})
			require.ErrorIs(t, err, want)
			assert.Empty(t, b.Writes)
			assert.Empty(t, b.Preconditions)
		}
		for _, k := range []store.Key{relayRow, relayRef, deliveryRow, deliveryRef} {
			check(k, store.ErrInvalid)
		}
		check(timers.LeaseKey(), store.ErrInvalid)
		check(missing, quarantine.ErrNoRow)
		b := store.NewBatch()
		_, err := timers.Quarantine(e.ctx, e.reader(), b, shipRow, quarantine.Note{At: repairT0})
		require.NoError(t, err)
		e.apply(t, b)
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "ship/1", DueAt: due})
		check(shipRow, quarantine.ErrQuarantined)
	})
}

// TestRearmMovesOrCreatesATimerKeepingItsValue: an existing timer moves
// to the time with its value and no failed attempts, guarded on its row;
// an absent one is created with the value given.
func TestRearmMovesOrCreatesATimerKeepingItsValue(t *testing.T) {
	forEachEngine(t, repairT0, func(t *testing.T, e *env) {
		at := repairT0.Add(time.Second)
		b := store.NewBatch()
		m, err := timers.Rearm(e.ctx, e.reader(), b, e.inner.Capabilities(), timers.Timer{Kind: kindShip, Reference: "r", DueAt: at, Value: []byte("new")})
		require.NoError(t, err)
		assert.True(t, m.From.IsZero())
		assert.True(t, m.To.Equal(at))
		e.apply(t, b)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{DueAt: at.Local(), Kind: kindShip, Reference: "r", Value: "new"}}, rows)

		later := at.Add(time.Hour)
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "r", DueAt: later, Value: []byte("kept")})
		b = store.NewBatch()
		m, err = timers.Rearm(e.ctx, e.reader(), b, e.inner.Capabilities(), timers.Timer{Kind: kindShip, Reference: "r", DueAt: at, Value: []byte("ignored")})
		require.NoError(t, err)
		assert.True(t, m.From.Equal(later) && m.To.Equal(at), "moved %v", m)
		row, _ := keysOf(t, later, kindShip, "r")
		e.put(t, row, []byte("changed"))
		out, err := e.inner.Apply(e.ctx, e.p, b.Clone())
		require.NoError(t, err)
		assert.False(t, out.Committed(), "a re-arm that keeps the value is guarded on the row")
		e.put(t, row, []byte("kept"))
		e.apply(t, b)
		rows, _ = e.timersIn(t)
		assert.Equal(t, []stored{{DueAt: at.Local(), Kind: kindShip, Reference: "r", Value: "kept"}}, rows)
		e.checkDueIndex(t)
	})
}

// TestRedriveTimerMovesAWaitingTimerToNow: a waiting timer moves to the
// time with its value; a due one is left as it is; a missing timer and a
// reference entry whose row is missing are refused, adding nothing.
func TestRedriveTimerMovesAWaitingTimerToNow(t *testing.T) {
	forEachEngine(t, repairT0, func(t *testing.T, e *env) {
		caps := e.inner.Capabilities()
		later := repairT0.Add(time.Hour)
		e.schedule(t, timers.Timer{Kind: kindShip, Reference: "r", DueAt: later, Value: []byte("v")})
		b := store.NewBatch()
		m, err := timers.RedriveTimer(e.ctx, e.reader(), b, caps, kindShip, "r", repairT0)
		require.NoError(t, err)
		assert.True(t, m.From.Equal(later) && m.To.Equal(repairT0), "moved %v", m)
		e.apply(t, b)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{DueAt: repairT0.Local(), Kind: kindShip, Reference: "r", Value: "v"}}, rows)
		e.checkDueIndex(t)

		b = store.NewBatch()
		m, err = timers.RedriveTimer(e.ctx, e.reader(), b, caps, kindShip, "r", repairT0.Add(time.Second))
		require.NoError(t, err)
		assert.True(t, m.From.Equal(m.To), "a due timer is left as it is: %v", m)
		assert.Empty(t, b.Writes)

		_, err = timers.RedriveTimer(e.ctx, e.reader(), b, caps, kindShip, "nope", repairT0)
		require.ErrorIs(t, err, timers.ErrNoTimer)
		row, _ := keysOf(t, repairT0, kindShip, "r")
		e.apply(t, store.NewBatch().Delete(row))
		_, err = timers.RedriveTimer(e.ctx, e.reader(), b, caps, kindShip, "r", repairT0.Add(-time.Minute))
		require.ErrorIs(t, err, store.ErrCorrupt)
		assert.Empty(t, b.Writes)
		assert.Empty(t, b.Preconditions)
	})
}
