package fdbsim_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/store"
)

var faultKey = []byte("\x02f\x00k")

// get reads faultKey in a read transaction of e.
func get(t *testing.T, e kv.Engine) []byte {
	t.Helper()
	txn, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	defer txn.Close()
	vals, err := txn.GetMany(nil, [][]byte{faultKey})
	require.NoError(t, err)
	return vals[0]
}

// TestInjectFaults: each Fault does to a memory engine's commit what it
// says, then runs after the engine is released (a transaction of its own
// would wait forever otherwise), and OnError retries exactly the injected
// conflicts and unknown results on a fresh transaction that commits.
func TestInjectFaults(t *testing.T) {
	for _, tc := range []struct {
		fault  fdbsim.Fault
		landed bool
		err    []error // what the commit's error wraps; nil: none
		retry  bool    // OnError retries it
	}{
		{fdbsim.CommitNormally, true, nil, false},
		{fdbsim.CommitConflict, false, []error{fdbsim.ErrInjectedConflict}, true},
		{fdbsim.CommitThenUnknown, true, []error{store.ErrUnknownResult, fdbsim.ErrInjectedUnknown}, true},
		{fdbsim.UnknownWithoutCommit, false, []error{store.ErrUnknownResult, fdbsim.ErrInjectedUnknown}, true},
		{fdbsim.CommitFatal, false, []error{fdbsim.ErrInjectedFatal}, false},
	} {
		t.Run(fmtFault(tc.fault), func(t *testing.T) {
			var e kv.Engine
			calls, thenRan := 0, false
			e = fdbsim.InjectFaults(memengine.New(), func(context.Context) (fdbsim.Fault, func()) {
				calls++
				if calls > 1 {
					return fdbsim.CommitNormally, nil
				}
				return tc.fault, func() {
					thenRan = true
					get(t, e) // the engine is free
				}
			})
			defer e.Close()
			txn, err := e.Begin(t.Context())
			require.NoError(t, err)
			defer txn.Close()
			txn.Set(faultKey, []byte("v"))
			err = txn.Commit()
			require.True(t, thenRan)
			if tc.err == nil {
				require.NoError(t, err)
			}
			for _, want := range tc.err {
				require.ErrorIs(t, err, want)
			}
			if tc.landed {
				require.Equal(t, []byte("v"), get(t, e))
			} else {
				require.Nil(t, get(t, e))
			}
			if err == nil {
				return
			}
			rerr := txn.OnError(err)
			if !tc.retry {
				require.Equal(t, err, rerr)
				return
			}
			require.NoError(t, rerr)
			txn.Set(faultKey, []byte("w"))
			require.NoError(t, txn.Commit())
			require.Equal(t, []byte("w"), get(t, e))
		})
	}
}

func fmtFault(f fdbsim.Fault) string {
	return [...]string{"CommitNormally", "CommitConflict", "CommitThenUnknown", "UnknownWithoutCommit", "CommitFatal"}[f]
}

// TestInjectFaultsContextEnds: a commit held by its fault until the
// context ends lands under CommitThenUnknown and not under
// CommitNormally, and the transaction's reads fail with the context's
// error once it ended.
func TestInjectFaultsContextEnds(t *testing.T) {
	for _, tc := range []struct {
		fault  fdbsim.Fault
		landed bool
	}{{fdbsim.CommitNormally, false}, {fdbsim.CommitThenUnknown, true}} {
		t.Run(fmtFault(tc.fault), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			e := fdbsim.InjectFaults(memengine.New(), func(ctx context.Context) (fdbsim.Fault, func()) {
				cancel()
				<-ctx.Done()
				return tc.fault, nil
			})
			defer e.Close()
			txn, err := e.Begin(ctx)
			require.NoError(t, err)
			defer txn.Close()
			txn.Set(faultKey, []byte("v"))
			err = txn.Commit()
			require.Error(t, err)
			if !tc.landed {
				require.ErrorIs(t, err, context.Canceled)
			}
			if _, rerr := txn.GetMany(nil, [][]byte{faultKey}); !errors.Is(rerr, context.Canceled) {
				t.Fatalf("read after the context ended: %v", rerr)
			}
			txn.Close()
			require.Equal(t, tc.landed, get(t, e) != nil, "landed")
		})
	}
}

// TestWrappersKeepCapabilities: InjectFaults keeps its engine's
// Distributed, Optimistic and its transactions' RangesReader;
// AsDistributed makes any engine Distributed, wrapped or not, and keeps
// Optimistic: the memory engine, one writer at a time, is never
// Optimistic, however wrapped.
func TestWrappersKeepCapabilities(t *testing.T) {
	never := func(context.Context) (fdbsim.Fault, func()) { return fdbsim.CommitNormally, nil }
	isDistributed := func(e kv.Engine) bool {
		d, ok := e.(kv.Distributed)
		return ok && d.Distributed()
	}
	isOptimistic := func(e kv.Engine) bool {
		o, ok := e.(kv.Optimistic)
		return ok && o.Optimistic()
	}
	readsRanges := func(e kv.Engine) bool {
		txn, err := e.Begin(t.Context())
		require.NoError(t, err)
		defer txn.Close()
		_, ok := txn.(kv.RangesReader)
		return ok
	}
	for _, tc := range []struct {
		name                                 string
		e                                    kv.Engine
		distributed, rangeReader, optimistic bool
	}{
		{"memory", fdbsim.InjectFaults(memengine.New(), never), false, false, false},
		{"mvcc", fdbsim.InjectFaults(fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}), never), true, true, true},
		{"distributed memory", fdbsim.AsDistributed(memengine.New()), true, false, false},
		{"faults over distributed memory", fdbsim.InjectFaults(fdbsim.AsDistributed(memengine.New()), never), true, false, false},
		{"distributed mvcc", fdbsim.AsDistributed(fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{})), true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.e.Close()
			require.Equal(t, tc.distributed, isDistributed(tc.e), "Distributed")
			require.Equal(t, tc.optimistic, isOptimistic(tc.e), "Optimistic")
			require.Equal(t, tc.rangeReader, readsRanges(tc.e), "RangesReader")
		})
	}
}
