package relay_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Reference: ordered target batches, one guarded high-water mark per
// target, Done once the queue is empty.
func TestDeliversInOrderToSeveralTargets(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		seqs := e.queue(t,
			put(ta, "k", "a1"),
			put(tb, "k", "b1", "x", "bx"),
			put(ta, "k", "a2"),
			del(tb, "x"),
			put(tc, "k", "c1"),
			put(ta, "k", "a3", "y", "ay"),
			del(ta, "y"),
		)
		require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, seqs)

		rep := e.run(t)
		assert.Equal(t, 1, rep.Fired)

		assert.Equal(t, "a3", e.get(t, ta, "k"))
		assert.Equal(t, "", e.get(t, ta, "y"), "the delete after the put wins")
		assert.Equal(t, "b1", e.get(t, tb, "k"))
		assert.Equal(t, "", e.get(t, tb, "x"))
		assert.Equal(t, "c1", e.get(t, tc, "k"))
		assert.Equal(t, uint64(7), e.highWater(t, ta))
		assert.Equal(t, uint64(4), e.highWater(t, tb))
		assert.Equal(t, uint64(5), e.highWater(t, tc))
		e.requireAppliedOnce(t, ta, 1, 3, 6, 7)
		e.requireAppliedOnce(t, tb, 2, 4)
		e.requireAppliedOnce(t, tc, 5)

		// One batch per target (concurrently: in no particular order
		// across targets), each of its rows in sequence order.
		byTarget := map[string][]uint64{}
		for _, c := range e.audit.applyCalls() {
			id := string(ids(c.target)[0])
			require.NotContains(t, byTarget, id, "one batch per target")
			byTarget[id] = c.seqs
		}
		assert.Equal(t, map[string][]uint64{
			string(ids(ta)[0]): {1, 3, 6, 7}, string(ids(tb)[0]): {2, 4}, string(ids(tc)[0]): {5},
		}, byTarget)

		assert.Empty(t, e.queued(t))
		_, ok := e.timerDue(t)
		assert.False(t, ok, "the timer is done once the queue is empty")
		st := e.scanState(t)
		assert.Equal(t, gen.RelayScanV1{CycleEnd: 7, Cursor: 7}, st)
	})
}

// Reference: a group is split into the largest prefixes that fit one
// target batch (MaxRelayWrites row writes), each ending with its mark.
func TestSplitsAGroupIntoBatchesOfAtMostMaxRelayWrites(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		var rows []row
		for i := range 10 {
			r := row{target: ta}
			for j := range 30 {
				r.puts = append(r.puts, gen.RelayPut{Key: []byte{'k', byte(j)}, Value: []byte{byte(i)}})
			}
			rows = append(rows, r)
		}
		e.queue(t, rows...)
		var batches []*store.Batch
		e.target.BeforeApply(func(_ context.Context, p store.Partition, b *store.Batch) error {
			if same(p, ta) {
				batches = append(batches, b.Clone())
			}
			return nil
		})
		e.configure(t, func(c *relay.HandlerConfig) { c.Hook = relay.NoHook{} })

		e.run(t)

		// 30 writes a row: three rows (90 writes) per batch, the fourth
		// would make 120 > 98.
		require.Len(t, batches, 4)
		wantLast := []uint64{3, 6, 9, 10}
		for i, b := range batches {
			assert.LessOrEqual(t, len(b.Writes)-1, relay.MaxRelayWrites)
			hw := b.Writes[len(b.Writes)-1]
			assert.Equal(t, hwKey(t), hw.Key)
			u, err := gen.DecodeU64Value(hw.Value)
			require.NoError(t, err)
			assert.Equal(t, wantLast[i], u.Value, "batch %d", i)
			require.Len(t, b.Preconditions, 1, "the high-water guard only")
			if i == 0 {
				assert.Equal(t, store.MustBeAbsent, b.Preconditions[0].Op)
			} else {
				assert.Equal(t, store.MustEqual, b.Preconditions[0].Op)
			}
		}
		assert.Equal(t, uint64(10), e.highWater(t, ta))
		assert.Equal(t, string([]byte{9}), e.get(t, ta, "k\x00"))
		assert.Empty(t, e.queued(t))
	})
}

// Reference: rows at or below the target's mark are duplicates: counted
// as delivered, deleted from the source, never applied again.
func TestDuplicatesBelowTheHighWaterMarkAreSkippedAndCleanedUp(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "stale1"), put(tb, "k", "b1"), put(ta, "k", "stale3"), put(ta, "k", "a4"), put(ta, "j", "a5"))
		// An earlier fire applied rows 1..3 to ta but its checkpoint never
		// landed.
		e.setHighWater(t, ta, 3)
		e.apply(t, ta, store.NewBatch().Put(store.Key("k"), store.Value("applied3")))

		e.run(t)

		e.requireAppliedOnce(t, ta, 4, 5)
		e.requireAppliedOnce(t, tb, 2)
		assert.Equal(t, "a4", e.get(t, ta, "k"))
		assert.Equal(t, uint64(5), e.highWater(t, ta))
		assert.Empty(t, e.queued(t), "duplicates are deleted with the delivered rows")
		_, ok := e.timerDue(t)
		assert.False(t, ok)
	})
}

// Reference: a group made only of duplicates is cleaned up without an
// apply, and without taking a target slot of the budget.
func TestDuplicateOnlyGroupsTakeNoTargetSlot(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "a1"), put(tb, "k", "b2"), put(tc, "k", "c3"))
		e.setHighWater(t, ta, 1)
		e.setHighWater(t, tb, 2)
		applies := countApplies(e.target)

		e.run(t)

		assert.Equal(t, 1, applies(), "only tc is applied")
		e.requireAppliedOnce(t, tc, 3)
		assert.Equal(t, "c3", e.get(t, tc, "k"))
		assert.Empty(t, e.queued(t))
	}, withBudget(relay.Budget{MaxTargets: 1}))
}

// Reference: the backlog gauge is an upper bound from the queue's head
// (os - first + 1) and the lag counter counts fires that saw a row older
// than the lag bound, both labelled with the source's kind.
func TestBacklogGaugeAndLagCounterLabelledBySourceKind(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		label := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"}
		old := e.now().Add(-relay.DefaultLagBound - time.Millisecond)
		e.queueAt(t, old, put(ta, "k", "1"), put(ta, "k", "2"))
		var rows []row
		for range 8 {
			rows = append(rows, put(tb, "k", "v"))
		}
		e.queue(t, rows...)

		e.step(t)
		v, ok := e.metrics.GaugeValue(telemetry.MetricRelayBacklogRows, label)
		require.True(t, ok)
		assert.Equal(t, 10.0, v, "read before the checkpoint: rows 1..10")
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricRelayLagExceeded, label), "once per fire")
		assert.Contains(t, e.logs.String(), "outbox relay lag bound exceeded")

		e.step(t)
		v, _ = e.metrics.GaugeValue(telemetry.MetricRelayBacklogRows, label)
		assert.Equal(t, 6.0, v, "rows 5..10")
		assert.Equal(t, uint64(1), e.metrics.Counter(telemetry.MetricRelayLagExceeded, label), "fresh rows only")
	}, withBudget(relay.Budget{MaxRows: 1}))
}

// The handler's own Metrics, when set, replace the run's.
func TestHandlerMetricsReplaceTheRuns(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		own := telemetry.NewRecorder()
		e.configure(t, func(c *relay.HandlerConfig) { c.Metrics = own })
		e.queue(t, put(ta, "k", "v"))
		e.run(t)
		v, ok := own.GaugeValue(telemetry.MetricRelayBacklogRows, telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"})
		assert.True(t, ok)
		assert.Equal(t, 1.0, v)
		_, ok = e.metrics.GaugeValue(telemetry.MetricRelayBacklogRows, telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"})
		assert.False(t, ok)
	})
}

// A source must be addressable: a nil source partition, one whose
// identity does not encode, or one over the high-water key's bound is
// store.ErrInvalid, as is a handler without a target store. Any other
// partition, of any schema, is a source (TestRelaysBetweenAServicesOwnPartitions).
func TestSourceMustBeAddressable(t *testing.T) {
	e := newEnv(t, testengine.Memory.Open)
	long, err := store.ParseIdentity(append(append([]byte{0x02}, bytes.Repeat([]byte{'n'}, gen.MaxRelayHighWaterKeySource)...), 0x00))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		p    store.Partition
	}{
		{"nil", nil},
		{"zero identity", store.Identity{}},
		{"invalid partition", refdomain.NamespacePartition{}},
		{"identity over the bound", long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &timers.Ctx{Store: e.source, Partition: tc.p, Now: e.now()}
			_, err := e.h.Fire(e.ctx, c, timers.DueTimer{DueAt: e.now()})
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
	_, err = new(relay.Handler).Fire(e.ctx, &timers.Ctx{Store: e.source, Partition: source}, timers.DueTimer{})
	require.ErrorIs(t, err, store.ErrInvalid, "no target store")
}

// A fire with nothing queued completes the timer, guarded by the absent
// sequence.
func TestEmptyQueueIsDoneGuardedByTheSequence(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		c := &timers.Ctx{Store: e.source, Partition: source, Now: e.now()}
		fired, err := e.h.Fire(e.ctx, c, timers.DueTimer{DueAt: e.now()})
		require.NoError(t, err)
		done, ok := fired.(timers.Done)
		require.True(t, ok, "%T", fired)
		// The checkpoint rides on Done: the first scan state, guarded as
		// absent, and the guard on the absent sequence.
		scanKey := store.Key(gen.AppendRelayScanKey(nil))
		state, err := gen.EncodeRelayScanV1(gen.RelayScanV1{})
		require.NoError(t, err)
		assert.Equal(t, []store.Precondition{store.Absent(scanKey), store.Absent(store.Key(gen.AppendOutboxSequenceKey(nil)))}, done.Batch.Preconditions)
		assert.Equal(t, []store.Write{store.Put(scanKey, state)}, done.Batch.Writes)
	})
}

func (e *env) apply(t testing.TB, p store.Partition, b *store.Batch) {
	t.Helper()
	out, err := e.tinner.Apply(e.ctx, p, b)
	require.NoError(t, err)
	require.True(t, out.Committed(), "%v", out)
}
