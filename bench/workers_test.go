package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The worker benchmarks run N timers.Scheduler values side by side, each
// its Run loop in its own goroutine with one worker, as N machines sharing
// a FoundationDB cluster would, on the memory engine (every transaction serialized by its
// lock) and on the MVCC engine (transactions overlap; commits conflict as
// on FoundationDB). Besides the throughput they report, over the timed
// regions only:
//
//	conflicts/commit  commits refused with not_committed (1020) per commit that landed
//	retries/commit    transactions the engine reset to retry, per commit that landed
//	contended/claim   due partitions a scheduler found leased by another, or lost the claim of, per claim
//	commits/fired-partition, txns/fired-partition
//	                  commits that landed, and transactions begun or retried, per fired partition (MVCC engine only)
//
// The memory engine never conflicts; its conflicts/commit is 0 by
// construction. Run them with
//
//	go test -run '^$' -bench 'Workers' -count 6 ./bench/ | tee w.txt
//	benchstat -col /engine w.txt

// workerCounts are the schedulers the worker benchmarks run side by side.
var workerCounts = []int{1, 2, 4}

// workerEngines are the engines they compare: the memory engine, the MVCC
// engine, and the MVCC engine with a round trip's latency on every
// transaction start, read and commit (uniform in [0, 200µs)), which
// workers overlap as they would a cluster's.
var workerEngines = []testengine.Engine{testengine.Memory, testengine.MVCC, {
	Name: "mvcc-latency",
	Open: func(testing.TB, string) kv.Engine {
		return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Latency: 200 * time.Microsecond})
	},
}}

// Sizes of the worker benchmarks' ops.
const (
	workerSources   = 16                // relay sources, each queueing workerRows rows per op
	workerRows      = 64                // rows per source per op: one relay fire each
	workerTargets   = 8                 // targets the rows go to, round robin
	workerDue       = 256               // partitions due per op of BenchmarkSchedulerWorkers
	workerKindFired = timers.Kind(1000) // a service's kind
)

// workerStore is a Layer over one engine, with its engine's counters.
type workerStore struct {
	l    *fdblayer.Layer
	mvcc *fdbsim.MVCCEngine // nil on the memory engine
}

func openWorkerStore(b *testing.B, eng testengine.Engine) *workerStore {
	e := eng.Open(b, "workers.bbolt")
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	m, _ := e.(*fdbsim.MVCCEngine)
	return &workerStore{l: l, mvcc: m}
}

// stats reads the engine's counters (zero on the memory engine).
func (ws *workerStore) stats() fdbsim.MVCCStats {
	if ws.mvcc == nil {
		return fdbsim.MVCCStats{}
	}
	return ws.mvcc.Stats()
}

// schedulers returns n Schedulers of ws with one worker each, distinct
// owners and a 1 ms poll interval, on the wall clock, counting into rec.
func (ws *workerStore) schedulers(b *testing.B, n int, reg *timers.Registry, rec *telemetry.Recorder) []*timers.Scheduler {
	return ws.schedulersOf(b, n, 1, reg, rec)
}

// schedulersOf is schedulers with workers workers each.
func (ws *workerStore) schedulersOf(b *testing.B, n, workers int, reg *timers.Registry, rec *telemetry.Recorder) []*timers.Scheduler {
	var out []*timers.Scheduler
	for i := range n {
		s, err := timers.NewScheduler(timers.SchedulerConfig{
			Store: ws.l, Registry: reg, ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
			Owner: fmt.Sprintf("bench-%d", i), Workers: workers, PollInterval: time.Millisecond,
			Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler), Metrics: rec,
		})
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// runAll runs every scheduler's Run loop, each in its own goroutine, until
// done is closed, then stops them and waits for their fires in flight to
// finish. An idle scheduler waits as Run does (until the next wake time,
// at most the poll interval) rather than spinning.
func runAll(b *testing.B, scheds []*timers.Scheduler, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Error("the schedulers did not finish the op within a minute")
	}
	cancel()
	wg.Wait()
}

// countdown closes its channel at the n-th arrival.
type countdown struct {
	left atomic.Int64
	ch   chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{ch: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) arrive() {
	if c.left.Add(-1) == 0 {
		close(c.ch)
	}
}

// workerMeter sums the timed regions of a worker benchmark.
type workerMeter struct {
	rec                         *telemetry.Recorder // the schedulers' metrics
	d                           time.Duration
	claimed, contended          uint64
	commits, conflicts, retries uint64
	// txns and reads are the round trips besides the commits (MVCCStats:
	// transactions begun or retried, read round trips).
	txns, reads uint64
}

// run times fn, called with the timer stopped, and stops it again.
func (m *workerMeter) run(b *testing.B, ws *workerStore, fn func()) {
	before := ws.stats()
	claimed := m.rec.CounterSum(telemetry.MetricSchedulerClaimed)
	contended := m.rec.CounterSum(telemetry.MetricSchedulerContended)
	b.StartTimer()
	start := time.Now()
	fn()
	m.d += time.Since(start)
	b.StopTimer()
	after := ws.stats()
	m.txns += after.Begun + after.Retries - before.Begun - before.Retries
	m.reads += after.Reads - before.Reads
	m.claimed += m.rec.CounterSum(telemetry.MetricSchedulerClaimed) - claimed
	m.contended += m.rec.CounterSum(telemetry.MetricSchedulerContended) - contended
	m.commits += after.Commits - before.Commits
	m.conflicts += after.Conflicts - before.Conflicts
	m.retries += after.Retries - before.Retries
}

func (m *workerMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.claimed)/m.d.Seconds(), "fired-partitions/s")
	b.ReportMetric(ratio(m.conflicts, m.commits), "conflicts/commit")
	b.ReportMetric(ratio(m.retries, m.commits), "retries/commit")
	b.ReportMetric(ratio(m.contended, m.claimed), "contended/claim")
	if m.txns > 0 {
		b.ReportMetric(ratio(m.commits, m.claimed), "commits/fired-partition")
		b.ReportMetric(ratio(m.txns, m.claimed), "txns/fired-partition")
	}
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// BenchmarkRelayWorkers relays workerRows rows from each of workerSources
// sources per op (4 puts of 64-byte keys and 256-byte values each, to
// workerTargets targets) with 1, 2 and 4 schedulers firing the relay side
// by side; rows are queued outside the timed region. It reports rows/s
// besides the worker metrics.
func BenchmarkRelayWorkers(b *testing.B) {
	for _, eng := range workerEngines {
		for _, n := range workerCounts {
			b.Run(fmt.Sprintf("engine=%s/workers=%d", eng.Name, n), func(b *testing.B) {
				ws := openWorkerStore(b, eng)
				h := &drainedHandler{inner: newRelayHandler(b, relay.HandlerConfig{Target: ws.l, Budget: benchBudget})}
				reg, err := timers.NewRegistry(h)
				if err != nil {
					b.Fatal(err)
				}
				m := workerMeter{rec: telemetry.NewRecorder()}
				scheds := ws.schedulers(b, n, reg, m.rec)
				q := newWorkerQueue()
				for b.Loop() {
					b.StopTimer()
					q.queueAll(b, ws.l)
					h.done.Store(newCountdown(workerSources))
					m.run(b, ws, func() { runAll(b, scheds, h.done.Load().ch) })
					if !q.drained(b, ws.l) {
						b.Fatal("a source's queue is not empty after its relay completed")
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(q.rows)/m.d.Seconds(), "rows/s")
				// Round trips on a cluster, counted on the MVCC engine (0
				// on the memory engine): per row, and per source drained
				// (one fire each).
				rows, sources := float64(q.rows), float64(q.rows/workerRows)
				b.ReportMetric(float64(m.txns)/rows, "txns/row")
				b.ReportMetric(float64(m.reads)/rows, "reads/row")
				b.ReportMetric(float64(m.commits)/rows, "commits/row")
				b.ReportMetric(float64(m.txns+m.reads+m.commits)/sources, "roundtrips/source")
				m.report(b)
			})
		}
	}
}

// workerQueue queues the relay benchmark's rows.
type workerQueue struct {
	sources []refdomain.Partition
	targets []refdomain.Partition
	puts    []gen.RelayPut
	rows    int // rows queued so far
}

func newWorkerQueue() *workerQueue {
	q := &workerQueue{puts: make([]gen.RelayPut, putsPerRow)}
	for i := range workerSources {
		q.sources = append(q.sources, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("source-%03d", i))})
	}
	for i := range workerTargets {
		q.targets = append(q.targets, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("target-%03d", i))})
	}
	value := make([]byte, valueBytes)
	for j := range q.puts {
		q.puts[j] = gen.RelayPut{Key: fmt.Appendf(nil, "bench/key/%054d", j), Value: value}
	}
	return q
}

// queueAll queues workerRows rows in each source in one outbox batch.
func (q *workerQueue) queueAll(b *testing.B, s store.Store) {
	ctx := context.Background()
	for _, p := range q.sources {
		o, err := outbox.Read(ctx, store.ReaderOf(s, p))
		if err != nil {
			b.Fatal(err)
		}
		ob, err := outbox.NewBuilder(s, time.Now(), o)
		if err != nil {
			b.Fatal(err)
		}
		for range workerRows {
			if _, err := ob.Relay(context.Background(), q.targets[q.rows%len(q.targets)], q.puts, nil); err != nil {
				b.Fatal(err)
			}
			q.rows++
		}
		batch := store.NewBatch()
		if err := ob.Finish(batch); err != nil {
			b.Fatal(err)
		}
		if out, err := s.Apply(ctx, p, batch); err != nil || !out.Committed() {
			b.Fatalf("queue rows: %v %v", out, err)
		}
	}
}

// drained reports whether every source's queue is empty.
func (q *workerQueue) drained(b *testing.B, s store.Store) bool {
	start, end := gen.ClassRange(gen.TagRelayKey)
	for _, p := range q.sources {
		page, err := s.Scan(context.Background(), p, start, end, nil, 1)
		if err != nil {
			b.Fatal(err)
		}
		if len(page.Entries) > 0 {
			return false
		}
	}
	return true
}

// schedulerShapes are the schedulers x workers BenchmarkSchedulerWorkers
// runs side by side: one worker, one scheduler of 16 workers, and 4
// schedulers of 4 workers (as 4 machines would).
var schedulerShapes = []struct{ schedulers, workers int }{{1, 1}, {1, 16}, {4, 4}}

// BenchmarkSchedulerWorkers fires workerDue due partitions per op, one
// timer each whose handler completes it at once, with each of
// schedulerShapes: the scheduler's own cost (listing, claim, fire and
// release) and its contention. Timers are armed outside the timed region.
func BenchmarkSchedulerWorkers(b *testing.B) {
	for _, eng := range workerEngines {
		for _, shape := range schedulerShapes {
			b.Run(fmt.Sprintf("engine=%s/shape=%dx%d", eng.Name, shape.schedulers, shape.workers), func(b *testing.B) {
				ws := openWorkerStore(b, eng)
				h := &doneHandler{}
				reg, err := timers.NewRegistry(h)
				if err != nil {
					b.Fatal(err)
				}
				m := workerMeter{rec: telemetry.NewRecorder()}
				scheds := ws.schedulersOf(b, shape.schedulers, shape.workers, reg, m.rec)
				// Running schedulers know each other (a tick reads and
				// renews their memberships): one tick each with nothing
				// due, before the timed ops, makes the first op measure
				// that state rather than four schedulers starting at once.
				for _, s := range scheds {
					if _, err := s.Tick(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				parts := make([]refdomain.Partition, workerDue)
				for i := range parts {
					parts[i] = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("due-%04d", i))}
				}
				for b.Loop() {
					b.StopTimer()
					arm(b, ws.l, parts)
					h.done.Store(newCountdown(workerDue))
					m.run(b, ws, func() { runAll(b, scheds, h.done.Load().ch) })
					if !dueEmpty(b, ws.l) {
						b.Fatal("the due index is not empty after every timer fired")
					}
					b.StartTimer()
				}
				m.report(b)
			})
		}
	}
}

// doneHandler completes every timer at once, and counts them down.
type doneHandler struct{ done atomic.Pointer[countdown] }

func (*doneHandler) Kind() timers.Kind { return workerKindFired }

func (h *doneHandler) Fire(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
	h.done.Load().arrive()
	return timers.Done{}, nil
}

// drainedHandler is the relay, counting down the fires that found their
// source's queue empty (nothing is queued while it runs, so each source
// completes once).
type drainedHandler struct {
	inner *relay.Handler
	done  atomic.Pointer[countdown]
}

func (h *drainedHandler) Kind() timers.Kind { return h.inner.Kind() }

// ReservedKind is the relay's: the wrapper registers the library's kind.
func (h *drainedHandler) ReservedKind() bool { return h.inner.ReservedKind() }

func (h *drainedHandler) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	f, err := h.inner.Fire(ctx, c, t)
	if _, ok := f.(timers.Done); ok && err == nil {
		h.done.Load().arrive()
	}
	return f, err
}

// arm schedules a timer due now in each of parts (the last op's fires
// completed them).
func arm(b *testing.B, s store.Store, parts []refdomain.Partition) {
	ctx := context.Background()
	now := time.Now()
	for _, p := range parts {
		batch := store.NewBatch()
		if err := timers.Schedule(batch, s.Capabilities(), nil, timers.Timer{Kind: workerKindFired, DueAt: now}); err != nil {
			b.Fatal(err)
		}
		if out, err := s.Apply(ctx, p, batch); err != nil || !out.Committed() {
			b.Fatalf("arm: %v, %v", out, err)
		}
	}
}

// dueEmpty reports whether the due index holds no entry.
func dueEmpty(b *testing.B, l *fdblayer.Layer) bool {
	due, err := l.ScanDue(context.Background(), store.DueQuery{Until: store.MaxTime, Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	return len(due) == 0
}

// newRelayHandler is relay.NewHandler(c), failing tb on an error.
func newRelayHandler(tb testing.TB, c relay.HandlerConfig) *relay.Handler {
	tb.Helper()
	h, err := relay.NewHandler(c)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}
