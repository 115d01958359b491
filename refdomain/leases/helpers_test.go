package leases_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/leases"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// table is the reference domain's lease table.
var table = func() *leases.Table {
	t, err := leases.NewTable()
	if err != nil {
		panic(err)
	}
	return t
}()

// coordinator is the reference tests' coordinator, of the deployment's
// default namespace.
var (
	coordinator = refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("default")}
	mainRef     = refdomain.MustShardRef("refs/heads/main")
)

func repo(n int) refdomain.RepoName { return refdomain.MustRepoName(fmt.Sprintf("r%d", n)) }

// source is the ref shard of repository n, as ActiveShards lists it.
func source(n int) refdomain.RefPartition {
	return refdomain.RefPartition{NS: coordinator.NS, Repo: repo(n), ShardRef: mainRef}
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

// putLease writes the lease of repository n's main ref to the coordinator,
// as the reference tests' put_lease does.
func (e *env) putLease(t testing.TB, n int, watermarkMs, expiryMs uint64) {
	t.Helper()
	e.apply(t, coordinator, store.NewBatch().Put(leaseKey(t, n), lease(t, watermarkMs, expiryMs)))
}

func leaseKey(t testing.TB, n int) store.Key {
	t.Helper()
	k, err := refdomain.AppendLeasedShardKey(nil, repo(n), mainRef)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func lease(t testing.TB, watermarkMs, expiryMs uint64) store.Value {
	t.Helper()
	v, err := refdomain.EncodeLeasedShard(refdomain.LeasedShard{
		Epoch:            1,
		ExpiresAtMs:      expiryMs,
		AckedEpoch:       1,
		RelayWatermarkMs: watermarkMs,
		SweepDueMs:       expiryMs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var (
	recoveryKey  = store.Key(refdomain.AppendLeaseRecoveryKey(nil))
	reconcileKey = store.Key(refdomain.AppendLeaseReconcileKey(nil))
)

// recovery encodes a recovery marker of a recovery at resumedAtMs.
func recovery(t testing.TB, resumedAtMs uint64) store.Value {
	t.Helper()
	return recoveryOf(t, refdomain.LeaseRecovery{ResumedAtMs: resumedAtMs})
}

func recoveryOf(t testing.TB, r refdomain.LeaseRecovery) store.Value {
	t.Helper()
	v, err := refdomain.EncodeLeaseRecovery(r)
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
// milliseconds after it (as the reference tests write them), and the
// tests' times are durations after it.
var t0 = time.Unix(0, 0)

// step runs one Step through the env's store.
func (e *env) step(now time.Time, c *leases.Checkpoint, limit int) (*leases.Checkpoint, time.Time, error) {
	return table.Step(e.ctx, e.s, coordinator, now, c, limit)
}

// mustPending runs a step that must leave pages to read.
func (e *env) mustPending(t testing.TB, now time.Time, c *leases.Checkpoint, limit int) *leases.Checkpoint {
	t.Helper()
	next, value, err := e.step(now, c, limit)
	if err != nil || next == nil {
		t.Fatalf("step: checkpoint %v, watermark %v, %v; want a pending checkpoint", next, value, err)
	}
	return next
}

// mustComplete runs a step that must be the scan's last.
func (e *env) mustComplete(t testing.TB, now time.Time, c *leases.Checkpoint, limit int) time.Time {
	t.Helper()
	next, value, err := e.step(now, c, limit)
	if err != nil || next != nil {
		t.Fatalf("step: checkpoint %v, watermark %v, %v; want the last page", next, value, err)
	}
	return value
}

// mustEncode encodes c, failing t on error.
func mustEncode(t testing.TB, c *leases.Checkpoint) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustDecode decodes b, failing t on error.
func mustDecode(t testing.TB, b []byte) *leases.Checkpoint {
	t.Helper()
	c, err := table.DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// carried returns c as a later request gets it: encoded, then decoded.
func carried(t testing.TB, c *leases.Checkpoint) *leases.Checkpoint {
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
