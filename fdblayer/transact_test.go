package fdblayer_test

import (
	"context"
	"fmt"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// copyFn reads "k" and puts its value at "copy", guarded by what it read;
// runs counts its runs.
func copyFn(runs *int) store.TransactFunc {
	return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		*runs++
		val, _, err := r.Get(ctx, k("k"))
		if err != nil {
			return nil, err
		}
		return store.NewBatch().Require(store.Guard(k("k"), val)).Put(k("copy"), val), nil
	}
}

// statsDelta is what e counted while fn ran.
func statsDelta(e *fdbsim.MVCCEngine, fn func()) fdbsim.MVCCStats {
	before := e.Stats()
	fn()
	after := e.Stats()
	return fdbsim.MVCCStats{
		Begun: after.Begun - before.Begun, Reads: after.Reads - before.Reads, KeysRead: after.KeysRead - before.KeysRead,
		Commits: after.Commits - before.Commits, Conflicts: after.Conflicts - before.Conflicts, Retries: after.Retries - before.Retries,
		TooOld: after.TooOld - before.TooOld, Unknown: after.Unknown - before.Unknown,
	}
}

// TestTransactOnceRoundTrips: on the MVCC engine a read-then-write is one
// read version, the function's reads and one commit: a guard on a key the
// function read, or a WakeIs after it read the wake time, costs no read
// of its own; a guard on a key it did not read costs one read for all
// such guards.
func TestTransactOnceRoundTrips(t *testing.T) {
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{})
	l := openLayer(t, e)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("k"), v("1")).WakeAt(t0.Add(5*time.Second)))
	for _, tc := range []struct {
		name string
		fn   store.TransactFunc
		want fdbsim.MVCCStats
	}{
		{"guard on the row read", copyFn(new(int)), fdbsim.MVCCStats{Begun: 1, Reads: 1, KeysRead: 1, Commits: 1}},
		{"WakeIs on the wake time read", func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			at, _, err := r.(store.WakeReader).NextWake(ctx)
			if err != nil {
				return nil, err
			}
			val, _, err := r.Get(ctx, k("k"))
			if err != nil {
				return nil, err
			}
			return store.NewBatch().Require(store.Guard(k("k"), val)).SetWake(at, at.Add(time.Millisecond)), nil
		}, fdbsim.MVCCStats{Begun: 1, Reads: 2, KeysRead: 2, Commits: 1}},
		{"guards on scanned rows", func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			page, err := r.Scan(ctx, nil, nil, nil, 10)
			if err != nil {
				return nil, err
			}
			b := store.NewBatch()
			for _, kv := range page.Entries {
				b.Require(store.Equals(kv.Key, kv.Value))
			}
			return b.Put(k("scanned"), v("x")), nil
		}, fdbsim.MVCCStats{Begun: 1, Reads: 1, KeysRead: 2, Commits: 1}},
		{"guards on rows not read", func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			return store.NewBatch().Require(store.Absent(k("a")), store.Absent(k("b"))).Put(k("a"), v("x")), nil
		}, fdbsim.MVCCStats{Begun: 1, Reads: 1, KeysRead: 2, Commits: 1}},
		{"nothing to write", func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			_, _, err := r.Get(ctx, k("k"))
			return nil, err
		}, fdbsim.MVCCStats{Begun: 1, Reads: 1, KeysRead: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := statsDelta(e, func() {
				_, err := l.TransactOnce(t.Context(), p, tc.fn)
				require.NoError(t, err)
			})
			require.Equal(t, tc.want, got)
		})
	}
}

// TestTransactOnceRerunsOnConflict: on the MVCC engine a writer that
// changes the row the function read, before its commit, makes the commit
// conflict, and the function runs again on the new value.
func TestTransactOnceRerunsOnConflict(t *testing.T) {
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Backoff: time.Microsecond, MaxBackoff: time.Microsecond})
	l := openLayer(t, e)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("k"), v("1")))
	runs := 0
	var stats fdbsim.MVCCStats
	stats = statsDelta(e, func() {
		out, err := l.TransactOnce(t.Context(), p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			if runs == 0 {
				// Another writer, in a transaction of its own (not the
				// function's context, which the Layer refuses).
				mustApply(t, l, p, store.NewBatch().Put(k("k"), v("2")))
			}
			return copyFn(&runs)(ctx, r)
		})
		require.NoError(t, err)
		require.Equal(t, store.Committed, out.Outcome)
	})
	require.Equal(t, 2, runs)
	require.Equal(t, v("2"), mustGet(t, l, p, k("copy")))
	require.Equal(t, uint64(1), stats.Conflicts)
	require.Equal(t, uint64(1), stats.Retries)
}

// TestTransactOnceUnknownResult: after an unknown commit result the
// function runs again, on a state where its batch may have landed; the
// Layer reports Committed only for a batch that landed, and
// ErrUnknownResult when it cannot run the function again.
func TestTransactOnceUnknownResult(t *testing.T) {
	// put creates "k" once: it finds its own work done.
	put := func(runs *int) store.TransactFunc {
		return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			*runs++
			_, ok, err := r.Get(ctx, k("k"))
			if err != nil || ok {
				return nil, err
			}
			return store.NewBatch().Require(store.Absent(k("k"))).Put(k("k"), v("v")), nil
		}
	}
	t.Run("landed: the re-run finds its work done", func(t *testing.T) {
		l := faultLayer(t, &faultScript{steps: []faultStep{{fault: fdbsim.CommitThenUnknown}}})
		runs := 0
		out, err := l.TransactOnce(t.Context(), faultP, put(&runs))
		require.NoError(t, err)
		require.Equal(t, store.Outcome(0), out.Outcome)
		require.Equal(t, 2, runs)
		require.Equal(t, v("v"), mustGet(t, l, faultP, k("k")))
	})
	t.Run("not landed: the re-run commits", func(t *testing.T) {
		l := faultLayer(t, &faultScript{steps: []faultStep{{fault: fdbsim.UnknownWithoutCommit}}})
		runs := 0
		out, err := l.TransactOnce(t.Context(), faultP, put(&runs))
		require.NoError(t, err)
		require.Equal(t, store.Committed, out.Outcome)
		require.Equal(t, 2, runs)
	})
	t.Run("retries exhausted", func(t *testing.T) {
		steps := []faultStep{{fault: fdbsim.UnknownWithoutCommit}, {fault: fdbsim.UnknownWithoutCommit}, {fault: fdbsim.UnknownWithoutCommit}}
		l := faultLayer(t, &faultScript{steps: steps}, Config{RetryLimit: 2})
		runs := 0
		_, err := l.TransactOnce(t.Context(), faultP, put(&runs))
		require.ErrorIs(t, err, store.ErrUnknownResult)
		require.ErrorIs(t, err, ErrRetriesExhausted)
		require.NotErrorIs(t, err, store.ErrUnavailable)
		require.Equal(t, 3, runs)
	})
	t.Run("deadline passed on the re-run", func(t *testing.T) {
		clk := clock.NewManual(time.UnixMilli(1_000_000))
		l := faultLayer(t, &faultScript{steps: []faultStep{{fault: fdbsim.UnknownWithoutCommit, then: func() { clk.Advance(time.Hour) }}}}, Config{Clock: clk})
		deadline := clk.Now().Add(time.Minute)
		_, err := l.TransactOnce(t.Context(), faultP, func(context.Context, store.Reader) (*store.Batch, error) {
			return store.NewBatch().Put(k("k"), v("v")).WithDeadline(deadline), nil
		})
		require.ErrorIs(t, err, store.ErrUnknownResult, "an earlier attempt may have landed")
	})
}

// TestTransactOnceReadErrorsRetry: a retryable engine error of a read the
// function made resets the transaction and runs the function again,
// whatever the function made of the error; past the retry limit the
// Layer fails with ErrUnavailable.
func TestTransactOnceReadErrorsRetry(t *testing.T) {
	f := &flakyEngine{Engine: memengine.New()}
	l := openLayer(t, f, Config{RetryLimit: 2})
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("k"), v("1")))

	f.failures.Store(2)
	runs := 0
	out, err := l.TransactOnce(t.Context(), p, copyFn(&runs))
	require.NoError(t, err)
	require.Equal(t, store.Committed, out.Outcome)
	require.Equal(t, 3, runs)
	require.Equal(t, v("1"), mustGet(t, l, p, k("copy")))

	f.failures.Store(3)
	runs = 0
	swallowed := func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		runs++
		if _, _, err := r.Get(ctx, k("k")); err == nil {
			return nil, fmt.Errorf("read succeeded")
		}
		return store.NewBatch().Put(k("swallowed"), v("x")), nil // ignores its read's error
	}
	_, err = l.TransactOnce(t.Context(), p, swallowed)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, ErrRetriesExhausted)
	require.Equal(t, 3, runs)
	require.Nil(t, mustGet(t, l, p, k("swallowed")), "a batch built after a failed read never commits")
}

// TestTransactOnceNestedCalls: every Layer method called with the
// function's context fails with ErrInvalid instead of waiting for the
// function's transaction (on the memory engine it would wait forever); a
// call with another context reaches another Layer on another engine.
func TestTransactOnceNestedCalls(t *testing.T) {
	l := openLayer(t, memengine.New())
	other := openLayer(t, memengine.New())
	p := testPartition("p")
	calls := map[string]func(ctx context.Context) error{
		"Get":     func(ctx context.Context) error { _, _, err := l.Get(ctx, p, k("k")); return err },
		"GetMany": func(ctx context.Context) error { _, err := l.GetMany(ctx, p, []store.Key{k("k")}); return err },
		"Scan":    func(ctx context.Context) error { _, err := l.Scan(ctx, p, nil, nil, nil, 1); return err },
		"AppendScan": func(ctx context.Context) error {
			_, _, err := l.AppendScan(ctx, p, nil, nil, nil, 1, nil, nil)
			return err
		},
		"Apply": func(ctx context.Context) error {
			_, err := l.Apply(ctx, p, store.NewBatch().Put(k("k"), v("v")))
			return err
		},
		"Stats": func(ctx context.Context) error { _, err := l.Stats(ctx, p); return err },
		"Probe": func(ctx context.Context) error { return l.Probe(ctx) },
		"ScanDue": func(ctx context.Context) error {
			_, err := l.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1})
			return err
		},
		"NextWake": func(ctx context.Context) error { _, _, err := l.NextWake(ctx, p); return err },
		"TransactOnce": func(ctx context.Context) error {
			_, err := l.TransactOnce(ctx, p, func(context.Context, store.Reader) (*store.Batch, error) { return nil, nil })
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := l.TransactOnce(t.Context(), p, func(ctx context.Context, _ store.Reader) (*store.Batch, error) {
					if _, err := other.Apply(ctx, p, store.NewBatch().Put(k("elsewhere"), v("x"))); err != nil {
						return nil, fmt.Errorf("another Layer: %w", err)
					}
					return nil, call(ctx)
				})
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorIs(t, err, store.ErrInvalid)
				require.Contains(t, err.Error(), "inside a TransactOnce function")
			case <-time.After(10 * time.Second):
				t.Fatal("the nested call waits for its own transaction")
			}
		})
	}
	require.Equal(t, v("x"), mustGet(t, other, p, k("elsewhere")))
}

// TestTransactOnceScanBudget: a transaction's scans share one budget:
// each page is cut to what earlier reads left, and the cursors they hand
// out resume outside the transaction too.
func TestTransactOnceScanBudget(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		p := testPartition("p")
		b := store.NewBatch()
		for i := range 10 {
			b.Put(k(fmt.Sprintf("r%d", i)), make(store.Value, 1000))
		}
		mustApply(t, l, p, b)
		var first store.ScanPage
		_, err := l.TransactOnce(t.Context(), p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			if _, _, err := r.Get(ctx, k("r0")); err != nil {
				return nil, err
			}
			var err error
			first, err = r.Scan(ctx, nil, nil, nil, 100)
			return nil, err
		})
		require.NoError(t, err)
		// The Get held one row's 1,011 bytes (with its prefix) of the
		// 4,000: the page holds two rows, as a third would pass the
		// 2,989 left.
		require.Len(t, first.Entries, 2)
		require.NotNil(t, first.Next)
		rest, err := l.Scan(t.Context(), p, nil, nil, first.Next, 100)
		require.NoError(t, err)
		require.Len(t, rest.Entries, 8, "the transaction's cursor resumes a plain scan")
		require.Equal(t, "r2", string(rest.Entries[0].Key))
		require.Nil(t, rest.Next)
	}, Config{MaxTransactReadBytes: 4000, MaxScanBytes: 1 << 20})
}
