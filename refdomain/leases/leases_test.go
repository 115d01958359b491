package leases_test

import (
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

func ptr[T any](v T) *T { return &v }

// TestCheckRecoveryAppliesLeaseRecoverysRule: the table is recovering
// exactly while a LeaseRecovery with a recovery time (not a first
// activation) has no reconciliation later than that time.
func TestCheckRecoveryAppliesLeaseRecoverysRule(t *testing.T) {
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
		{name: "recovery never reconciled", recovery: recovery(t, 100), recovering: true, says: "coordinator(default) recovered at 100 ms and was never reconciled"},
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

// TestMarkReconciledRefusesAFirstActivation: a marker of a first
// activation has no recovery to reconcile, and nothing is written.
func TestMarkReconciledRefusesAFirstActivation(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recoveryOf(t, refdomain.LeaseRecovery{ActivationOnly: ptr(true), ResumedAtMs: 100})))
	err := table.MarkReconciled(e.ctx, e.s, coordinator, t0.Add(200*time.Millisecond))
	requireErr(t, err, []error{store.ErrInvalid}, "coordinator(default)'s lease recovery marker records a first activation")
	if _, ok, err := e.s.Inner().Get(e.ctx, coordinator, reconcileKey); err != nil || ok {
		t.Fatalf("reconcile marker present %v (%v)", ok, err)
	}
}

// TestLeaseMarkersLiveInCoordinatorOrNamespacePartitions: CheckRecovery
// and MarkReconciled serve a namespace partition's markers too, and
// refuse every other partition kind before any I/O.
func TestLeaseMarkersLiveInCoordinatorOrNamespacePartitions(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	ns := refdomain.NamespacePartition{NS: coordinator.NS}
	e.apply(t, ns, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
	_, err := table.CheckRecovery(e.ctx, e.s, ns, nil)
	requireErr(t, err, []error{watermark.ErrRecovering}, "namespace(default) recovered at 100 ms")
	if err := table.MarkReconciled(e.ctx, e.s, ns, t0.Add(150*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := table.CheckRecovery(e.ctx, e.s, ns, nil); err != nil {
		t.Fatalf("after reconciliation: %v", err)
	}
	if _, err := table.CheckRecovery(e.ctx, e.s, coordinator, nil); err != nil {
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
			_, err := table.CheckRecovery(e.ctx, e.s, p, nil)
			requireErr(t, err, []error{store.ErrInvalid}, "a lease recovery check needs a coordinator partition or one TableConfig.HoldsMarkers admits, not "+store.PartitionName(p))
			err = table.MarkReconciled(e.ctx, e.s, p, t0.Add(time.Millisecond))
			requireErr(t, err, []error{store.ErrInvalid}, "a lease reconciliation needs a coordinator partition or one TableConfig.HoldsMarkers admits")
		})
	}
	if calls() != before {
		t.Fatal("a refused partition kind reached the store")
	}
}

// TestDecodeCheckpointTakesCoordinatorPartitionsOnly: a checkpoint names
// its coordinator by identity; one of another partition kind of the
// reference domain, or of another schema, is refused.
func TestDecodeCheckpointTakesCoordinatorPartitionsOnly(t *testing.T) {
	identity := func(p store.Partition) []byte {
		b, err := p.AppendTuple(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name        string
		coordinator []byte
		says        string
	}{
		{"a namespace partition", identity(refdomain.NamespacePartition{NS: coordinator.NS}), "names namespace(default), not a coordinator partition"},
		{"a ref partition", identity(source(1)), "not a coordinator partition"},
		{"another schema's", tuple.AppendUint(tuple.AppendString(nil, "shop"), 3), `coordinator identity: `},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := gen.EncodeWatermarkCheckpoint(gen.WatermarkCheckpoint{Coordinator: c.coordinator, CeilingMs: 100, MinimumMs: 40, Cursor: []byte{1}})
			if err != nil {
				t.Fatal(err)
			}
			cp, err := table.DecodeCheckpoint(b)
			if cp != nil {
				t.Fatalf("DecodeCheckpoint accepted a checkpoint of %s", c.name)
			}
			requireErr(t, err, []error{watermark.ErrCheckpoint, store.ErrInvalid}, c.says)
		})
	}
}

// TestActiveShardsAreRefShardsOfTheCoordinatorsNamespace: each lease row
// lists as the ref partition of its repository and ref, in the
// coordinator's namespace, whatever other coordinators lease.
func TestActiveShardsAreRefShardsOfTheCoordinatorsNamespace(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 3, 40, 200)
	other := refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("another")}
	e.apply(t, other, store.NewBatch().Put(leaseKey(t, 4), lease(t, 40, 200)))
	page, err := table.ActiveShards(e.ctx, e.s, coordinator, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Shards) != 1 || page.Shards[0] != source(3) || page.Next != nil {
		t.Fatalf("shards %v (next %x); want [%s] alone", page.Shards, page.Next, source(3))
	}
	page, err = table.ActiveShards(e.ctx, e.s, other, nil, 10)
	want := refdomain.RefPartition{NS: other.NS, Repo: repo(4), ShardRef: mainRef}
	if err != nil || len(page.Shards) != 1 || page.Shards[0] != want {
		t.Fatalf("shards of %s: %v, %v; want [%s]", other, page.Shards, err, want)
	}
}
