package watermark_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// TestCheckRecoveryAppliesTheRecoveryTimeRule: the table is recovering
// exactly while a marker with a recovery time (by the table's rule: not
// an initial start) has no reconciliation later than that time.
func TestCheckRecoveryAppliesTheRecoveryTimeRule(t *testing.T) {
	cases := []struct {
		name       string
		recovery   store.Value
		reconcile  store.Value
		recovering bool
		says       string
	}{
		{name: "no markers"},
		{name: "reconcile marker alone", reconcile: reconciled(t, 5)},
		{name: "initial start, never reconciled", recovery: recoveryOf(t, dispatchgen.RestoreV1{Initial: true, RestoredAtMs: 100})},
		{name: "recovery never reconciled", recovery: recovery(t, 100), recovering: true, says: "dispatcher(north) recovered at 100 ms and was never reconciled"},
		{name: "recovery at the epoch, never reconciled", recovery: recovery(t, 0), recovering: true, says: "recovered at 0 ms and was never reconciled"},
		{name: "reconciled before the recovery", recovery: recovery(t, 100), reconcile: reconciled(t, 99), recovering: true, says: "recovered at 100 ms, last reconciled at 99 ms"},
		{name: "reconciled at the recovery time", recovery: recovery(t, 100), reconcile: reconciled(t, 100), recovering: true, says: "last reconciled at 100 ms"},
		{name: "reconciled after the recovery", recovery: recovery(t, 100), reconcile: reconciled(t, 101)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			b := store.NewBatch().Put(store.Key("other row"), store.Value("x"))
			if c.recovery != nil {
				b.Put(recoveryKey, c.recovery)
			}
			if c.reconcile != nil {
				b.Put(reconcileKey, c.reconcile)
			}
			e.apply(t, coordinator, b)
			g, err := table.CheckRecovery(e.ctx, e.s, coordinator, nil)
			if c.recovering {
				requireErr(t, err, []error{watermark.ErrRecovering}, c.says)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (watermark.Generation{Recovery: c.recovery, Reconcile: c.reconcile}); !g.Equal(want) {
				t.Fatalf("generation %+v; want %+v", g, want)
			}
		})
	}
}

// TestCheckRecoveryFailsClosedOnCorruptMarkers: a marker that does not
// decode is corrupt data, never taken as absent.
func TestCheckRecoveryFailsClosedOnCorruptMarkers(t *testing.T) {
	cases := []struct {
		name string
		b    *store.Batch
		says string
	}{
		{"recovery marker", store.NewBatch().Put(recoveryKey, store.Value("corrupt marker")), "lease recovery marker of dispatcher(north)"},
		{"empty recovery marker", store.NewBatch().Put(recoveryKey, store.Value{}), "lease recovery marker"},
		{"reconcile marker of a recovery", store.NewBatch().Put(recoveryKey, recovery(t, 100)).Put(reconcileKey, store.Value{1, 2}), "lease reconcile marker of dispatcher(north)"},
		{"reconcile marker alone", store.NewBatch().Put(reconcileKey, store.Value{1, 2}), "lease reconcile marker of dispatcher(north)"},
		{"reconcile marker of an initial start", store.NewBatch().Put(recoveryKey, recoveryOf(t, dispatchgen.RestoreV1{Initial: true, RestoredAtMs: 100})).Put(reconcileKey, store.Value("corrupt")), "lease reconcile marker of dispatcher(north)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			e.apply(t, coordinator, c.b)
			_, err := table.CheckRecovery(e.ctx, e.s, coordinator, nil)
			requireErr(t, err, []error{store.ErrCorrupt}, c.says)
			// Nor does a scan start over it: a checkpoint carrying the
			// corrupt marker would be one DecodeCheckpoint refuses.
			_, _, err = table.Step(e.ctx, e.s, coordinator, t0.Add(time.Second), nil, 1)
			requireErr(t, err, []error{store.ErrCorrupt}, c.says)
		})
	}
}

// TestCheckRecoveryComparesTheExpectedGeneration: with an expected
// Generation, any difference fails with ErrGenerationChanged, before
// decoding and before the recovery rule.
func TestCheckRecoveryComparesTheExpectedGeneration(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 100)).Put(reconcileKey, reconciled(t, 101)))
	current := watermark.Generation{Recovery: recovery(t, 100), Reconcile: reconciled(t, 101)}
	if _, err := table.CheckRecovery(e.ctx, e.s, coordinator, &current); err != nil {
		t.Fatalf("the same generation: %v", err)
	}
	for name, c := range map[string]struct {
		expected watermark.Generation
		was      string
	}{
		"none":                       {watermark.Generation{}, "{recovery absent, reconcile absent}"},
		"recovery alone":             {watermark.Generation{Recovery: current.Recovery}, "{recovery at 100 ms, reconcile absent}"},
		"another recovery":           {watermark.Generation{Recovery: recovery(t, 50), Reconcile: current.Reconcile}, "{recovery at 50 ms, reconcile at 101 ms}"},
		"another reconciliation":     {watermark.Generation{Recovery: current.Recovery, Reconcile: reconciled(t, 102)}, "{recovery at 100 ms, reconcile at 102 ms}"},
		"an initial start":           {watermark.Generation{Recovery: recoveryOf(t, dispatchgen.RestoreV1{Initial: true}), Reconcile: current.Reconcile}, "{recovery first activation, reconcile at 101 ms}"},
		"undecodable expected bytes": {watermark.Generation{Recovery: store.Value("x"), Reconcile: current.Reconcile}, "{recovery 1 undecodable bytes, reconcile at 101 ms}"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := table.CheckRecovery(e.ctx, e.s, coordinator, &c.expected)
			requireErr(t, err, []error{watermark.ErrGenerationChanged, store.ErrInvalid}, "started with "+c.was, "now {recovery at 100 ms, reconcile at 101 ms}")
		})
	}
}

// TestLeaseMarkersLiveInCoordinatorPartitions: CheckRecovery and
// MarkReconciled serve the coordinator partitions, and refuse every other
// partition before any I/O, unless TableConfig.HoldsMarkers admits it.
func TestLeaseMarkersLiveInCoordinatorPartitions(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	calls := func() int {
		return e.s.Calls(storetest.MethodGet) + e.s.Calls(storetest.MethodGetMany) + e.s.Calls(storetest.MethodApply)
	}
	// The coordinator's own identity, as a store.Identity, is not a
	// coordinator partition: the table knows its partitions by type.
	asIdentity, err := store.IdentityOf(coordinator)
	if err != nil {
		t.Fatal(err)
	}
	before := calls()
	for _, p := range []store.Partition{queue(0), asIdentity, nil} {
		t.Run(store.PartitionName(p), func(t *testing.T) {
			_, err := table.CheckRecovery(e.ctx, e.s, p, nil)
			requireErr(t, err, []error{store.ErrInvalid}, "a lease recovery check needs a coordinator partition, not "+store.PartitionName(p))
			err = table.MarkReconciled(e.ctx, e.s, p, t0.Add(time.Millisecond))
			requireErr(t, err, []error{store.ErrInvalid}, "a lease reconciliation needs a coordinator partition, not "+store.PartitionName(p))
		})
	}
	if calls() != before {
		t.Fatal("a refused partition reached the store")
	}

	// A table whose queues hold markers of their own serves them, apart
	// from the coordinator's.
	c := tableConfig()
	c.HoldsMarkers = func(p store.Partition) bool { _, ok := p.(dispatchgen.QueuePartition); return ok }
	queues, err := watermark.NewTable(c)
	if err != nil {
		t.Fatal(err)
	}
	e.apply(t, queue(0), store.NewBatch().Put(recoveryKey, recovery(t, 100)))
	_, err = queues.CheckRecovery(e.ctx, e.s, queue(0), nil)
	requireErr(t, err, []error{watermark.ErrRecovering}, "queue(north,0) recovered at 100 ms")
	if err := queues.MarkReconciled(e.ctx, e.s, queue(0), t0.Add(150*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := queues.CheckRecovery(e.ctx, e.s, queue(0), nil); err != nil {
		t.Fatalf("after reconciliation: %v", err)
	}
	if _, err := queues.CheckRecovery(e.ctx, e.s, coordinator, nil); err != nil {
		t.Fatalf("the coordinator has markers of its own: %v", err)
	}
	_, err = queues.CheckRecovery(e.ctx, e.s, asIdentity, nil)
	requireErr(t, err, []error{store.ErrInvalid}, "needs a coordinator partition or one TableConfig.HoldsMarkers admits, not ")
}

// TestMarkReconciled: it writes max(at, recovery time + 1ms), and refuses
// what has nothing to reconcile.
func TestMarkReconciled(t *testing.T) {
	cases := []struct {
		name     string
		recovery store.Value // nil: none
		at       time.Time
		want     uint64 // the reconcile marker written (stored milliseconds), when no error
		errs     []error
		says     string
	}{
		{name: "at the given time, after the recovery", recovery: recovery(t, 100), at: t0.Add(150 * time.Millisecond), want: 150},
		{name: "a time before the recovery is moved after it", recovery: recovery(t, 100), at: t0.Add(50 * time.Millisecond), want: 101},
		{name: "the recovery time itself is moved after it", recovery: recovery(t, 100), at: t0.Add(100 * time.Millisecond), want: 101},
		{name: "no recovery marker", errs: []error{store.ErrInvalid}, says: "has no lease recovery to reconcile"},
		{name: "initial start", recovery: recoveryOf(t, dispatchgen.RestoreV1{Initial: true, RestoredAtMs: 100}), at: t0.Add(200 * time.Millisecond),
			errs: []error{store.ErrInvalid}, says: "records a first activation"},
		{name: "recovery time without successor", recovery: recovery(t, math.MaxUint64), at: t0.Add(200 * time.Millisecond),
			errs: []error{store.ErrInvalid}, says: "has no successor"},
		{name: "corrupt recovery marker", recovery: store.Value("corrupt marker"), at: t0.Add(200 * time.Millisecond),
			errs: []error{store.ErrCorrupt}, says: "lease recovery marker of dispatcher(north)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			if c.recovery != nil {
				e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, c.recovery))
			}
			err := table.MarkReconciled(e.ctx, e.s, coordinator, c.at)
			stamp, ok, rerr := e.s.Inner().Get(e.ctx, coordinator, reconcileKey)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if c.errs != nil {
				requireErr(t, err, c.errs, c.says)
				if ok {
					t.Fatal("a refused reconciliation wrote its marker")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, derr := gen.DecodeU64Value(stamp)
			if !ok || derr != nil || got.Value != c.want {
				t.Fatalf("reconcile marker %v (present %v, %v); want %d", got.Value, ok, derr, c.want)
			}
			if _, err := table.CheckRecovery(e.ctx, e.s, coordinator, nil); err != nil {
				t.Fatalf("reconciled table: %v", err)
			}
		})
	}
}

// TestMarkReconciledLosesToANewRecovery: a recovery written between the
// marker's read and the guarded write defeats the write, which writes
// nothing; the new recovery is still recovering.
func TestMarkReconciledLosesToANewRecovery(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
		raced := false
		e.s.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
			if raced {
				return nil
			}
			raced = true
			out, err := e.s.Inner().Apply(ctx, p, store.NewBatch().Put(recoveryKey, recovery(t, 300)))
			if err == nil && !out.Committed() {
				t.Errorf("inject recovery: %v", out)
			}
			return err
		})
		err := table.MarkReconciled(e.ctx, e.s, coordinator, t0.Add(200*time.Millisecond))
		requireErr(t, err, []error{watermark.ErrRecoveryRaced, store.ErrPreconditionFailed}, "dispatcher(north)")
		if _, ok, err := e.s.Inner().Get(e.ctx, coordinator, reconcileKey); err != nil || ok {
			t.Fatalf("reconcile marker present %v (%v) after a lost race", ok, err)
		}
		_, err = table.CheckRecovery(e.ctx, e.s, coordinator, nil)
		requireErr(t, err, []error{watermark.ErrRecovering}, "recovered at 300 ms")
	})
}

// TestAResumedStepRefusesANewGeneration: a recovery or reconciliation
// between two steps of a scan fails the resumed step, whatever the new
// markers say, and a corrupt marker is such a change too.
func TestAResumedStepRefusesANewGeneration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 0, 40, 200)
		e.putLease(t, 1, 90, 200)
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 90)).Put(reconcileKey, reconciled(t, 91)))
		cp := carried(t, e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1))
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 110)).Put(reconcileKey, reconciled(t, 111)))
		_, _, err := e.step(t0.Add(120*time.Millisecond), cp, 1)
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged},
			"started with {recovery at 90 ms, reconcile at 91 ms}", "now {recovery at 110 ms, reconcile at 111 ms}")
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, store.Value("corrupt marker")))
		_, _, err = e.step(t0.Add(150*time.Millisecond), cp, 1)
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged}, "now {recovery 14 undecodable bytes")
	})
}

// TestALastPageRechecksTheMarkers: a recovery that lands while the last
// page is read fails the step: its result would mix two tables.
func TestALastPageRechecksTheMarkers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 0, 40, 200)
		recovered := false
		e.s.AfterRead(func(ctx context.Context, c storetest.Call) error {
			if c.Method != storetest.MethodScan || recovered {
				return nil
			}
			recovered = true
			out, err := e.s.Inner().Apply(ctx, c.Partition, store.NewBatch().Put(recoveryKey, recovery(t, 110)))
			if err == nil && !out.Committed() {
				t.Errorf("inject recovery: %v", out)
			}
			return err
		})
		next, value, err := e.step(t0.Add(100*time.Millisecond), nil, 10)
		if !recovered || next != nil || !value.IsZero() {
			t.Fatalf("step: recovery injected %v, checkpoint %v, watermark %v; want the last page to fail", recovered, next, value)
		}
		requireErr(t, err, []error{store.ErrInvalid, watermark.ErrGenerationChanged}, "started with {recovery absent, reconcile absent}", "now {recovery at 110 ms")
	})
}
