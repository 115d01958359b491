package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testlog"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// start is the time every test begins at.
var start = time.UnixMilli(1_000_000)

var (
	source = refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}
	ta     = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("ta")}
	tb     = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tb")}
	tc     = refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}
)

// env is one test's source store, target store, clock, handler and
// observers. Source and target are two Faults wrappers; by default they
// wrap the same Layer (a relay whose target store is its own store).
type env struct {
	ctx     context.Context
	clock   *clock.Manual
	inner   store.Store       // the source's Layer
	source  *storetest.Faults // RunDue runs against it
	tinner  store.Store       // the target's Layer
	target  *storetest.Faults // the handler's Target
	hc      relay.HandlerConfig
	lanes   func() relay.LaneRunner // nil: goroutines
	h       *relay.Handler          // built from hc
	reg     *timers.Registry        // holds h
	audit   *auditHook
	metrics *telemetry.Recorder
	logs    *testlog.Buffer
	logger  *slog.Logger
	// tp traces the runs' fires (nil: none).
	tp trace.TracerProvider
}

// option changes a test's env before its handler is registered.
type option func(t testing.TB, e *env, open func(testing.TB, string) kv.Engine)

// withTargetStore gives the target its own Layer, configured by cfg (on
// the env's clock).
func withTargetStore(cfg fdblayer.Config) option {
	return func(t testing.TB, e *env, open func(testing.TB, string) kv.Engine) {
		l := openLayer(t, open(t, "target.bbolt"), e.clock, cfg)
		e.tinner, e.target = l, storetest.NewFaults(l)
		e.hc.Target = e.target
	}
}

// withBudget sets the handler's budget.
func withBudget(b relay.Budget) option {
	return func(_ testing.TB, e *env, _ func(testing.TB, string) kv.Engine) { e.hc.Budget = b }
}

// engines are the engines the relay's tests run on: every handler test's
// (testengine.All), and the memory and bbolt engines made Distributed,
// whose stores overlap calls (the fire's lanes and its read ahead run
// side by side) while the engine runs one write transaction at a time.
var engines = append(slices.Clone(testengine.All), testengine.MemoryDistributed, testengine.BoltDistributed)

// fireDeadline bounds each run of the relay's timer (a fire): a fire
// that waits for itself fails its test there instead of hanging it.
const fireDeadline = 30 * time.Second

// forEachEngine runs fn as a subtest per engine.
func forEachEngine(t *testing.T, fn func(t *testing.T, e *env), opts ...option) {
	for _, eng := range engines {
		t.Run(eng.Name, func(t *testing.T) { fn(t, newEnv(t, eng.Open, opts...)) })
	}
}

// openLayer opens a Layer over engine on clk, configured by cfg (at most
// one), closed when t ends.
func openLayer(t testing.TB, engine kv.Engine, clk clock.Clock, cfg ...fdblayer.Config) *fdblayer.Layer {
	var c fdblayer.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Clock = clk
	l, err := fdblayer.Open(engine, c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newEnv(t testing.TB, open func(testing.TB, string) kv.Engine, opts ...option) *env {
	clk := clock.NewManual(start)
	l := openLayer(t, open(t, "source.bbolt"), clk)
	logs := &testlog.Buffer{}
	e := &env{
		ctx:     context.Background(),
		clock:   clk,
		inner:   l,
		source:  storetest.NewFaults(l),
		tinner:  l,
		target:  storetest.NewFaults(l),
		audit:   &auditHook{},
		metrics: telemetry.NewRecorder(),
		logs:    logs,
		logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	e.hc = relay.HandlerConfig{Target: e.target, Hook: e.audit}
	t.Cleanup(func() { assert.NoError(t, e.metrics.Err(), "samples the telemetry catalogue does not list") })
	for _, o := range opts {
		o(t, e, open)
	}
	e.configure(t, func(*relay.HandlerConfig) {})
	return e
}

// configure edits the handler's configuration and registers a handler
// built from it in a new registry.
func (e *env) configure(t testing.TB, edit func(c *relay.HandlerConfig)) {
	t.Helper()
	edit(&e.hc)
	h, err := relay.NewHandler(e.hc)
	require.NoError(t, err)
	if e.lanes != nil {
		relay.SetLaneRunner(h, e.lanes)
	}
	reg, err := timers.NewRegistry(h)
	require.NoError(t, err)
	e.h, e.reg = h, reg
}

func (e *env) now() time.Time { return e.clock.Now() }

// row is one relay row to queue.
type row struct {
	target  store.Partition
	puts    []gen.RelayPut
	deletes [][]byte
}

func put(target store.Partition, kv ...string) row {
	r := row{target: target}
	for i := 0; i+1 < len(kv); i += 2 {
		r.puts = append(r.puts, gen.RelayPut{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return r
}

func del(target store.Partition, keys ...string) row {
	r := row{target: target}
	for _, k := range keys {
		r.deletes = append(r.deletes, []byte(k))
	}
	return r
}

// queue appends rows through the outbox writer, stamped at the clock's
// time, and returns their sequences.
func (e *env) queue(t testing.TB, rows ...row) []uint64 {
	t.Helper()
	return e.queueAt(t, e.now(), rows...)
}

// queueAt appends rows stamped at, several rows per batch.
func (e *env) queueAt(t testing.TB, at time.Time, rows ...row) []uint64 {
	t.Helper()
	var seqs []uint64
	for len(rows) > 0 {
		n := min(len(rows), 20)
		seqs = append(seqs, queueInto(t, e.ctx, e.inner, at, rows[:n])...)
		rows = rows[n:]
	}
	return seqs
}

// queueInto appends rows to the source's outbox in s, in one batch.
func queueInto(t testing.TB, ctx context.Context, s store.Store, at time.Time, rows []row) []uint64 {
	t.Helper()
	o, err := outbox.Read(ctx, store.ReaderOf(s, source))
	require.NoError(t, err)
	ob, err := outbox.NewBuilder(s, at, o)
	require.NoError(t, err)
	seqs := make([]uint64, 0, len(rows))
	for _, r := range rows {
		seq, err := ob.Relay(context.Background(), r.target, r.puts, r.deletes)
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	b := store.NewBatch()
	require.NoError(t, ob.Finish(b))
	out, err := s.Apply(ctx, source, b)
	require.NoError(t, err)
	require.True(t, out.Committed(), "%v", out)
	return seqs
}

// run runs the source's due timers once at the clock's time, within
// fireDeadline.
func (e *env) run(t testing.TB) timers.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, fireDeadline)
	defer cancel()
	rep, err := timers.RunDue(ctx, e.source, source, e.reg, e.now(), timers.RunConfig{Clock: e.clock, Logger: e.logger, Metrics: e.metrics, TracerProvider: e.tp})
	require.NoError(t, err)
	return rep
}

// timerDue reads the relay timer's due time; ok is false when there is
// none.
func (e *env) timerDue(t testing.TB) (due time.Time, ok bool) {
	t.Helper()
	v, dueAt, err := timers.ReadRef(e.ctx, e.inner, source, timers.KindRelay, "")
	require.NoError(t, err)
	return dueAt, v != nil
}

// step moves the clock to the relay timer's due time and runs once; it
// fails the test when there is no timer.
func (e *env) step(t testing.TB) timers.Report {
	t.Helper()
	due, ok := e.timerDue(t)
	require.True(t, ok, "no relay timer")
	if due.After(e.now()) {
		e.clock.Set(due)
	}
	return e.run(t)
}

// drain steps until the relay timer is gone and returns the fires it
// took; it fails the test after max fires.
func (e *env) drain(t testing.TB, max int) int {
	t.Helper()
	for n := 0; n < max; n++ {
		if _, ok := e.timerDue(t); !ok {
			return n
		}
		e.step(t)
	}
	_, ok := e.timerDue(t)
	require.False(t, ok, "relay timer still present after %d fires", max)
	return max
}

// queued lists the sequences of the source's queued rows (raw keys that
// do not parse as relay keys are listed as 0).
func (e *env) queued(t testing.TB) []uint64 {
	t.Helper()
	s, end := gen.ClassRange(gen.TagRelayKey)
	page, err := e.inner.Scan(e.ctx, source, s, end, nil, 10_000)
	require.NoError(t, err)
	seqs := []uint64{}
	for _, kv := range page.Entries {
		k, err := gen.ParseRelayKey(kv.Key)
		if err != nil {
			seqs = append(seqs, 0)
			continue
		}
		seqs = append(seqs, k.Seq)
	}
	return seqs
}

// scanState reads the relay's scan state (zero when absent).
func (e *env) scanState(t testing.TB) gen.RelayScanV1 {
	t.Helper()
	v, ok, err := e.inner.Get(e.ctx, source, store.Key(gen.AppendRelayScanKey(nil)))
	require.NoError(t, err)
	if !ok {
		return gen.RelayScanV1{}
	}
	s, err := gen.DecodeRelayScanV1(v)
	require.NoError(t, err)
	return s
}

// get reads a target row ("" when absent).
func (e *env) get(t testing.TB, target store.Partition, key string) string {
	t.Helper()
	v, _, err := e.tinner.Get(e.ctx, target, store.Key(key))
	require.NoError(t, err)
	return string(v)
}

// highWater reads the target's high-water mark for the source (0: none).
func (e *env) highWater(t testing.TB, target store.Partition) uint64 {
	t.Helper()
	v, ok, err := e.tinner.Get(e.ctx, target, hwKey(t))
	require.NoError(t, err)
	if !ok {
		return 0
	}
	u, err := gen.DecodeU64Value(v)
	require.NoError(t, err)
	return u.Value
}

// setHighWater stores a target's high-water mark directly.
func (e *env) setHighWater(t testing.TB, target store.Partition, seq uint64) {
	t.Helper()
	v, err := gen.EncodeU64Value(gen.U64Value{Value: seq})
	require.NoError(t, err)
	out, err := e.tinner.Apply(e.ctx, target, store.NewBatch().Put(hwKey(t), v))
	require.NoError(t, err)
	require.True(t, out.Committed())
}

func hwKey(t testing.TB) store.Key {
	k, err := gen.AppendRelayHighWaterKey(nil, ids(source)[0])
	require.NoError(t, err)
	return k
}

// applications lists, per sequence, the order numbers of the committed
// target batches that applied it, as the audit hook recorded them.
func (e *env) applications(t testing.TB, target store.Partition) map[uint64][]int {
	t.Helper()
	page, err := e.tinner.Scan(e.ctx, target, store.Key(auditPrefix), store.Key(auditPrefix+"\xff"), nil, 10_000)
	require.NoError(t, err)
	out := map[uint64][]int{}
	for _, kv := range page.Entries {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), auditPrefix), "/")
		require.Len(t, parts, 2)
		seq, err := strconv.ParseUint(parts[0], 10, 64)
		require.NoError(t, err)
		n, err := strconv.Atoi(parts[1])
		require.NoError(t, err)
		out[seq] = append(out[seq], n)
	}
	return out
}

// requireAppliedOnce checks that each of seqs was applied to target by
// exactly one committed batch, in sequence order.
func (e *env) requireAppliedOnce(t testing.TB, target store.Partition, seqs ...uint64) {
	t.Helper()
	apps := e.applications(t, target)
	last := -1
	for _, seq := range seqs {
		require.Len(t, apps[seq], 1, "seq %d applications %v", seq, apps[seq])
		require.GreaterOrEqual(t, apps[seq][0], last, "seq %d applied out of order", seq)
		last = apps[seq][0]
		delete(apps, seq)
	}
	require.Empty(t, apps, "unexpected applications")
}

const auditPrefix = "audit/"

// auditHook records, inside every target batch, which rows it applies:
// one put per row of audit/<seq>/<batch number>. It adds writes but no
// guard, so it never hides a second application: each committed batch
// leaves its own rows. It signals ErrHookCapacity when the batch has no
// room left for its puts. Optional functions override its methods.
type auditHook struct {
	n           atomic.Int64
	readKeys    func(target store.Partition, rows []relay.Row) ([]store.Key, error)
	beforeApply func(target store.Partition, rows []relay.Row, observed []store.KeyValue, b *store.Batch) error

	mu    sync.Mutex
	calls []hookCall
}

// hookCall is one BeforeApply call.
type hookCall struct {
	target   store.Partition
	seqs     []uint64
	observed []store.KeyValue
}

func (h *auditHook) ReadKeys(target store.Partition, rows []relay.Row) ([]store.Key, error) {
	if h.readKeys != nil {
		return h.readKeys(target, rows)
	}
	return nil, nil
}

func (h *auditHook) BeforeApply(_ context.Context, target store.Partition, rows []relay.Row, observed []store.KeyValue, b *store.Batch) error {
	call := hookCall{target: target}
	for _, r := range rows {
		call.seqs = append(call.seqs, r.Seq)
	}
	for _, kv := range observed {
		call.observed = append(call.observed, store.KeyValue{Key: bytes.Clone(kv.Key), Value: bytes.Clone(kv.Value)})
	}
	h.mu.Lock()
	h.calls = append(h.calls, call)
	h.mu.Unlock()
	if h.beforeApply != nil {
		if err := h.beforeApply(target, rows, observed, b); err != nil {
			return err
		}
	}
	if b.Ops()+len(rows) > store.DefaultMaxBatchOps {
		return relay.ErrHookCapacity
	}
	n := h.n.Add(1)
	for _, r := range rows {
		b.Put(store.Key(fmt.Sprintf("%s%d/%d", auditPrefix, r.Seq, n)), store.Value{})
	}
	return nil
}

func (h *auditHook) ReservedOps(store.Partition, []relay.Row) int { return 0 }

// applyCalls lists the BeforeApply calls so far.
func (h *auditHook) applyCalls() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.calls...)
}

// applyMethod is the target store call that applies a target batch: the
// relay reads a target's mark and applies the batch past it in one
// TransactOnce (whose reads Faults counts and faults as reads).
const applyMethod = storetest.MethodTransact

// isApply matches the TransactOnce calls that apply a target batch: the
// relay's function returned one (a call that found only duplicates, or
// that a budget stopped after the read, returns none).
func isApply(c storetest.Call) bool { return c.Method == applyMethod && c.Batch != nil }

// isApplyTo matches the target batches applied to partition p.
func isApplyTo(p store.Partition) func(storetest.Call) bool {
	return func(c storetest.Call) bool { return isApply(c) && same(c.Partition, p) }
}

// countApplies counts, from now on, the target batches f is asked to
// apply (TransactOnce calls with a batch).
func countApplies(f *storetest.Faults) func() int {
	var n atomic.Int64
	f.FailWhen(applyMethod, func(c storetest.Call) bool {
		if isApply(c) {
			n.Add(1)
		}
		return false
	}, nil)
	return func() int { return int(n.Load()) }
}

// plainStore hides the store.Transactor of the store it wraps: over it,
// store.TransactOnce reads and then applies with Apply, so that a target
// guard can fail as it does on a store without transactions.
type plainStore struct{ store.Store }

// withPlainTarget gives the target a Faults over a store that is not a
// store.Transactor (the source's Layer behind plainStore).
func withPlainTarget() option {
	return func(_ testing.TB, e *env, _ func(testing.TB, string) kv.Engine) {
		e.target = storetest.NewFaults(plainStore{e.tinner})
		e.hc.Target = e.target
	}
}

// ids returns the tuple identities of ps, as the relay's scan state lists
// blocked targets.
func ids(ps ...store.Partition) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		b, err := p.AppendTuple(nil)
		if err != nil {
			panic(err)
		}
		out[i] = b
	}
	return out
}

// same reports whether a and b address the same partition: the relay
// hands hooks and stores its targets as store.Identity values.
func same(a, b store.Partition) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, errA := a.AppendTuple(nil)
	y, errB := b.AppendTuple(nil)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
