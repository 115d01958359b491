package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// queueMany queues n rows to ta, tb and tc in turn: more than one
// checkpoint batch deletes.
func queueMany(t *testing.T, e *env, n int) {
	var rows []row
	for i := range n {
		rows = append(rows, put([]store.Partition{ta, tb, tc}[i%3], "k", fmt.Sprint(i)))
	}
	e.queue(t, rows...)
}

// On a source store that overlaps calls (the MVCC engine) the first of two
// checkpoint batches commits in a transaction begun beside the lanes: the
// source sees a TransactOnce for it where a store running one writer at a
// time (the memory engine) sees an Apply, and every row is delivered once
// and deleted either way.
func TestFirstCheckpointBatchCommitsInATransactionBegunBesideTheLanes(t *testing.T) {
	for _, tc := range []struct {
		eng               testengine.Engine
		applies, transact int
	}{{testengine.Memory, 2, 0}, {testengine.MVCC, 1, 1}} {
		t.Run(tc.eng.Name, func(t *testing.T) {
			e := newEnv(t, tc.eng.Open)
			queueMany(t, e, checkpointRows+10)
			applies, transacts := e.source.Calls(storetest.MethodApply), e.source.Calls(storetest.MethodTransact)
			rep := e.run(t)
			require.Equal(t, 1, rep.Fired)
			assert.Equal(t, tc.applies, e.source.Calls(storetest.MethodApply)-applies, "the outcome, and the first checkpoint batch without the early transaction")
			assert.Equal(t, tc.transact, e.source.Calls(storetest.MethodTransact)-transacts, "the early transaction")
			assert.Empty(t, e.queued(t))
			_, ok := e.timerDue(t)
			assert.False(t, ok, "Done")
			e.requireAppliedOnce(t, ta, everyThird(1, checkpointRows+10)...)
		})
	}
}

// A writer that moves the scan state after the early transaction read it
// (another fire's checkpoint) makes that transaction read again and its
// first batch fail the scan state's guard, as Apply's would: the fire
// retries, nothing is lost, and the next fires deliver every row once.
func TestEarlyCheckpointRacedByAWriterFailsItsGuard(t *testing.T) {
	e := newEnv(t, testengine.MVCC.Open)
	queueMany(t, e, checkpointRows+10)
	scanKey := store.Key(gen.AppendRelayScanKey(nil))
	var moved atomic.Bool
	e.source.AfterRead(func(_ context.Context, c storetest.Call) error {
		if c.Method == storetest.MethodGetMany && len(c.Keys) > 2 && bytes.Equal(c.Keys[0], scanKey) && !moved.Swap(true) {
			e.putSource(t, scanKey, mustScanState(t, gen.RelayScanV1{CycleEnd: 1}))
		}
		return nil
	})
	rep := e.run(t)
	require.True(t, moved.Load(), "the early transaction read the scan state")
	assert.Equal(t, 1, rep.Retried, "the checkpoint raced: Retry")
	assert.Contains(t, e.logs.String(), "relay checkpoint raced")
	e.source.Clear()
	e.drain(t, 10)
	assert.Empty(t, e.queued(t))
	e.requireAppliedOnce(t, ta, everyThird(1, checkpointRows+10)...)
	e.requireAppliedOnce(t, tb, everyThird(2, checkpointRows+10)...)
}

func mustScanState(t *testing.T, s gen.RelayScanV1) store.Value {
	v, err := gen.AppendRelayScanV1(nil, s)
	require.NoError(t, err)
	return v
}

// everyThird lists from, from+3, ... up to to: the sequences queueMany
// queued to one target.
func everyThird(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i += 3 {
		s = append(s, i)
	}
	return s
}
