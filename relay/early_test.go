package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
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

// isReadAhead matches the read ahead of a first checkpoint batch's
// guards: the scan state and the window's rows, in one GetMany.
func isReadAhead(c storetest.Call) bool {
	return c.Method == storetest.MethodGetMany && len(c.Keys) > 2 && bytes.Equal(c.Keys[0], gen.AppendRelayScanKey(nil))
}

// On a source store that overlaps calls (the MVCC engine, and the memory
// and bbolt engines made Distributed) the guards of the first of two
// checkpoint batches are read ahead beside the lanes (store.Prefetcher):
// the source sees that read, and two applies (the first batch and the
// outcome's); a store that runs its calls one after another (the memory
// and bbolt engines) sees no read ahead. Every row is delivered once and
// deleted either way.
func TestFirstCheckpointBatchGuardsAreReadBesideTheLanes(t *testing.T) {
	for _, tc := range []struct {
		eng   testengine.Engine
		ahead int
	}{{testengine.Memory, 0}, {testengine.Bolt, 0}, {testengine.MVCC, 1}, {testengine.MemoryDistributed, 1}, {testengine.BoltDistributed, 1}} {
		t.Run(tc.eng.Name, func(t *testing.T) {
			e := newEnv(t, tc.eng.Open)
			queueMany(t, e, checkpointRows+10)
			var ahead atomic.Int32
			e.source.AfterRead(func(_ context.Context, c storetest.Call) error {
				if isReadAhead(c) {
					ahead.Add(1)
				}
				return nil
			})
			applies := e.source.Calls(storetest.MethodApply)
			rep := e.run(t)
			require.Equal(t, 1, rep.Fired)
			assert.Equal(t, tc.ahead, int(ahead.Load()), "the read ahead")
			assert.Equal(t, 2, e.source.Calls(storetest.MethodApply)-applies, "the first checkpoint batch and the outcome")
			assert.Empty(t, e.queued(t))
			_, ok := e.timerDue(t)
			assert.False(t, ok, "Done")
			e.requireAppliedOnce(t, ta, everyThird(1, checkpointRows+10)...)
		})
	}
}

// A fire never waits for itself. On the memory and bbolt engines made
// Distributed, which report overlapping calls but run one write
// transaction at a time, a fire with target lanes and two checkpoint
// batches delivers every row within its deadline: nothing of the fire
// holds a transaction while its lanes' transactions wait for it (a first
// checkpoint batch's transaction begun beside the lanes used to hold the
// one writer until they finished, which they never did).
func TestAFireOnASingleWriterEngineNeverWaitsForItself(t *testing.T) {
	for _, eng := range []testengine.Engine{testengine.MemoryDistributed, testengine.BoltDistributed, testengine.MVCC} {
		t.Run(eng.Name, func(t *testing.T) {
			e := newEnv(t, eng.Open)
			var rows []row
			for i := range 3 * checkpointRows {
				rows = append(rows, put(lanesTarget(i%8), "k", fmt.Sprint(i)))
			}
			e.queue(t, rows...)
			for n := 0; ; n++ {
				due, ok := e.timerDue(t)
				if !ok {
					break
				}
				require.Less(t, n, 5, "fires")
				if due.After(e.now()) {
					e.clock.Set(due)
				}
				ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
				_, err := timers.RunDue(ctx, e.source, source, e.reg, e.now(), timers.RunConfig{Clock: e.clock, Logger: e.logger})
				cancel()
				require.NoError(t, err, "fire %d: a fire that waits for itself runs into its deadline", n+1)
			}
			assert.Empty(t, e.queued(t))
			for tg := range 8 {
				var want []uint64
				for i := tg; i < 3*checkpointRows; i += 8 {
					want = append(want, uint64(i+1))
				}
				e.requireAppliedOnce(t, lanesTarget(tg), want...)
			}
		})
	}
}

// With slow targets a fire's lanes may outlast FoundationDB's five-second
// transaction lifetime (here the MVCC engine's, made 50 ms): the read
// ahead of the first checkpoint batch grows too old, and its batch is
// read again and committed, as Apply would commit it. Every row is
// delivered once.
func TestSlowTargetsOutlastTheReadAhead(t *testing.T) {
	engine := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Lifetime: 50 * time.Millisecond, Backoff: time.Microsecond, MaxBackoff: time.Microsecond})
	e := newEnv(t, func(testing.TB, string) kv.Engine { return engine })
	queueMany(t, e, checkpointRows+10)
	e.target.Delay(storetest.MethodTransact, 100*time.Millisecond)
	var ahead atomic.Int32
	e.source.AfterRead(func(_ context.Context, c storetest.Call) error {
		if isReadAhead(c) {
			ahead.Add(1)
		}
		return nil
	})
	before := engine.Stats()
	rep := e.run(t)
	require.Equal(t, 1, rep.Fired)
	require.Equal(t, int32(1), ahead.Load(), "the read ahead")
	assert.Positive(t, engine.Stats().TooOld-before.TooOld, "the read ahead grew too old")
	e.drain(t, 5)
	assert.Empty(t, e.queued(t))
	e.requireAppliedOnce(t, ta, everyThird(1, checkpointRows+10)...)
	e.requireAppliedOnce(t, tb, everyThird(2, checkpointRows+10)...)
}

// A writer that moves the scan state after its read ahead (another
// fire's checkpoint) makes the first batch's commit read again and fail
// the scan state's guard, as Apply's would: the fire retries, nothing is
// lost, and the next fires deliver every row once.
func TestReadAheadRacedByAWriterFailsItsGuard(t *testing.T) {
	e := newEnv(t, testengine.MVCC.Open)
	queueMany(t, e, checkpointRows+10)
	scanKey := store.Key(gen.AppendRelayScanKey(nil))
	var moved atomic.Bool
	e.source.AfterRead(func(_ context.Context, c storetest.Call) error {
		if isReadAhead(c) && !moved.Swap(true) {
			e.putSource(t, scanKey, mustScanState(t, gen.RelayScanV1{CycleEnd: 1}))
		}
		return nil
	})
	rep := e.run(t)
	require.True(t, moved.Load(), "the scan state was read ahead")
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
