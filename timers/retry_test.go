package timers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// deadLetters lists every dead letter of e's partition.
func (e *env) deadLetters(t testing.TB) []timers.DeadLetter {
	t.Helper()
	dls, next, err := timers.DeadLetters(e.ctx, store.ReaderOf(e.inner, e.p), nil, 1000)
	require.NoError(t, err)
	require.Nil(t, next)
	return dls
}

// A handler failing N times fires exactly N times, at the policy's
// intervals (backoff, cap and identity-derived jitter), each attempt and
// error recorded with the timer; then it is a dead letter holding its
// attempts, last error and value, counted in the metric; re-driven, it
// fires again and succeeds.
func TestAFailingTimerFiresAtThePolicysIntervalsThenBecomesADeadLetter(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		pol := timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 3, MaxInterval: 5 * time.Second, MaxAttempts: 4, Jitter: 0.5}
		fail := true
		h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
			if fail {
				return nil, fmt.Errorf("boom #%d", tm.Attempts+1)
			}
			return timers.Done{}, nil
		}}
		reg := &timers.Registry{}
		require.NoError(t, reg.Register(h, timers.KindConfig{Retry: pol}))
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now, Value: store.Value("payload")})

		want := []time.Time{now}
		for n := 1; n < pol.MaxAttempts; n++ {
			d := pol.Delay(n, e.p, kindA, "job")
			assert.LessOrEqual(t, d, min(time.Duration(float64(time.Second)*pow(3, n-1)), 5*time.Second))
			assert.Greater(t, d, min(time.Duration(float64(time.Second)*pow(3, n-1)), 5*time.Second)/2)
			want = append(want, want[n-1].Add(d.Truncate(time.Millisecond)))
		}
		var got []time.Time
		for range 20 {
			due, ok := e.refDue(t, kindA, "job")
			if !ok {
				break
			}
			// A millisecond early: nothing fires.
			e.clock.Set(due.Add(-time.Millisecond))
			rep := e.run(t, reg, timers.RunConfig{})
			require.Zero(t, rep.Failed)
			e.clock.Set(due)
			e.run(t, reg, timers.RunConfig{})
			got = append(got, due)
		}
		assert.Equal(t, want, got, "fired exactly MaxAttempts times, at the policy's intervals")
		require.Len(t, h.calls, pol.MaxAttempts)
		for i, c := range h.calls {
			assert.Equal(t, i, c.Attempts)
			if i > 0 {
				assert.Equal(t, fmt.Sprintf("boom #%d", i), c.LastError)
			}
		}
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows, "a dead letter is no timer")
		dls := e.deadLetters(t)
		require.Len(t, dls, 1)
		dl := dls[0]
		assert.Equal(t, kindA, dl.Kind)
		assert.Equal(t, "job", dl.Reference)
		assert.Equal(t, pol.MaxAttempts, dl.Attempts)
		assert.Equal(t, "boom #4", dl.LastError)
		assert.False(t, dl.Permanent)
		assert.Equal(t, "payload", string(dl.Value))
		assert.Equal(t, want[len(want)-1], dl.DueAt)
		assert.Equal(t, e.clock.Now(), dl.At)
		assert.Equal(t, uint64(1), e.metrics.CounterSum(telemetry.MetricTimersDeadLettered))

		// Nothing fires it on its own, however late.
		e.clock.Advance(24 * time.Hour)
		rep := e.run(t, reg, timers.RunConfig{})
		assert.Zero(t, rep.Fired+rep.Failed)
		require.Len(t, h.calls, pol.MaxAttempts)

		// Re-driven: it fires again, with no failed attempts, and succeeds.
		fail = false
		b := store.NewBatch()
		require.NoError(t, timers.Redrive(b, e.inner.Capabilities(), dl, e.clock.Now()))
		e.apply(t, b)
		assert.Empty(t, e.deadLetters(t))
		rep = e.run(t, reg, timers.RunConfig{})
		assert.Equal(t, 1, rep.Fired)
		require.Len(t, h.calls, pol.MaxAttempts+1)
		assert.Zero(t, h.calls[pol.MaxAttempts].Attempts)
		assert.Equal(t, "payload", string(h.calls[pol.MaxAttempts].Value))
		rows, _ = e.timersIn(t)
		assert.Empty(t, rows)
	})
}

func pow(x float64, n int) float64 {
	r := 1.0
	for range n {
		r *= x
	}
	return r
}

// A Permanent error makes the timer a dead letter at its first failure,
// whatever attempts remain; one wrapped further is recognised too.
func TestAPermanentErrorDeadLettersAtOnce(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return nil, fmt.Errorf("order 7: %w", timers.Permanent(errors.New("no such customer")))
		}}
		reg := &timers.Registry{}
		require.NoError(t, reg.Register(h, timers.KindConfig{})) // DefaultRetryPolicy: 25 attempts
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("v")})
		rep := e.run(t, reg, timers.RunConfig{})
		assert.Equal(t, 1, rep.Failed)
		assert.Equal(t, 1, rep.DeadLettered)
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows)
		_, ok := e.refDue(t, kindA, "r")
		assert.False(t, ok)
		dls := e.deadLetters(t)
		require.Len(t, dls, 1)
		assert.True(t, dls[0].Permanent)
		assert.Equal(t, 1, dls[0].Attempts)
		assert.Equal(t, "order 7: no such customer", dls[0].LastError)
	})
}

// Retry with After waits that long and spends an attempt; Snooze waits
// and spends none; Reschedule clears the attempts.
func TestRetryAfterSpendsAnAttemptAndSnoozeDoesNot(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	var outcomes = []timers.Fired{
		timers.Retry{After: 7 * time.Second, Err: errors.New("busy")},
		timers.Snooze{For: time.Minute},
		timers.Retry{},
		timers.Reschedule{Value: store.Value("v2")},
		timers.Done{},
	}
	h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
		return outcomes[0], nil
	}}
	reg := &timers.Registry{}
	require.NoError(t, reg.Register(h, timers.KindConfig{Retry: timers.RetryPolicy{InitialInterval: time.Second, BackoffFactor: 1, MaxInterval: time.Second, MaxAttempts: 3}}))
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("v")})
	step := func() timers.Report {
		t.Helper()
		due, ok := e.refDue(t, kindA, "r")
		require.True(t, ok)
		e.clock.Set(due)
		rep := e.run(t, reg, timers.RunConfig{})
		outcomes = outcomes[1:]
		return rep
	}
	rep := step()
	assert.Equal(t, 1, rep.Retried)
	due, _ := e.refDue(t, kindA, "r")
	assert.Equal(t, now.Add(7*time.Second), due)
	rep = step()
	assert.Equal(t, 1, rep.Snoozed)
	due, _ = e.refDue(t, kindA, "r")
	assert.Equal(t, now.Add(7*time.Second+time.Minute), due)
	rep = step() // the second attempt spent of three
	assert.Equal(t, 1, rep.Retried)
	assert.Zero(t, rep.DeadLettered)
	rep = step()
	assert.Equal(t, 1, rep.Fired)
	rep = step()
	assert.Equal(t, 1, rep.Fired)
	attempts := make([]int, len(h.calls))
	for i, c := range h.calls {
		attempts[i] = c.Attempts
	}
	assert.Equal(t, []int{0, 1, 1, 2, 0}, attempts, "Retry spends an attempt, Snooze none, Reschedule clears them")
	assert.Equal(t, "busy", h.calls[1].LastError)
	assert.Equal(t, "retry", h.calls[3].LastError)
	assert.Empty(t, e.deadLetters(t))
}

// Re-driving and deleting a dead letter are guarded: a re-drive refuses
// while a timer of its (kind, reference) exists, and neither lands once
// the dead letter changed (re-driven or deleted by another writer). A
// second dead letter of one timer at one due time takes the next
// millisecond: nothing is overwritten.
func TestDeadLetterRepairsAreGuardedAndNothingIsOverwritten(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
		return nil, timers.Permanent(errors.New("bad"))
	}}
	reg := registry(t, h)
	for i := range 2 {
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value(fmt.Sprint("v", i))})
		rep := e.run(t, reg, timers.RunConfig{})
		require.Equal(t, 1, rep.DeadLettered)
	}
	dls := e.deadLetters(t)
	require.Len(t, dls, 2)
	assert.Equal(t, "v0", string(dls[0].Value))
	assert.Equal(t, now, dls[0].DueAt)
	assert.Equal(t, "v1", string(dls[1].Value))
	assert.Equal(t, now.Add(time.Millisecond), dls[1].DueAt)

	// A timer of the same identity is live: the re-drive does not land.
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(100 * time.Millisecond), Value: store.Value("live")})
	b := store.NewBatch()
	require.NoError(t, timers.Redrive(b, e.inner.Capabilities(), dls[0], e.clock.Now()))
	out, err := e.inner.Apply(e.ctx, e.p, b)
	require.NoError(t, err)
	assert.Equal(t, store.PreconditionFailed, out.Outcome)
	assert.Len(t, e.deadLetters(t), 2)

	// Deleted by one writer, a second delete and a re-drive of what it
	// read do not land.
	b = store.NewBatch()
	require.NoError(t, timers.DeleteDeadLetter(b, dls[1]))
	e.apply(t, b)
	for _, mk := range []func(*store.Batch) error{
		func(b *store.Batch) error { return timers.DeleteDeadLetter(b, dls[1]) },
		func(b *store.Batch) error { return timers.Redrive(b, e.inner.Capabilities(), dls[1], e.clock.Now()) },
	} {
		b = store.NewBatch()
		require.NoError(t, mk(b))
		out, err = e.inner.Apply(e.ctx, e.p, b)
		require.NoError(t, err)
		assert.Equal(t, store.PreconditionFailed, out.Outcome)
	}
	assert.Len(t, e.deadLetters(t), 1)

	// A dead letter not read by DeadLetters is refused.
	assert.ErrorIs(t, timers.DeleteDeadLetter(store.NewBatch(), timers.DeadLetter{Kind: kindA}), store.ErrInvalid)
	assert.ErrorIs(t, timers.Redrive(store.NewBatch(), e.inner.Capabilities(), dls[0], time.Time{}), store.ErrInvalid)
}

// A retry policy out of its ranges fails registration.
func TestRetryPolicyIsValidatedAtRegistration(t *testing.T) {
	h := &handler{kind: kindA, fire: done}
	for _, p := range []timers.RetryPolicy{
		{InitialInterval: time.Millisecond / 2, BackoffFactor: 1, MaxInterval: time.Second},
		{InitialInterval: time.Second, BackoffFactor: 0.5, MaxInterval: time.Second},
		{InitialInterval: time.Second, BackoffFactor: 2, MaxInterval: time.Millisecond},
		{InitialInterval: time.Second, BackoffFactor: 2, MaxInterval: time.Second, MaxAttempts: -1},
		{InitialInterval: time.Second, BackoffFactor: 2, MaxInterval: time.Second, Jitter: 1.5},
	} {
		reg := &timers.Registry{}
		assert.ErrorIs(t, reg.Register(h, timers.KindConfig{Retry: p}), store.ErrInvalid, "%+v", p)
		assert.Empty(t, reg.Kinds())
	}
}

// The zero KindConfig.Retry is the default: DefaultRetryPolicy for a
// service's kind, retrying for ever RetryBackoff apart for a library kind.
func TestZeroRetryPolicyIsTheDefault(t *testing.T) {
	reg := &timers.Registry{}
	require.NoError(t, reg.Register(&handler{kind: kindA, fire: done}, timers.KindConfig{}))
	require.NoError(t, reg.Register(&libraryHandler{handler{kind: timers.KindRelay, fire: done}}, timers.KindConfig{Retry: timers.RetryPolicy{}}))
	p, ok := reg.RetryPolicyOf(kindA)
	require.True(t, ok)
	assert.Equal(t, timers.DefaultRetryPolicy, p)
	p, ok = reg.RetryPolicyOf(timers.KindRelay)
	require.True(t, ok)
	assert.Equal(t, timers.RetryPolicy{InitialInterval: timers.RetryBackoff, BackoffFactor: 1, MaxInterval: timers.RetryBackoff}, p)
	lib, err := timers.NewRegistry(&libraryHandler{handler{kind: timers.KindRelay, fire: done}})
	require.NoError(t, err)
	p, _ = lib.RetryPolicyOf(timers.KindRelay)
	assert.Zero(t, p.MaxAttempts, "a library kind retries for ever")
}

// A long error is kept truncated to the record's bound, at a rune
// boundary.
func TestTheLastErrorIsBounded(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	long := fmt.Sprintf("%0509d", 0) + "é" + fmt.Sprintf("%0100d", 0)
	h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
		return nil, errors.New("é" + long)
	}}
	reg := registry(t, h)
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now})
	e.run(t, reg, timers.RunConfig{})
	due, _ := e.refDue(t, kindA, "r")
	e.clock.Set(due)
	e.run(t, reg, timers.RunConfig{})
	require.Len(t, h.calls, 2)
	assert.Len(t, h.calls[1].LastError, 511, "512 bytes would cut the first rune's successor in two")
}

// openTimerV1Fixture opens a copy of testdata/timer-v1.bbolt: partition
// "timer-v1" holds timers a, b and c of kind 1000, due at 10,000 ms, with
// values "v1/<reference>", written by the code before retry policies
// (testdata/timer-v1.go.txt, run at 856c3cd): their reference entries are
// U64Values, with no attempts.
func openTimerV1Fixture(t *testing.T, clk clock.Clock) (*fdblayer.Layer, store.Partition) {
	t.Helper()
	src, err := os.Open("testdata/timer-v1.bbolt")
	require.NoError(t, err)
	defer src.Close()
	path := filepath.Join(t.TempDir(), "timer-v1.bbolt")
	dst, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	e, err := boltengine.Open(path, boltengine.Config{})
	require.NoError(t, err)
	l, err := fdblayer.Open(e, fdblayer.Config{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("timer-v1")}
}

// Timers written before retry policies decode and fire: one succeeds, one
// fails and one fails permanently into a dead letter. The store, written
// before formats, is at mkit format 1: the failing timer's attempt is not
// kept (each fire sees 0 and waits the policy's first interval) until mkit
// is raised to 2; then the attempt is recorded and the next fire sees it.
func TestATimerWrittenBeforeRetryPoliciesDecodesAndFires(t *testing.T) {
	clk := clock.NewManual(now)
	l, p := openTimerV1Fixture(t, clk)
	ctx := context.Background()
	require.Equal(t, uint32(1), l.Format(gen.SchemaNamespace), "a store written before formats")
	for _, ref := range []string{"a", "b", "c"} {
		v, due, err := timers.ReadRef(ctx, l, p, kindA, ref)
		require.NoError(t, err)
		require.NotNil(t, v)
		assert.Equal(t, time.UnixMilli(10_000), due, "as the fixture stored it")
	}
	h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
		switch {
		case tm.Reference == "b" && tm.Attempts == 0:
			return nil, errors.New("transient")
		case tm.Reference == "c":
			return nil, timers.Permanent(errors.New("gone"))
		}
		return timers.Done{}, nil
	}}
	reg := registry(t, h)
	cfg := timers.RunConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	rep, err := timers.RunDue(ctx, l, p, reg, now, cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Fired)
	assert.Equal(t, 2, rep.Failed)
	assert.Equal(t, 1, rep.DeadLettered, "a permanent error makes a dead letter at any format")
	assert.Equal(t, []string{"a", "b", "c"}, h.seen())
	for _, c := range h.calls {
		assert.Equal(t, "v1/"+c.Reference, string(c.Value))
		assert.Zero(t, c.Attempts)
	}
	refB := func() time.Time {
		t.Helper()
		v, due, err := timers.ReadRef(ctx, l, p, kindA, "b")
		require.NoError(t, err)
		ver, err := gen.VersionOfTimerRefKeyValue(v)
		require.NoError(t, err)
		if l.Format(gen.SchemaNamespace) < gen.FormatTimerRefV2 {
			assert.Equal(t, uint8(gen.VersionU64Value), ver, "format 1 writes what every binary reads")
		}
		return due
	}
	due := refB()
	assert.Equal(t, now.Add(timers.RetryBackoff), due)

	// At format 1 the next fire sees no attempt, and fails again.
	clk.Set(due)
	rep, err = timers.RunDue(ctx, l, p, reg, due, cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Failed)
	require.Len(t, h.calls, 4)
	assert.Zero(t, h.calls[3].Attempts)
	assert.Empty(t, h.calls[3].LastError)

	// Raised to 2: the failure is recorded, and the next fire sees it.
	require.NoError(t, l.Gate().Raise(ctx, gen.SchemaNamespace, gen.FormatTimerRefV2,
		evolve.RaiseConfig{By: "test", Reason: "retry policies' state"}))
	require.Equal(t, uint32(gen.FormatTimerRefV2), l.Format(gen.SchemaNamespace))
	due = refB()
	clk.Set(due)
	rep, err = timers.RunDue(ctx, l, p, reg, due, cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Failed)
	due = refB()
	clk.Set(due)
	rep, err = timers.RunDue(ctx, l, p, reg, due, cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Fired)
	require.Len(t, h.calls, 6)
	assert.Equal(t, 1, h.calls[5].Attempts)
	assert.Equal(t, "transient", h.calls[5].LastError)
	dls, _, err := timers.DeadLetters(ctx, store.ReaderOf(l, p), nil, 10)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, "c", dls[0].Reference)
	assert.Equal(t, "v1/c", string(dls[0].Value))
}

// DeadLetters reports a corrupt dead letter (a record that does not
// decode, a value row missing) with store.ErrCorrupt naming it, never
// skipping it; a limit under 1 is invalid.
func TestDeadLettersReportCorruptRows(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	h := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
		return nil, timers.Permanent(errors.New("bad"))
	}}
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "r", DueAt: now, Value: store.Value("v")})
	e.run(t, registry(t, h), timers.RunConfig{})
	rec, err := gen.AppendDeadLetterKey(nil, uint16(kindA), "r", encoded(now))
	require.NoError(t, err)
	val, err := gen.AppendDeadLetterValueKey(nil, uint16(kindA), "r", encoded(now))
	require.NoError(t, err)
	good := e.get(t, rec)
	require.NotNil(t, good)

	r := store.ReaderOf(e.inner, e.p)
	_, _, err = timers.DeadLetters(e.ctx, r, nil, 0)
	assert.ErrorIs(t, err, store.ErrInvalid)

	e.put(t, rec, store.Value("\xffjunk"))
	_, _, err = timers.DeadLetters(e.ctx, r, nil, 10)
	assert.ErrorIs(t, err, store.ErrCorrupt)
	assert.ErrorContains(t, err, `"r"`)

	e.put(t, rec, good)
	e.apply(t, store.NewBatch().Delete(val))
	_, _, err = timers.DeadLetters(e.ctx, r, nil, 10)
	assert.ErrorIs(t, err, store.ErrCorrupt)
	assert.ErrorContains(t, err, "no value row")
}
