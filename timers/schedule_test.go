package timers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

func TestScheduleCreatesTheTimerAndItsReferenceEntry(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		b := store.NewBatch()
		tm := timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 5, Value: store.Value("v")}
		require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), nil, tm))
		refKey, _ := timers.RefKey(kindA, "r")
		assert.Equal(t, []store.Precondition{store.Absent(refKey)}, b.Preconditions)
		require.NotNil(t, b.Wakeup)
		assert.Equal(t, store.Wakeup{AtMs: now + 5}, *b.Wakeup)
		e.apply(t, b)

		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now + 5, kindA, "r", "v"}}, rows)
		wake, ok, err := e.inner.(store.DueIndex).NextWake(e.ctx, e.p)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, now+5, wake, "the store's due index wakes the partition then")
		due, ok := e.refDue(t, kindA, "r")
		assert.True(t, ok)
		assert.Equal(t, now+5, due)
	})
}

func TestScheduleMovesAnExistingTimer(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 5, Value: store.Value("a")})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 50, Value: store.Value("b")})
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now + 50, kindA, "r", "b"}}, rows, "one timer per kind and reference")
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 50, Value: store.Value("c")})
		rows, _ = e.timersIn(t)
		assert.Equal(t, []stored{{now + 50, kindA, "r", "c"}}, rows, "same due time: the value is replaced")
	})
}

func TestScheduleWithAStaleObservationFailsItsGuard(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 5})
		b := store.NewBatch()
		require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), nil, timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 9}))
		out, err := e.inner.Apply(e.ctx, e.p, b)
		require.NoError(t, err)
		assert.Equal(t, store.PreconditionFailed, out.Outcome)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now + 5, kindA, "r", ""}}, rows)
	})
}

func TestScheduleRejectsBadTimersAddingNothing(t *testing.T) {
	e := newEnv(t, fdblayer.NewMemoryEngine(), now)
	caps := e.inner.Capabilities()
	cases := []struct {
		name     string
		observed store.Value
		tm       timers.Timer
		err      error
	}{
		{"value over the store's limit", nil,
			timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now, Value: make(store.Value, caps.MaxValueBytes+1)}, store.ErrInvalid},
		{"due time 0", nil, timers.Timer{Kind: kindA, Reference: "r"}, store.ErrInvalid},
		{"reference too long", nil,
			timers.Timer{Kind: kindA, Reference: strings.Repeat("r", gen.MaxTimerKeyReference+1), DueAtMs: now}, store.ErrInvalid},
		{"corrupt observation", store.Value("junk"), timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now}, store.ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := store.NewBatch().Put(store.Key("mine"), store.Value("x"))
			err := timers.Schedule(b, caps, tc.observed, tc.tm)
			require.ErrorIs(t, err, tc.err)
			assert.Len(t, b.Writes, 1)
			assert.Empty(t, b.Preconditions)
			assert.Nil(t, b.Wakeup)
		})
	}
	t.Run("value at the store's limit", func(t *testing.T) {
		b := store.NewBatch()
		tm := timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now, Value: make(store.Value, caps.MaxValueBytes)}
		require.NoError(t, timers.Schedule(b, caps, nil, tm))
		e.apply(t, b)
	})
}

func TestCancelDeletesTheTimerGuarded(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAtMs: now + 5})
		observed, _, err := timers.ReadRef(e.ctx, e.inner, e.p, kindA, "r")
		require.NoError(t, err)

		stale := store.NewBatch()
		require.NoError(t, timers.Cancel(stale, nil, kindA, "r"))
		out, err := e.inner.Apply(e.ctx, e.p, stale)
		require.NoError(t, err)
		assert.Equal(t, store.PreconditionFailed, out.Outcome, "it observed no timer, but there is one")

		b := store.NewBatch()
		require.NoError(t, timers.Cancel(b, observed, kindA, "r"))
		e.apply(t, b)
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows)
		_, ok := e.refDue(t, kindA, "r")
		assert.False(t, ok)
	})
}

func TestReadRefReportsCorruptEntries(t *testing.T) {
	e := newEnv(t, fdblayer.NewMemoryEngine(), now)
	refKey, err := timers.RefKey(kindA, "r")
	require.NoError(t, err)
	e.put(t, refKey, store.Value("junk"))
	_, _, err = timers.ReadRef(context.Background(), e.inner, e.p, kindA, "r")
	require.ErrorIs(t, err, store.ErrCorrupt)
}

func TestRegistry(t *testing.T) {
	var reg timers.Registry // the zero value is empty and ready
	_, ok := reg.Lookup(kindA)
	assert.False(t, ok)
	a := &handler{kind: kindA, fire: done}
	require.NoError(t, reg.Register(a))
	require.NoError(t, reg.Register(&handler{kind: timers.KindRelay, fire: done}))

	err := reg.Register(&handler{kind: kindA, fire: done})
	require.ErrorIs(t, err, timers.ErrDuplicateKind)
	h, ok := reg.Lookup(kindA)
	require.True(t, ok)
	assert.Same(t, a, h, "a rejected registration leaves the first handler")
	require.ErrorIs(t, reg.Register(nil), store.ErrInvalid)
	assert.Equal(t, []timers.Kind{timers.KindRelay, kindA}, reg.Kinds())

	_, err = timers.NewRegistry(a, &handler{kind: kindA, fire: done})
	require.ErrorIs(t, err, timers.ErrDuplicateKind)
}

func TestKindNames(t *testing.T) {
	assert.Equal(t, timers.Kind(7), timers.KindRelay)
	assert.Equal(t, timers.Kind(8), timers.KindOutcomeDelivery)
	assert.Equal(t, "relay", timers.KindRelay.String())
	assert.Equal(t, "outcome-delivery", timers.KindOutcomeDelivery.String())
	assert.Equal(t, "kind(42)", timers.Kind(42).String())
}
