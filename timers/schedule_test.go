package timers_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

func TestScheduleCreatesTheTimerAndItsReferenceEntry(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		b := store.NewBatch()
		tm := timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(5 * time.Millisecond), Value: store.Value("v")}
		require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), nil, tm))
		refKey, _ := timers.RefKey(kindA, "r")
		assert.Equal(t, []store.Precondition{store.Absent(refKey)}, b.Preconditions)
		require.NotNil(t, b.Wakeup)
		assert.Equal(t, store.Wakeup{At: now.Add(5 * time.Millisecond)}, *b.Wakeup)
		e.apply(t, b)

		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(5 * time.Millisecond), kindA, "r", "v"}}, rows)
		wake, ok, err := e.inner.(store.DueIndex).NextWake(e.ctx, e.p)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, now.Add(5*time.Millisecond), wake, "the store's due index wakes the partition then")
		due, ok := e.refDue(t, kindA, "r")
		assert.True(t, ok)
		assert.Equal(t, now.Add(5*time.Millisecond), due)
	})
}

func TestScheduleMovesAnExistingTimer(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(5 * time.Millisecond), Value: store.Value("a")})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(50 * time.Millisecond), Value: store.Value("b")})
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(50 * time.Millisecond), kindA, "r", "b"}}, rows, "one timer per kind and reference")
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(50 * time.Millisecond), Value: store.Value("c")})
		rows, _ = e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(50 * time.Millisecond), kindA, "r", "c"}}, rows, "same due time: the value is replaced")
	})
}

func TestScheduleWithAStaleObservationFailsItsGuard(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(5 * time.Millisecond)})
		b := store.NewBatch()
		require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), nil, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(9 * time.Millisecond)}))
		out, err := e.inner.Apply(e.ctx, e.p, b)
		require.NoError(t, err)
		assert.Equal(t, store.PreconditionFailed, out.Outcome)
		rows, _ := e.timersIn(t)
		assert.Equal(t, []stored{{now.Add(5 * time.Millisecond), kindA, "r", ""}}, rows)
	})
}

func TestScheduleRejectsBadTimersAddingNothing(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	caps := e.inner.Capabilities()
	cases := []struct {
		name     string
		observed store.Value
		tm       timers.Timer
		err      error
	}{
		{"value over the store's limit", nil,
			timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: make(store.Value, caps.MaxValueBytes+1)}, store.ErrInvalid},
		{"due time 0", nil, timers.Timer{Kind: kindA, Reference: "r"}, store.ErrInvalid},
		{"reference too long", nil,
			timers.Timer{Kind: kindA, Reference: strings.Repeat("r", gen.MaxTimerKeyReference+1), DueAt: now}, store.ErrInvalid},
		{"corrupt observation", store.Value("\x01junk"), timers.Timer{Kind: kindA, Reference: "r", DueAt: now}, store.ErrCorrupt},
		{"observation of a newer version", store.Value("\x03junk"), timers.Timer{Kind: kindA, Reference: "r", DueAt: now}, store.ErrNewerVersion},
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
		tm := timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: make(store.Value, caps.MaxValueBytes)}
		require.NoError(t, timers.Schedule(b, caps, nil, tm))
		e.apply(t, b)
	})
}

func TestCancelDeletesTheTimerGuarded(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(5 * time.Millisecond)})
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

// An entry that does not decode is corrupt: empty, version 0, or bytes
// that are no entry of their version; one of a version above TimerRefV2
// was written by a newer binary, which is not corrupt.
func TestReadRefReportsCorruptEntries(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	refKey, err := timers.RefKey(kindA, "r")
	require.NoError(t, err)
	for _, v := range []string{"", "\x00", "\x01junk", "\x02junk"} {
		e.put(t, refKey, store.Value(v))
		_, _, err = timers.ReadRef(context.Background(), e.inner, e.p, kindA, "r")
		require.ErrorIs(t, err, store.ErrCorrupt, "%q", v)
		require.NotErrorIs(t, err, store.ErrNewerVersion, "%q", v)
	}
	e.put(t, refKey, store.Value("\x03junk"))
	_, _, err = timers.ReadRef(context.Background(), e.inner, e.p, kindA, "r")
	require.ErrorIs(t, err, store.ErrNewerVersion)
	require.NotErrorIs(t, err, store.ErrCorrupt)
}

func TestRegistry(t *testing.T) {
	var reg timers.Registry // the zero value is empty and ready
	_, ok := reg.Lookup(kindA)
	assert.False(t, ok)
	a := &handler{kind: kindA, fire: done}
	require.NoError(t, reg.Register(a, timers.KindConfig{}))
	require.NoError(t, reg.Register(&libraryHandler{handler{kind: timers.KindRelay, fire: done}}, timers.KindConfig{}))

	err := reg.Register(&handler{kind: kindA, fire: done}, timers.KindConfig{})
	require.ErrorIs(t, err, timers.ErrDuplicateKind)
	h, ok := reg.Lookup(kindA)
	require.True(t, ok)
	assert.Same(t, a, h, "a rejected registration leaves the first handler")
	require.ErrorIs(t, reg.Register(nil, timers.KindConfig{}), store.ErrInvalid)
	assert.Equal(t, []timers.Kind{timers.KindRelay, kindA}, reg.Kinds())

	_, err = timers.NewRegistry(a, &handler{kind: kindA, fire: done})
	require.ErrorIs(t, err, timers.ErrDuplicateKind)
}

// libraryHandler is a handler marked as the library's own, as
// relay.Handler is.
type libraryHandler struct{ handler }

func (*libraryHandler) ReservedKind() bool { return true }

// userClaimingReserved implements LibraryHandler but does not claim a
// reserved kind.
type userClaimingReserved struct{ handler }

func (*userClaimingReserved) ReservedKind() bool { return false }

// TestRegistryKindRanges: kind 0 is rejected, the reserved range
// (1..MaxLibraryKind) takes only the library's own handlers, and the users'
// range (MinUserKind..65535) takes any handler. A rejection names the kind
// and the users' range and leaves the registry unchanged.
func TestRegistryKindRanges(t *testing.T) {
	for _, c := range []struct {
		name string
		h    timers.Handler
		ok   bool
	}{
		{"kind 0", &handler{kind: 0, fire: done}, false},
		{"kind 0, library handler", &libraryHandler{handler{kind: 0, fire: done}}, false},
		{"lowest reserved", &handler{kind: 1, fire: done}, false},
		{"the relay's kind", &handler{kind: timers.KindRelay, fire: done}, false},
		{"the outcome kind", &handler{kind: timers.KindOutcomeDelivery, fire: done}, false},
		{"highest reserved", &handler{kind: timers.MaxLibraryKind, fire: done}, false},
		{"reserved, marker says no", &userClaimingReserved{handler{kind: timers.KindRelay, fire: done}}, false},
		{"reserved, library handler", &libraryHandler{handler{kind: timers.KindOutcomeDelivery, fire: done}}, true},
		{"highest reserved, library handler", &libraryHandler{handler{kind: timers.MaxLibraryKind, fire: done}}, true},
		{"lowest user", &handler{kind: timers.MinUserKind, fire: done}, true},
		{"a user kind", &handler{kind: 4242, fire: done}, true},
		{"highest user", &handler{kind: math.MaxUint16, fire: done}, true},
		{"user kind, library handler", &libraryHandler{handler{kind: timers.MinUserKind, fire: done}}, true},
		{"the relay's own handler", new(relay.Handler), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var reg timers.Registry
			err := reg.Register(c.h, timers.KindConfig{})
			if c.ok {
				require.NoError(t, err)
				assert.Equal(t, []timers.Kind{c.h.Kind()}, reg.Kinds())
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			msg := err.Error()
			assert.Contains(t, msg, fmt.Sprintf("kind %d ", c.h.Kind()))
			assert.Contains(t, msg, "kinds are 256 to 65535")
			assert.Empty(t, reg.Kinds())
			_, err = timers.NewRegistry(&handler{kind: kindA, fire: done}, c.h)
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
	assert.Equal(t, timers.MaxLibraryKind+1, timers.MinUserKind)
}

// TestScheduleRejectsKindZero: a timer of kind 0 adds nothing to the
// batch; either range's kinds schedule.
func TestScheduleRejectsKindZero(t *testing.T) {
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	require.NoError(t, err)
	defer l.Close()
	b := store.NewBatch()
	err = timers.Schedule(b, l.Capabilities(), nil, timers.Timer{Kind: 0, Reference: "r", DueAt: now})
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.Contains(t, err.Error(), "kind 0 ")
	assert.Zero(t, b.Ops())
	assert.Nil(t, b.Wakeup)
	for _, k := range []timers.Kind{timers.KindRelay, timers.MaxLibraryKind, timers.MinUserKind, math.MaxUint16} {
		require.NoError(t, timers.Schedule(store.NewBatch(), l.Capabilities(), nil, timers.Timer{Kind: k, Reference: "r", DueAt: now}), "kind %d", k)
	}
}

func TestKindNames(t *testing.T) {
	assert.Equal(t, timers.Kind(7), timers.KindRelay)
	assert.Equal(t, timers.Kind(8), timers.KindOutcomeDelivery)
	assert.Equal(t, "relay", timers.KindRelay.String())
	assert.Equal(t, "outcome-delivery", timers.KindOutcomeDelivery.String())
	assert.Equal(t, "kind(42)", timers.Kind(42).String())
}
