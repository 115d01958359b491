package watermark_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// The tests run the watermark over the lease table of the test schema
// (internal/testkit/dispatch): a region's dispatcher leases the region's
// queues. The reference domain's table has tests of its own
// (refdomain/leases).

// checkpoint is a checkpoint of the test schema's table.
type checkpoint = watermark.Checkpoint[dispatchgen.DispatcherPartition]

// tableConfig describes the test schema's lease table.
func tableConfig() watermark.TableConfig[dispatchgen.DispatcherPartition, dispatchgen.QueueLeaseKey, dispatchgen.QueueLeaseV1, dispatchgen.RestoreV1, dispatchgen.QueuePartition] {
	start, end := dispatchgen.ClassRange(dispatchgen.TagQueueLeaseKey)
	return watermark.TableConfig[dispatchgen.DispatcherPartition, dispatchgen.QueueLeaseKey, dispatchgen.QueueLeaseV1, dispatchgen.RestoreV1, dispatchgen.QueuePartition]{
		ParsePartition: timers.PartitionParser(dispatchgen.ParsePartition),
		LeaseStart:     start,
		LeaseEnd:       end,
		ParseLeaseKey:  dispatchgen.ParseQueueLeaseKey,
		DecodeLease:    dispatchgen.DecodeQueueLeaseV1,
		RelayWatermark: func(l dispatchgen.QueueLeaseV1) time.Time { return store.DecodeTime(l.RelayedThroughMs) },
		Shard: func(d dispatchgen.DispatcherPartition, k dispatchgen.QueueLeaseKey) dispatchgen.QueuePartition {
			return dispatchgen.QueuePartition{Region: d.Region, Queue: k.Queue}
		},
		RecoveryKey:    dispatchgen.AppendRestoreKey(nil),
		DecodeRecovery: dispatchgen.DecodeRestoreV1,
		RecoveryTime: func(r dispatchgen.RestoreV1) (time.Time, bool) {
			if r.Initial {
				return time.Time{}, false
			}
			return store.DecodeTime(r.RestoredAtMs), true
		},
		ReconcileKey: dispatchgen.AppendReconciledKey(nil),
	}
}

// table is the test schema's lease table.
var table = func() *watermark.Table[dispatchgen.DispatcherPartition, dispatchgen.QueueLeaseKey, dispatchgen.QueueLeaseV1, dispatchgen.RestoreV1, dispatchgen.QueuePartition] {
	t, err := watermark.NewTable(tableConfig())
	if err != nil {
		panic(err)
	}
	return t
}()

// coordinator is the tests' coordinator: the dispatcher of region north.
var coordinator = dispatchgen.DispatcherPartition{Region: dispatchgen.MustRegion("north")}

// queue is the shard of queue n, as ActiveShards lists it.
func queue(n int) dispatchgen.QueuePartition {
	return dispatchgen.QueuePartition{Region: coordinator.Region, Queue: uint32(n)}
}

// env is one test's store: s (a Faults wrapper, transparent unless a test
// configures it) over a fresh Layer of one engine.
type env struct {
	ctx context.Context
	s   *storetest.Faults
}

// forEachEngine runs fn as a subtest on every engine of testengine.All.
func forEachEngine(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) { fn(t, newEnv(t, eng)) })
	}
}

func newEnv(t testing.TB, eng testengine.Engine) *env {
	l, err := fdblayer.Open(eng.Open(t, "watermark.bbolt"), fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &env{ctx: context.Background(), s: storetest.NewFaults(l)}
}

// apply applies b to p, bypassing the faults, and fails t unless it commits.
func (e *env) apply(t testing.TB, p store.Partition, b *store.Batch) {
	t.Helper()
	out, err := e.s.Inner().Apply(e.ctx, p, b)
	if err != nil || !out.Committed() {
		t.Fatalf("apply: %v, %v", out, err)
	}
}

// putLease writes the lease of queue n to the coordinator.
func (e *env) putLease(t testing.TB, n int, watermarkMs, expiryMs uint64) {
	t.Helper()
	e.apply(t, coordinator, store.NewBatch().Put(leaseKey(n), lease(t, watermarkMs, expiryMs)))
}

func leaseKey(n int) store.Key { return dispatchgen.AppendQueueLeaseKey(nil, uint32(n)) }

func lease(t testing.TB, watermarkMs, expiryMs uint64) store.Value {
	t.Helper()
	v, err := dispatchgen.EncodeQueueLeaseV1(dispatchgen.QueueLeaseV1{
		Worker:           "worker-1",
		ExpiresAtMs:      expiryMs,
		RelayedThroughMs: watermarkMs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var (
	recoveryKey  = store.Key(dispatchgen.AppendRestoreKey(nil))
	reconcileKey = store.Key(dispatchgen.AppendReconciledKey(nil))
)

// recovery encodes a recovery marker of a restore at restoredAtMs.
func recovery(t testing.TB, restoredAtMs uint64) store.Value {
	t.Helper()
	return recoveryOf(t, dispatchgen.RestoreV1{RestoredAtMs: restoredAtMs, Backup: "nightly"})
}

func recoveryOf(t testing.TB, r dispatchgen.RestoreV1) store.Value {
	t.Helper()
	v, err := dispatchgen.EncodeRestoreV1(r)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// reconciled encodes a reconcile marker of atMs.
func reconciled(t testing.TB, atMs uint64) store.Value {
	t.Helper()
	v, err := gen.EncodeU64Value(gen.U64Value{Value: atMs})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// t0 is the Unix epoch: the lease table's rows hold their times as
// milliseconds after it, and the tests' times are durations after it.
var t0 = time.Unix(0, 0)

// step runs one Step through the env's store.
func (e *env) step(now time.Time, c *checkpoint, limit int) (*checkpoint, time.Time, error) {
	return table.Step(e.ctx, e.s, coordinator, now, c, limit)
}

// mustPending runs a step that must leave pages to read.
func (e *env) mustPending(t testing.TB, now time.Time, c *checkpoint, limit int) *checkpoint {
	t.Helper()
	next, value, err := e.step(now, c, limit)
	if err != nil || next == nil {
		t.Fatalf("step: checkpoint %v, watermark %v, %v; want a pending checkpoint", next, value, err)
	}
	return next
}

// mustComplete runs a step that must be the scan's last.
func (e *env) mustComplete(t testing.TB, now time.Time, c *checkpoint, limit int) time.Time {
	t.Helper()
	next, value, err := e.step(now, c, limit)
	if err != nil || next != nil {
		t.Fatalf("step: checkpoint %v, watermark %v, %v; want the last page", next, value, err)
	}
	return value
}

// mustEncode encodes c, failing t on error.
func mustEncode(t testing.TB, c *checkpoint) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustDecode decodes b, failing t on error.
func mustDecode(t testing.TB, b []byte) *checkpoint {
	t.Helper()
	c, err := table.DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// carried returns c as a later request gets it: encoded, then decoded.
func carried(t testing.TB, c *checkpoint) *checkpoint {
	t.Helper()
	return mustDecode(t, mustEncode(t, c))
}

// requireErr fails t unless err wraps every one of want and its message
// holds every one of says.
func requireErr(t testing.TB, err error, want []error, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one wrapping %v", want)
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("error %q does not wrap %q", err, w)
		}
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}
