package timers_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testlog"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// env is one test's store, clock, partition and observers.
type env struct {
	ctx     context.Context
	faults  *storetest.Faults // wraps inner; RunDue runs against it
	inner   store.Store
	clock   *clock.Manual
	p       store.Partition
	metrics *telemetry.Recorder
	logs    *testlog.Buffer
	logger  *slog.Logger
}

// forEachEngine runs fn as a subtest per engine on a fresh env whose clock
// reads now.
func forEachEngine(t *testing.T, now time.Time, fn func(t *testing.T, e *env)) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			fn(t, newEnv(t, eng.Open(t, "timers.bbolt"), now))
		})
	}
}

func newEnv(t testing.TB, engine kv.Engine, now time.Time) *env {
	clk := clock.NewManual(now)
	// DueHashBuckets on every engine (the memory and bbolt engines keep
	// one unless made Distributed): the tests exercise the buckets
	// everywhere.
	l, err := fdblayer.Open(fdbsim.AsDistributed(engine), fdblayer.Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return newEnvOver(t, l, clk)
}

// newEnvOver is the env of Layer l on clock clk.
func newEnvOver(t testing.TB, l *fdblayer.Layer, clk *clock.Manual) *env {
	logs := &testlog.Buffer{}
	e := &env{
		ctx:     context.Background(),
		faults:  storetest.NewFaults(l),
		inner:   l,
		clock:   clk,
		p:       refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")},
		metrics: telemetry.NewRecorder(),
		logs:    logs,
		logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	t.Cleanup(func() { assert.NoError(t, e.metrics.Err(), "samples the telemetry catalogue does not list") })
	return e
}

// run runs RunDue at the clock's time on the faults wrapper, with the
// env's clock, logger and metrics unless cfg sets its own.
func (e *env) run(t testing.TB, reg *timers.Registry, cfg timers.RunConfig) timers.Report {
	t.Helper()
	rep, err := e.runErr(reg, cfg)
	require.NoError(t, err)
	return rep
}

func (e *env) runErr(reg *timers.Registry, cfg timers.RunConfig) (timers.Report, error) {
	if cfg.Clock == nil {
		cfg.Clock = e.clock
	}
	if cfg.Logger == nil {
		cfg.Logger = e.logger
	}
	if cfg.Metrics == nil {
		cfg.Metrics = e.metrics
	}
	return timers.RunDue(e.ctx, e.faults, e.p, reg, e.clock.Now(), cfg)
}

// schedule writes timer t through Schedule, guarded by its current
// reference entry.
func (e *env) schedule(t testing.TB, tm timers.Timer) {
	t.Helper()
	observed, _, err := timers.ReadRef(e.ctx, e.inner, e.p, tm.Kind, tm.Reference)
	require.NoError(t, err)
	b := store.NewBatch()
	require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), observed, tm))
	e.apply(t, b)
}

func (e *env) apply(t testing.TB, b *store.Batch) {
	t.Helper()
	out, err := e.inner.Apply(e.ctx, e.p, b)
	require.NoError(t, err)
	require.True(t, out.Committed(), "%v", out)
}

func (e *env) put(t testing.TB, key store.Key, value store.Value) {
	t.Helper()
	e.apply(t, store.NewBatch().Put(key, value))
}

func (e *env) get(t testing.TB, key store.Key) store.Value {
	t.Helper()
	v, _, err := e.inner.Get(e.ctx, e.p, key)
	require.NoError(t, err)
	return v
}

// stored is one timer row as the store holds it.
type stored struct {
	DueAt     time.Time
	Kind      timers.Kind
	Reference string
	Value     string
}

// timersIn lists the partition's timer rows in key order; raw keys that
// do not parse are counted in bad.
func (e *env) timersIn(t testing.TB) (rows []stored, bad int) {
	t.Helper()
	start, end := gen.ClassRange(gen.TagTimerKey)
	page, err := e.inner.Scan(e.ctx, e.p, start, end, nil, 1000)
	require.NoError(t, err)
	require.Nil(t, page.Next)
	for _, kv := range page.Entries {
		k, err := gen.ParseTimerKey(kv.Key)
		if err != nil {
			bad++
			continue
		}
		rows = append(rows, stored{store.DecodeTime(k.DueAtMs), timers.Kind(k.Kind), k.Reference, string(kv.Value)})
	}
	return rows, bad
}

// refDue reads the due time the reference entry of (kind, ref) holds; ok
// is false when there is none.
func (e *env) refDue(t testing.TB, kind timers.Kind, ref string) (due time.Time, ok bool) {
	t.Helper()
	v, dueAt, err := timers.ReadRef(e.ctx, e.inner, e.p, kind, ref)
	require.NoError(t, err)
	return dueAt, v != nil
}

// encoded is at as stored rows hold it (store.EncodeTime), for the tests
// that write or read rows by hand.
func encoded(at time.Time) uint64 {
	u, err := store.EncodeTime(at)
	if err != nil {
		panic(err)
	}
	return u
}

// captureApplies records every batch applied through the faults wrapper.
func (e *env) captureApplies() *[]*store.Batch {
	var mu sync.Mutex
	var got []*store.Batch
	e.faults.BeforeApply(func(_ context.Context, _ store.Partition, b *store.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, b.Clone())
		return nil
	})
	return &got
}

// handler is a Handler whose Fire is a function; it counts its calls.
type handler struct {
	kind  timers.Kind
	fire  func(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error)
	mu    sync.Mutex
	calls []timers.DueTimer
}

func (h *handler) Kind() timers.Kind { return h.kind }

func (h *handler) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	h.mu.Lock()
	h.calls = append(h.calls, t)
	h.mu.Unlock()
	return h.fire(ctx, c, t)
}

func (h *handler) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	refs := make([]string, len(h.calls))
	for i, c := range h.calls {
		refs[i] = c.Reference
	}
	return refs
}

func done(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
	return timers.Done{}, nil
}

func registry(t testing.TB, hs ...timers.Handler) *timers.Registry {
	t.Helper()
	reg := &timers.Registry{}
	for _, h := range hs {
		require.NoError(t, reg.Register(h, timers.KindConfig{Retry: fixedRetry}))
	}
	return reg
}

// fixedRetry retries for ever, RetryBackoff apart, without jitter: the
// tests of what a failure does beside its retry policy use it.
var fixedRetry = timers.RetryPolicy{
	InitialInterval: timers.RetryBackoff,
	BackoffFactor:   1,
	MaxInterval:     timers.RetryBackoff,
}
