package watermark_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/watermark"
)

type dispatchConfig = watermark.TableConfig[dispatchgen.DispatcherPartition, dispatchgen.QueueLeaseKey, dispatchgen.QueueLeaseV1, dispatchgen.RestoreV1, dispatchgen.QueuePartition]

// TestNewTableRefusesAnIncompleteDescription: every required field, a
// lease range that holds nothing, and marker keys that a scan of the
// lease range would read or that collide are refused, naming the field.
func TestNewTableRefusesAnIncompleteDescription(t *testing.T) {
	start, end := dispatchgen.ClassRange(dispatchgen.TagQueueLeaseKey)
	cases := []struct {
		name   string
		change func(c *dispatchConfig)
		says   string
	}{
		{"ParsePartition", func(c *dispatchConfig) { c.ParsePartition = nil }, "TableConfig.ParsePartition is required"},
		{"ParseLeaseKey", func(c *dispatchConfig) { c.ParseLeaseKey = nil }, "TableConfig.ParseLeaseKey is required"},
		{"DecodeLease", func(c *dispatchConfig) { c.DecodeLease = nil }, "TableConfig.DecodeLease is required"},
		{"RelayWatermark", func(c *dispatchConfig) { c.RelayWatermark = nil }, "TableConfig.RelayWatermark is required"},
		{"Shard", func(c *dispatchConfig) { c.Shard = nil }, "TableConfig.Shard is required"},
		{"RecoveryKey", func(c *dispatchConfig) { c.RecoveryKey = nil }, "TableConfig.RecoveryKey is required"},
		{"DecodeRecovery", func(c *dispatchConfig) { c.DecodeRecovery = nil }, "TableConfig.DecodeRecovery is required"},
		{"RecoveryTime", func(c *dispatchConfig) { c.RecoveryTime = nil }, "TableConfig.RecoveryTime is required"},
		{"ReconcileKey", func(c *dispatchConfig) { c.ReconcileKey = store.Key{} }, "TableConfig.ReconcileKey is required"},
		{"no lease range", func(c *dispatchConfig) { c.LeaseStart, c.LeaseEnd = nil, nil }, "TableConfig.LeaseStart"},
		{"an inverted lease range", func(c *dispatchConfig) { c.LeaseStart, c.LeaseEnd = end, start }, "an empty lease range"},
		{"recovery marker in the lease range", func(c *dispatchConfig) { c.RecoveryKey = leaseKey(3) }, "TableConfig.RecoveryKey"},
		{"reconcile marker at the range's start", func(c *dispatchConfig) { c.ReconcileKey = start }, "TableConfig.ReconcileKey"},
		{"one key for both markers", func(c *dispatchConfig) { c.ReconcileKey = c.RecoveryKey }, "TableConfig.ReconcileKey"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tableConfig()
			c.change(&cfg)
			tbl, err := watermark.NewTable(cfg)
			if tbl != nil {
				t.Fatal("NewTable built a table")
			}
			requireErr(t, err, []error{store.ErrInvalid}, c.says)
		})
	}
	// The reconcile marker at the range's end lies outside it.
	cfg := tableConfig()
	cfg.ReconcileKey = end
	if _, err := watermark.NewTable(cfg); err != nil {
		t.Fatalf("a marker at the lease range's end: %v", err)
	}
}

// TestNewTableKeepsItsOwnKeys: changing the description's keys after
// NewTable changes nothing the table reads or writes.
func TestNewTableKeepsItsOwnKeys(t *testing.T) {
	cfg := tableConfig()
	tbl, err := watermark.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{cfg.LeaseStart, cfg.LeaseEnd, cfg.RecoveryKey, cfg.ReconcileKey} {
		for i := range k {
			k[i] = 0xff
		}
	}
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 0, 40, 200)
	e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
	_, err = tbl.Watermark(e.ctx, e.s, coordinator, t0.Add(time.Second))
	requireErr(t, err, []error{watermark.ErrRecovering})
	if err := tbl.MarkReconciled(e.ctx, e.s, coordinator, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.s.Inner().Get(e.ctx, coordinator, reconcileKey); err != nil || !ok {
		t.Fatalf("reconcile marker at the table's key: present %v, %v", ok, err)
	}
	if got, err := tbl.Watermark(e.ctx, e.s, coordinator, t0.Add(time.Second)); err != nil || !got.Equal(t0.Add(40*time.Millisecond)) {
		t.Fatalf("watermark %v, %v; want 40ms after the epoch", got, err)
	}
}

// TestDecodersThatDoNotSayCorruptStillFailClosed: a description whose
// decoders return errors of their own (not the generated ones, which wrap
// store.ErrCorrupt) still fails every read of bytes they refuse as
// corrupt data, never as invalid input and never skipped.
func TestDecodersThatDoNotSayCorruptStillFailClosed(t *testing.T) {
	refuse := errors.New("refused by the service's decoder")
	cases := []struct {
		name   string
		change func(c *dispatchConfig)
		says   string
	}{
		{"lease key", func(c *dispatchConfig) {
			c.ParseLeaseKey = func([]byte) (dispatchgen.QueueLeaseKey, error) { return dispatchgen.QueueLeaseKey{}, refuse }
		}, "lease table of dispatcher(north): refused"},
		{"lease", func(c *dispatchConfig) {
			c.DecodeLease = func([]byte) (dispatchgen.QueueLeaseV1, error) { return dispatchgen.QueueLeaseV1{}, refuse }
		}, "lease table of dispatcher(north), shard queue(north,0): refused"},
		{"recovery marker", func(c *dispatchConfig) {
			c.DecodeRecovery = func([]byte) (dispatchgen.RestoreV1, error) { return dispatchgen.RestoreV1{}, refuse }
		}, "lease recovery marker of dispatcher(north): refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tableConfig()
			c.change(&cfg)
			tbl, err := watermark.NewTable(cfg)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, testengine.Memory)
			e.putLease(t, 0, 40, 200)
			e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recoveryOf(t, dispatchgen.RestoreV1{Initial: true})))
			_, err = tbl.Watermark(e.ctx, e.s, coordinator, t0.Add(time.Second))
			requireErr(t, err, []error{store.ErrCorrupt, refuse}, c.says)
			if errors.Is(err, store.ErrInvalid) {
				t.Errorf("error %q wraps store.ErrInvalid: stored bytes are not the caller's input", err)
			}
			_, err = tbl.ActiveShards(e.ctx, e.s, coordinator, nil, 10)
			requireErr(t, err, []error{store.ErrCorrupt, refuse}, c.says)
		})
	}
}

// TestTimesBeforeTheEpochInStoredRowsAreCorrupt: a relay watermark or a
// recovery time the description reads as before the Unix epoch cannot be
// stored as one: the row is corrupt, and the read fails closed.
func TestTimesBeforeTheEpochInStoredRowsAreCorrupt(t *testing.T) {
	before := time.Unix(0, 0).Add(-time.Hour)
	t.Run("relay watermark", func(t *testing.T) {
		cfg := tableConfig()
		cfg.RelayWatermark = func(l dispatchgen.QueueLeaseV1) time.Time {
			if l.RelayedThroughMs == 7 {
				return before
			}
			return store.DecodeTime(l.RelayedThroughMs)
		}
		tbl, err := watermark.NewTable(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, testengine.Memory)
		e.putLease(t, 0, 40, 200)
		e.putLease(t, 1, 7, 200)
		_, err = tbl.Watermark(e.ctx, e.s, coordinator, t0.Add(time.Second))
		requireErr(t, err, []error{store.ErrCorrupt}, "shard queue(north,1): relay watermark 1969-12-31T23:00:00Z before the Unix epoch")
	})
	t.Run("recovery time", func(t *testing.T) {
		cfg := tableConfig()
		cfg.RecoveryTime = func(dispatchgen.RestoreV1) (time.Time, bool) { return before, true }
		tbl, err := watermark.NewTable(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, testengine.Memory)
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
		_, err = tbl.CheckRecovery(e.ctx, e.s, coordinator, nil)
		requireErr(t, err, []error{store.ErrCorrupt}, "lease recovery marker of dispatcher(north): recovery time 1969-12-31T23:00:00Z before the Unix epoch")
		err = tbl.MarkReconciled(e.ctx, e.s, coordinator, t0.Add(time.Second))
		requireErr(t, err, []error{store.ErrCorrupt}, "recovery time 1969-12-31T23:00:00Z before the Unix epoch")
	})
}

// TestARelayWatermarkOfZeroIsTheZeroTime: a shard that has reported no
// relay watermark holds the table's watermark at the zero Time, before
// every commit.
func TestARelayWatermarkOfZeroIsTheZeroTime(t *testing.T) {
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 0, 40, 200)
	e.putLease(t, 1, 0, 200)
	got, err := table.Watermark(e.ctx, e.s, coordinator, t0.Add(time.Second))
	if err != nil || !got.IsZero() {
		t.Fatalf("watermark %v, %v; want the zero Time", got, err)
	}
}

// TestANilCoordinatorIsInvalid: a table whose coordinator type is an
// interface (here the schema's partition union) refuses a nil
// coordinator before any I/O, and never panics.
func TestANilCoordinatorIsInvalid(t *testing.T) {
	start, end := dispatchgen.ClassRange(dispatchgen.TagQueueLeaseKey)
	tbl, err := watermark.NewTable(watermark.TableConfig[dispatchgen.Partition, dispatchgen.QueueLeaseKey, dispatchgen.QueueLeaseV1, dispatchgen.RestoreV1, dispatchgen.QueuePartition]{
		ParsePartition: timers.PartitionParser(dispatchgen.ParsePartition),
		LeaseStart:     start,
		LeaseEnd:       end,
		ParseLeaseKey:  dispatchgen.ParseQueueLeaseKey,
		DecodeLease:    dispatchgen.DecodeQueueLeaseV1,
		RelayWatermark: func(l dispatchgen.QueueLeaseV1) time.Time { return store.DecodeTime(l.RelayedThroughMs) },
		Shard: func(_ dispatchgen.Partition, k dispatchgen.QueueLeaseKey) dispatchgen.QueuePartition {
			return dispatchgen.QueuePartition{Region: coordinator.Region, Queue: k.Queue}
		},
		RecoveryKey:    recoveryKey,
		DecodeRecovery: dispatchgen.DecodeRestoreV1,
		RecoveryTime:   func(r dispatchgen.RestoreV1) (time.Time, bool) { return store.DecodeTime(r.RestoredAtMs), !r.Initial },
		ReconcileKey:   reconcileKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, testengine.Memory)
	e.putLease(t, 0, 40, 200)
	if got, err := tbl.Watermark(e.ctx, e.s, coordinator, t0.Add(time.Second)); err != nil || !got.Equal(t0.Add(40*time.Millisecond)) {
		t.Fatalf("watermark of the coordinator as the union: %v, %v", got, err)
	}
	calls := func() int {
		return e.s.Calls(storetest.MethodGetMany) + e.s.Calls(storetest.MethodScan) + e.s.Calls(storetest.MethodGet) + e.s.Calls(storetest.MethodApply)
	}
	before := calls()
	_, _, err = tbl.Step(e.ctx, e.s, nil, t0.Add(time.Second), nil, 1)
	requireErr(t, err, []error{store.ErrInvalid}, "a nil partition")
	_, err = tbl.Watermark(e.ctx, e.s, nil, t0.Add(time.Second))
	requireErr(t, err, []error{store.ErrInvalid}, "a nil partition")
	_, err = tbl.ActiveShards(e.ctx, e.s, nil, nil, 1)
	requireErr(t, err, []error{store.ErrInvalid}, "not <nil partition>")
	_, err = tbl.CheckRecovery(e.ctx, e.s, nil, nil)
	requireErr(t, err, []error{store.ErrInvalid}, "not <nil partition>")
	err = tbl.MarkReconciled(e.ctx, e.s, nil, t0.Add(time.Second))
	requireErr(t, err, []error{store.ErrInvalid}, "not <nil partition>")
	if calls() != before {
		t.Fatal("a nil coordinator reached the store")
	}
	// A checkpoint names a partition of the union, which the table takes.
	e.putLease(t, 1, 90, 200)
	cp, _, err := tbl.Step(e.ctx, e.s, coordinator, t0.Add(time.Second), nil, 1)
	if err != nil || cp == nil {
		t.Fatalf("step: %v, %v", cp, err)
	}
	b, err := cp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := tbl.DecodeCheckpoint(b)
	if err != nil || decoded.Coordinator() != dispatchgen.Partition(coordinator) {
		t.Fatalf("decoded coordinator %v, %v; want %s", decoded, err, coordinator)
	}
	again, err := decoded.Encode()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoded %x, %v; want %x", again, err, b)
	}
}
