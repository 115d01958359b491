package fdblayer_test

import (
	"bytes"
	"context"
	"errors"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// faultScript answers a memory engine's commits from a list, one entry per
// commit, then commits normally. It counts the commits it saw.
type faultScript struct {
	mu    sync.Mutex
	steps []faultStep
	calls int
	// idle: commits pass without a step and uncounted (the Layer's own,
	// while faultLayer opens it).
	idle bool
}

type faultStep struct {
	fault fdbsim.Fault
	// then runs after the engine is released (a concurrent writer).
	then func()
	// hold blocks the commit until its context ends.
	hold bool
}

func (s *faultScript) fault(ctx context.Context) (fdbsim.Fault, func()) {
	s.mu.Lock()
	if s.idle {
		s.mu.Unlock()
		return fdbsim.CommitNormally, nil
	}
	n := s.calls
	s.calls++
	s.mu.Unlock()
	if n >= len(s.steps) {
		return fdbsim.CommitNormally, nil
	}
	st := s.steps[n]
	if st.hold {
		<-ctx.Done()
	}
	return st.fault, st.then
}

func (s *faultScript) commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// faultLayer opens a Layer over a memory engine consulting script,
// configured by cfg (at most one). The script starts once the Layer is
// open: Open's own commit (its gate's) takes no step.
func faultLayer(t *testing.T, script *faultScript, cfg ...Config) *Layer {
	t.Helper()
	script.mu.Lock()
	script.idle = true
	script.mu.Unlock()
	l := openLayer(t, fdbsim.InjectFaults(memengine.New(), script.fault), cfg...)
	script.mu.Lock()
	script.idle = false
	script.mu.Unlock()
	return l
}

var faultP = testPartition("faults")

func k(s string) store.Key   { return store.Key(s) }
func v(s string) store.Value { return store.Value(s) }

// mustGet reads key, nil when absent.
func mustGet(t *testing.T, l *Layer, p store.Partition, key store.Key) store.Value {
	t.Helper()
	val, _, err := l.Get(t.Context(), p, key)
	require.NoError(t, err)
	return val
}

func mustApply(t *testing.T, l *Layer, p store.Partition, b *store.Batch) store.BatchOutcome {
	t.Helper()
	out, err := l.Apply(t.Context(), p, b)
	require.NoError(t, err)
	return out
}

// TestApplyRetryReevaluatesPreconditions: a conflict makes Apply retry,
// and the retry reads the guards afresh: a concurrent writer that broke a
// guard turns the retry into PreconditionFailed; one that did not lets it
// commit.
func TestApplyRetryReevaluatesPreconditions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interloper  store.Value // what a concurrent writer sets "guard" to
		wantOutcome store.Outcome
	}{
		{"guard broken meanwhile", v("changed"), store.PreconditionFailed},
		{"guard intact meanwhile", v("v1"), store.Committed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := &faultScript{}
			l := faultLayer(t, script)
			mustApply(t, l, faultP, store.NewBatch().Put(k("guard"), v("v1")))
			script.steps = []faultStep{{fault: fdbsim.CommitConflict, then: func() {
				mustApply(t, l, faultP, store.NewBatch().Put(k("guard"), tc.interloper))
			}}}
			script.calls = 0

			b := store.NewBatch().Require(store.Equals(k("guard"), v("v1"))).Put(k("row"), v("written"))
			out := mustApply(t, l, faultP, b)
			require.Equal(t, tc.wantOutcome, out.Outcome, "outcome %v", out)
			// The conflicting commit, the interloper's, and the retry's
			// (when its guard held).
			wantCommits := 2
			if tc.wantOutcome == store.Committed {
				wantCommits = 3
			}
			require.Equal(t, wantCommits, script.commits())
			if tc.wantOutcome == store.PreconditionFailed {
				require.Equal(t, 0, out.FailedIndex)
				require.Nil(t, mustGet(t, l, faultP, k("row")), "the batch wrote despite its failed guard")
			} else {
				require.Equal(t, v("written"), mustGet(t, l, faultP, k("row")))
			}
			require.Equal(t, tc.interloper, mustGet(t, l, faultP, k("guard")))
		})
	}
}

// TestApplyUnknownResultGuardedLandsOnce: a commit that landed but
// reported an unknown result is retried; the retry's guard sees the
// batch's own write and fails, so the caller gets PreconditionFailed and
// the batch landed exactly once.
func TestApplyUnknownResultGuardedLandsOnce(t *testing.T) {
	var logs bytes.Buffer
	script := &faultScript{}
	l := faultLayer(t, script, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mustApply(t, l, faultP, store.NewBatch().Put(k("seq"), v("1")))
	script.steps = []faultStep{{fault: fdbsim.CommitThenUnknown}}
	script.calls = 0

	b := store.NewBatch().Require(store.Equals(k("seq"), v("1"))).
		Put(k("seq"), v("2")).Put(k("log/2"), v("entry"))
	out := mustApply(t, l, faultP, b)
	require.Equal(t, store.PreconditionFailed, out.Outcome)
	require.Equal(t, 0, out.FailedIndex)
	require.Equal(t, 1, script.commits(), "the retry must stop at its guard, not commit again")
	require.Equal(t, v("2"), mustGet(t, l, faultP, k("seq")))
	require.Equal(t, v("entry"), mustGet(t, l, faultP, k("log/2")))
	require.Contains(t, logs.String(), "commit result unknown")
	require.Contains(t, logs.String(), "partition=test:faults")
}

// TestApplyUnknownResultGuardsHoldCommits: when the retry's guards still
// hold (the batch's writes leave them true), the retry commits again and
// Apply reports Committed; the writes are the same either way.
func TestApplyUnknownResultGuardsHoldCommits(t *testing.T) {
	script := &faultScript{}
	l := faultLayer(t, script)
	mustApply(t, l, faultP, store.NewBatch().Put(k("config"), v("on")))
	script.steps = []faultStep{{fault: fdbsim.CommitThenUnknown}}
	script.calls = 0

	out := mustApply(t, l, faultP, store.NewBatch().Require(store.Equals(k("config"), v("on"))).Put(k("row"), v("x")))
	require.Equal(t, store.Committed, out.Outcome)
	require.Equal(t, 2, script.commits())
	require.Equal(t, v("x"), mustGet(t, l, faultP, k("row")))
}

// TestApplyUnknownResultUnguardedWritesLandTwice: what the Apply doc warns
// of. A batch whose guards its writes leave true lands a second time at the
// retry, after another writer's commit: its unguarded put overwrites that
// writer's later value and its unguarded delete removes the row that
// writer recreated. (Had that writer changed the guarded key, the retry's
// guard would have failed and written nothing.)
func TestApplyUnknownResultUnguardedWritesLandTwice(t *testing.T) {
	script := &faultScript{}
	l := faultLayer(t, script)
	mustApply(t, l, faultP, store.NewBatch().Put(k("config"), v("on")).Put(k("gone"), v("old")))
	script.steps = []faultStep{{fault: fdbsim.CommitThenUnknown, then: func() {
		mustApply(t, l, faultP, store.NewBatch().Put(k("row"), v("theirs")).Put(k("gone"), v("recreated")))
	}}}
	script.calls = 0

	b := store.NewBatch().Require(store.Equals(k("config"), v("on"))).Put(k("row"), v("mine")).Delete(k("gone"))
	out := mustApply(t, l, faultP, b)
	require.Equal(t, store.Committed, out.Outcome)
	require.Equal(t, 3, script.commits(), "the batch's two commits and the other writer's between them")
	require.Equal(t, v("mine"), mustGet(t, l, faultP, k("row")), "the unguarded put overwrote the later write")
	require.Nil(t, mustGet(t, l, faultP, k("gone")), "the unguarded delete removed the recreated row")
}

// TestApplyUnknownWithoutLandingCommits: an unknown result for a commit
// that did not land is retried to Committed, landing once.
func TestApplyUnknownWithoutLandingCommits(t *testing.T) {
	script := &faultScript{steps: []faultStep{{fault: fdbsim.UnknownWithoutCommit}, {fault: fdbsim.UnknownWithoutCommit}}}
	l := faultLayer(t, script)
	out := mustApply(t, l, faultP, store.NewBatch().Require(store.Absent(k("k"))).Put(k("k"), v("v")))
	require.Equal(t, store.Committed, out.Outcome)
	require.Equal(t, 3, script.commits())
	require.Equal(t, v("v"), mustGet(t, l, faultP, k("k")))
}

// TestApplyContextEndsDuringCommit: when the context ends while a commit
// is in flight, Apply reports ErrUnknownResult (wrapping the context's
// error), whether or not the batch landed.
func TestApplyContextEndsDuringCommit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   fdbsim.Fault
		landed  bool
		timeout bool
	}{
		{"cancelled, not landed", fdbsim.CommitNormally, false, false},
		{"cancelled, landed", fdbsim.CommitThenUnknown, true, false},
		{"deadline, not landed", fdbsim.CommitNormally, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := &faultScript{steps: []faultStep{{fault: tc.fault, hold: true}}}
			l := faultLayer(t, script)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			wantCtxErr := context.Canceled
			end := cancel
			if tc.timeout {
				// The deadline passes once the commit is held, however
				// slowly the machine reaches it (a timer would fire first
				// under load).
				dl := &deadlineAt{Context: t.Context(), done: make(chan struct{})}
				ctx, end = dl, dl.pass
				wantCtxErr = context.DeadlineExceeded
			}
			go func() {
				for script.commits() == 0 {
					time.Sleep(time.Millisecond)
				}
				end()
			}()

			out, err := l.Apply(ctx, faultP, store.NewBatch().Require(store.Absent(k("k"))).Put(k("k"), v("v")))
			require.ErrorIs(t, err, store.ErrUnknownResult, "outcome %v", out)
			require.ErrorIs(t, err, wantCtxErr)
			require.NotErrorIs(t, err, store.ErrUnavailable)
			require.Equal(t, 1, script.commits(), "no retry once the context ended")
			want := store.Value(nil)
			if tc.landed {
				want = v("v")
			}
			require.Equal(t, want, mustGet(t, l, faultP, k("k")))
		})
	}
}

// deadlineAt is a context whose deadline passes when pass is called: Done
// closes and Err is context.DeadlineExceeded.
type deadlineAt struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func (c *deadlineAt) pass() { c.once.Do(func() { close(c.done) }) }

func (c *deadlineAt) Done() <-chan struct{} { return c.done }

func (c *deadlineAt) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestApplyCancelledBeforeStart: a context that ended before Apply is its
// error, wrapped with ErrUnavailable; nothing is committed.
func TestApplyCancelledBeforeStart(t *testing.T) {
	script := &faultScript{}
	l := faultLayer(t, script)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := l.Apply(ctx, faultP, store.NewBatch().Put(k("k"), v("v")))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 0, script.commits())
	require.Nil(t, mustGet(t, l, faultP, k("k")))
}

// TestApplyRetryBudget: a retryable error that persists ends the retries
// after the limit: ErrUnavailable when nothing may have landed,
// ErrUnknownResult when an attempt's result was unknown.
func TestApplyRetryBudget(t *testing.T) {
	conflicts := func(n int) []faultStep {
		steps := make([]faultStep, n)
		for i := range steps {
			steps[i] = faultStep{fault: fdbsim.CommitConflict}
		}
		return steps
	}
	for _, tc := range []struct {
		name  string
		steps []faultStep
		want  error
	}{
		{"conflicts only", conflicts(10), store.ErrUnavailable},
		{"after an unknown result", append([]faultStep{{fault: fdbsim.UnknownWithoutCommit}}, conflicts(9)...), store.ErrUnknownResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := &faultScript{steps: tc.steps}
			l := faultLayer(t, script, Config{RetryLimit: 3})
			_, err := l.Apply(t.Context(), faultP, store.NewBatch().Put(k("k"), v("v")))
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, ErrRetriesExhausted)
			require.Equal(t, 4, script.commits(), "one attempt and three retries")
			require.Nil(t, mustGet(t, l, faultP, k("k")))
		})
	}
}

// TestApplyFatalError: an error the engine will not retry ends Apply at
// once: ErrUnavailable, or ErrUnknownResult after an unknown result.
func TestApplyFatalError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		steps   []faultStep
		want    error
		commits int
	}{
		{"first commit", []faultStep{{fault: fdbsim.CommitFatal}}, store.ErrUnavailable, 1},
		{"after an unknown result", []faultStep{{fault: fdbsim.UnknownWithoutCommit}, {fault: fdbsim.CommitFatal}}, store.ErrUnknownResult, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := &faultScript{steps: tc.steps}
			l := faultLayer(t, script)
			_, err := l.Apply(t.Context(), faultP, store.NewBatch().Put(k("k"), v("v")))
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, fdbsim.ErrInjectedFatal)
			require.Equal(t, tc.commits, script.commits())
		})
	}
}

// TestApplyDeadline: the deadline is checked against the Layer's clock at
// every attempt; exactly at the deadline still commits; past it nothing is
// written. A retry after a conflict reports DeadlinePassed, but one after
// an unknown result reports ErrUnknownResult: the batch may have landed.
func TestApplyDeadline(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	t.Run("checked against the clock", func(t *testing.T) {
		clk := clock.NewManual(start)
		script := &faultScript{}
		l := faultLayer(t, script, Config{Clock: clk})
		out := mustApply(t, l, faultP, store.NewBatch().Put(k("a"), v("1")).WithDeadline(start))
		require.Equal(t, store.Committed, out.Outcome, "a batch exactly at its deadline commits")
		out = mustApply(t, l, faultP, store.NewBatch().Put(k("b"), v("1")).WithDeadline(start.Add(-time.Millisecond)))
		require.Equal(t, store.DeadlinePassed, out.Outcome)
		require.True(t, out.Now.Equal(start), "Now %v, want the clock's %v", out.Now, start)
		require.Equal(t, 1, script.commits())
		require.Nil(t, mustGet(t, l, faultP, k("b")))
	})
	for _, tc := range []struct {
		name    string
		fault   fdbsim.Fault
		wantErr error
	}{
		{"passes during a conflict", fdbsim.CommitConflict, nil},
		{"passes after an unknown result", fdbsim.CommitThenUnknown, store.ErrUnknownResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewManual(start)
			script := &faultScript{steps: []faultStep{{fault: tc.fault, then: func() { clk.Advance(time.Second) }}}}
			l := faultLayer(t, script, Config{Clock: clk})
			out, err := l.Apply(t.Context(), faultP, store.NewBatch().Put(k("k"), v("v")).WithDeadline(start.Add(time.Millisecond)))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, store.DeadlinePassed, out.Outcome)
			require.Nil(t, mustGet(t, l, faultP, k("k")))
		})
	}
}

// TestApplyErrorsWrapOneSentinel: whatever the failure, an error wraps
// exactly one store sentinel and names the partition, never a value.
func TestApplyErrorsWrapOneSentinel(t *testing.T) {
	for _, f := range []fdbsim.Fault{fdbsim.CommitFatal, fdbsim.CommitThenUnknown} {
		script := &faultScript{steps: []faultStep{{fault: f}, {fault: fdbsim.CommitFatal}}}
		l := faultLayer(t, script)
		_, err := l.Apply(t.Context(), faultP, store.NewBatch().Put(k("k"), v("secret-value")))
		require.Error(t, err)
		n := 0
		for _, s := range StoreSentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		require.Equal(t, 1, n, "error %q wraps %d store sentinels", err, n)
		require.Contains(t, err.Error(), "test:faults")
		require.NotContains(t, err.Error(), "secret-value")
	}
}
