package watermark_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

func ptr[T any](v T) *T { return &v }

// TestCheckRecoveryAppliesTheRecoveryTimeRule: the table is recovering
// exactly while a marker with a recovery time (not a first activation)
// has no reconciliation later than that time.
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
		{name: "first activation, never reconciled", recovery: recoveryOf(t, refdomain.LeaseRecovery{ActivationOnly: ptr(true), ResumedAtMs: 100})},
		{name: "activation flag false", recovery: recoveryOf(t, refdomain.LeaseRecovery{ActivationOnly: ptr(false), ResumedAtMs: 100}), recovering: true, says: "recovered at 100 ms and was never reconciled"},
		{name: "recovery never reconciled", recovery: recovery(t, 100), recovering: true, says: "recovered at 100 ms and was never reconciled"},
		{name: "reconciled before the recovery", recovery: recovery(t, 100), reconcile: reconciled(t, 99), recovering: true, says: "recovered at 100 ms, last reconciled at 99 ms"},
		{name: "reconciled at the recovery time", recovery: recovery(t, 100), reconcile: reconciled(t, 100), recovering: true, says: "last reconciled at 100 ms"},
		{name: "reconciled after the recovery", recovery: recovery(t, 100), reconcile: reconciled(t, 101)},
		{name: "recovery with authority fields, reconciled", recovery: recoveryOf(t, refdomain.LeaseRecovery{AuthorityFence: ptr[uint64](3), AuthorityReady: ptr[uint64](4), ResumedAtMs: 100}), reconcile: reconciled(t, 200)},
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
			g, err := watermark.CheckRecovery(e.ctx, e.s, coordinator, nil)
			if c.recovering {
				requireErr(t, err, []error{watermark.ErrRecovering}, c.says)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (watermark.Generation{Recovery: c.recovery, Reconcile: c.reconcile}); !g.Equal(want) {
				t.Fatalf("generation %s; want %s", g, want)
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
		{"recovery marker", store.NewBatch().Put(recoveryKey, store.Value("corrupt marker")), "lease recovery marker of coordinator(default)"},
		{"empty recovery marker", store.NewBatch().Put(recoveryKey, store.Value{}), "lease recovery marker"},
		{"reconcile marker of a recovery", store.NewBatch().Put(recoveryKey, recovery(t, 100)).Put(reconcileKey, store.Value{1, 2}), "lease reconcile marker of coordinator(default)"},
		{"reconcile marker alone", store.NewBatch().Put(reconcileKey, store.Value{1, 2}), "lease reconcile marker of coordinator(default)"},
		{"reconcile marker of a first activation", store.NewBatch().Put(recoveryKey, recoveryOf(t, refdomain.LeaseRecovery{ActivationOnly: ptr(true), ResumedAtMs: 100})).Put(reconcileKey, store.Value("corrupt")), "lease reconcile marker of coordinator(default)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			e.apply(t, coordinator, c.b)
			_, err := watermark.CheckRecovery(e.ctx, e.s, coordinator, nil)
			requireErr(t, err, []error{store.ErrCorrupt}, c.says)
			// Nor does a scan start over it: a checkpoint carrying the
			// corrupt marker would be one Decode refuses.
			_, _, err = watermark.Step(e.ctx, e.s, coordinator, t0.Add(time.Second), nil, 1)
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
	if _, err := watermark.CheckRecovery(e.ctx, e.s, coordinator, &current); err != nil {
		t.Fatalf("the same generation: %v", err)
	}
	for name, expected := range map[string]watermark.Generation{
		"none":                       {},
		"recovery alone":             {Recovery: current.Recovery},
		"another recovery":           {Recovery: recovery(t, 50), Reconcile: current.Reconcile},
		"another reconciliation":     {Recovery: current.Recovery, Reconcile: reconciled(t, 102)},
		"undecodable expected bytes": {Recovery: store.Value("x"), Reconcile: current.Reconcile},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := watermark.CheckRecovery(e.ctx, e.s, coordinator, &expected)
			requireErr(t, err, []error{watermark.ErrGenerationChanged, store.ErrInvalid}, "now {recovery at 100 ms, reconcile at 101 ms}")
		})
	}
}

// TestLeaseMarkersLiveInCoordinatorOrNamespacePartitions: CheckRecovery
// and MarkLeaseTableReconciled serve a namespace partition's markers too,
// and refuse every other partition kind before any I/O.
func TestLeaseMarkersLiveInCoordinatorOrNamespacePartitions(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	ns := refdomain.NamespacePartition{NS: coordinator.NS}
	e.apply(t, ns, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
	_, err := watermark.CheckRecovery(e.ctx, e.s, ns, nil)
	requireErr(t, err, []error{watermark.ErrRecovering}, "namespace(default) recovered at 100 ms")
	if err := watermark.MarkLeaseTableReconciled(e.ctx, e.s, ns, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := watermark.CheckRecovery(e.ctx, e.s, ns, nil); err != nil {
		t.Fatalf("after reconciliation: %v", err)
	}
	if _, err := watermark.CheckRecovery(e.ctx, e.s, coordinator, nil); err != nil {
		t.Fatalf("the coordinator has markers of its own: %v", err)
	}

	calls := func() int {
		return e.s.Calls(storetest.MethodGet) + e.s.Calls(storetest.MethodGetMany) + e.s.Calls(storetest.MethodApply)
	}
	before := calls()
	for _, p := range []refdomain.Partition{
		source(0),
		refdomain.RepoIndexPartition{NS: coordinator.NS, Repo: repo(0)},
		refdomain.RefIndexPartition{NS: coordinator.NS, Repo: repo(0), ShardRef: mainRef},
		refdomain.ContentShardPartition{NS: coordinator.NS, Shard: 1},
		nil,
	} {
		t.Run(store.PartitionName(p), func(t *testing.T) {
			_, err := watermark.CheckRecovery(e.ctx, e.s, p, nil)
			requireErr(t, err, []error{store.ErrInvalid}, "a lease recovery check needs a coordinator or namespace partition, not "+store.PartitionName(p))
			err = watermark.MarkLeaseTableReconciled(e.ctx, e.s, p, t0.Add(time.Millisecond))
			requireErr(t, err, []error{store.ErrInvalid}, "a lease reconciliation needs a coordinator or namespace partition")
		})
	}
	if calls() != before {
		t.Fatal("a refused partition kind reached the store")
	}
}

// TestMarkLeaseTableReconciled: it writes max(at, recovery time + 1ms),
// and refuses what has nothing to reconcile.
func TestMarkLeaseTableReconciled(t *testing.T) {
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
		{name: "first activation", recovery: recoveryOf(t, refdomain.LeaseRecovery{ActivationOnly: ptr(true), ResumedAtMs: 100}), at: t0.Add(200 * time.Millisecond),
			errs: []error{store.ErrInvalid}, says: "records a first activation"},
		{name: "recovery time without successor", recovery: recovery(t, math.MaxUint64), at: t0.Add(200 * time.Millisecond),
			errs: []error{store.ErrInvalid}, says: "has no successor"},
		{name: "corrupt recovery marker", recovery: store.Value("corrupt marker"), at: t0.Add(200 * time.Millisecond),
			errs: []error{store.ErrCorrupt}, says: "lease recovery marker of coordinator(default)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			if c.recovery != nil {
				e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, c.recovery))
			}
			err := watermark.MarkLeaseTableReconciled(e.ctx, e.s, coordinator, c.at)
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
			if _, err := watermark.CheckRecovery(e.ctx, e.s, coordinator, nil); err != nil {
				t.Fatalf("reconciled table: %v", err)
			}
		})
	}
}

// TestMarkLeaseTableReconciledLosesToANewRecovery: a recovery written
// between the marker's read and the guarded write defeats the write,
// which writes nothing; the new recovery is still recovering.
func TestMarkLeaseTableReconciledLosesToANewRecovery(t *testing.T) {
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
		err := watermark.MarkLeaseTableReconciled(e.ctx, e.s, coordinator, t0.Add(200*time.Millisecond))
		requireErr(t, err, []error{watermark.ErrRecoveryRaced, store.ErrPreconditionFailed}, "coordinator(default)")
		if _, ok, err := e.s.Inner().Get(e.ctx, coordinator, reconcileKey); err != nil || ok {
			t.Fatalf("reconcile marker present %v (%v) after a lost race", ok, err)
		}
		_, err = watermark.CheckRecovery(e.ctx, e.s, coordinator, nil)
		requireErr(t, err, []error{watermark.ErrRecovering}, "recovered at 300 ms")
	})
}
