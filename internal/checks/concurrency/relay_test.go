package concurrency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
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
	"github.com/mkit-dev/mkitfdb/internal/testkit/testlog"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// setup is one run of the concurrency test.
type setup struct {
	seed uint64
	// engine is the engine the store runs on: the MVCC engine when nil,
	// else the memory or bbolt engine made Distributed, which runs one
	// write transaction at a time while the relay's lanes and the
	// outcome's reads call it side by side.
	engine     *testengine.Engine
	producers  int
	schedulers int // Scheduler values, as on that many machines
	workers    int // each Scheduler's Workers
	sources    int
	targets    int
	latency    time.Duration // the engine's injected latency per operation
	produce    time.Duration // how long producers queue rows
	maxBatches int64         // producers stop earlier after committing this many batches
	// failEvery, when positive, fails every failEvery-th target batch of
	// target 0 in its hook, while other targets' batches are in flight
	// (the relay's concurrent lanes): target 0 is blocked for the rest of
	// its cycle again and again, and its rows must still arrive once.
	failEvery int64
}

// pausePhases is how many times producers and schedulers pause, for a
// check of the due index, while the producers run.
const pausePhases = 4

// drainTimeout bounds how long the schedulers may take, once producers
// stop, to deliver every queued row.
const drainTimeout = 10 * time.Second

// fireDeadline bounds each fire of the relay: a fire that waits for a
// transaction of its own runs into it (and the test fails) instead of
// hanging the schedulers.
const fireDeadline = 5 * time.Second

// deadlined is the relay's handler with a deadline on each fire; late
// counts the fires that ran into it.
type deadlined struct {
	*relay.Handler
	late *atomic.Int64
}

func (d deadlined) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	ctx, cancel := context.WithTimeout(ctx, fireDeadline)
	defer cancel()
	f, err := d.Handler.Fire(ctx, c, t)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		d.late.Add(1)
	}
	return f, err
}

// TestRelayUnderConcurrentSchedulers runs producers queuing relay rows
// through outbox.Builder into shared source partitions while several
// Schedulers, each with several workers, fire the relay, all in
// goroutines over one MVCC engine whose transactions overlap and conflict
// as on FoundationDB. When the producers stop, the schedulers run on until
// every queue is empty and the due index holds nothing; then every target
// must equal the sequential application of every queued row exactly once
// (an audit write inside every target batch shows a second application),
// with each high-water mark at its source's last row for that target.
// Four times while the producers run, and at the end, everything pauses
// and the due index invariant is checked (timerstest.CheckDueIndex). It
// logs the engine's conflicts and retries per committed batch. A
// failure prints its setup, seed included; a seed replays the same
// choices, though not the goroutines' interleaving. With latency on the
// engine the relay delivers to its targets in concurrent lanes; seed 3
// also fails every third target batch of target 0, among them. Seeds 4
// and 5 run on the memory and bbolt engines made Distributed
// (fdbsim.AsDistributed): the store says calls overlap, the relay runs
// its lanes and reads its first checkpoint batch's guards ahead beside
// them, and the engine runs one write transaction at a time. Every fire
// has a deadline (fireDeadline): a fire that waits for itself fails the
// test.
func TestRelayUnderConcurrentSchedulers(t *testing.T) {
	for _, s := range []setup{
		{seed: 1, producers: 3, schedulers: 3, workers: 2, sources: 12, targets: 6, produce: 800 * time.Millisecond, maxBatches: 2000},
		{seed: 2, producers: 4, schedulers: 2, workers: 4, sources: 4, targets: 3, latency: 200 * time.Microsecond, produce: 800 * time.Millisecond, maxBatches: 1000},
		{seed: 3, producers: 3, schedulers: 2, workers: 2, sources: 4, targets: 6, latency: 200 * time.Microsecond, produce: 800 * time.Millisecond, maxBatches: 600, failEvery: 3},
		{seed: 4, engine: &testengine.MemoryDistributed, producers: 3, schedulers: 2, workers: 2, sources: 4, targets: 6, produce: 800 * time.Millisecond, maxBatches: 1000, failEvery: 3},
		{seed: 5, engine: &testengine.BoltDistributed, producers: 2, schedulers: 2, workers: 2, sources: 3, targets: 6, produce: 800 * time.Millisecond, maxBatches: 400},
	} {
		name := fmt.Sprintf("seed=%d", s.seed)
		if s.engine != nil {
			name += "/" + s.engine.Name
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runWorld(t, s)
		})
	}
}

// world is the shared state of one run.
type world struct {
	t      *testing.T
	set    setup
	engine *fdbsim.MVCCEngine // nil on another engine
	s      *fdblayer.Layer
	logs   *testlog.Buffer

	mu     sync.Mutex
	queued []map[uint64]queuedRow // per source: sequence -> row, committed only

	batches, raced, exhausted atomic.Int64
}

// queuedRow is one relay row a producer committed.
type queuedRow struct {
	target  int
	puts    []gen.RelayPut
	deletes [][]byte
}

func source(i int) refdomain.RefPartition {
	return refdomain.RefPartition{NS: refdomain.MustNamespaceKey("conc"), Repo: refdomain.MustRepoName(fmt.Sprintf("src-%02d", i)), ShardRef: refdomain.MustShardRef("main")}
}

func target(i int) refdomain.RefIndexPartition {
	return refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("conc"), Repo: refdomain.MustRepoName(fmt.Sprintf("dst-%02d", i)), ShardRef: refdomain.MustShardRef("main")}
}

const auditPrefix = "audit/"

func runWorld(t *testing.T, set setup) {
	t.Logf("setup %+v", set)
	logs := &testlog.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var engine *fdbsim.MVCCEngine
	var opened kv.Engine
	if set.engine != nil {
		opened = set.engine.Open(t, "concurrency.bbolt")
	} else {
		engine = fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Seed: set.seed, Latency: set.latency})
		opened = engine
	}
	s, err := fdblayer.Open(opened, fdblayer.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	w := &world{t: t, set: set, engine: engine, s: s, logs: logs, queued: make([]map[uint64]queuedRow, set.sources)}
	for i := range w.queued {
		w.queued[i] = map[uint64]queuedRow{}
	}
	defer func() {
		if t.Failed() {
			t.Logf("setup %+v; warnings logged:\n%s", set, logs.String())
		}
	}()

	hook := &auditHook{failEvery: set.failEvery}
	rh, err := relay.NewHandler(relay.HandlerConfig{Target: s, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	var late atomic.Int64
	reg, err := timers.NewRegistry(deadlined{rh, &late})
	if err != nil {
		t.Fatal(err)
	}
	var scheds []*timers.Scheduler
	for i := range set.schedulers {
		sched, err := timers.NewScheduler(timers.SchedulerConfig{
			Store: s, Registry: reg, ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
			Owner: fmt.Sprintf("sched-%d", i), Workers: set.workers, PollInterval: 2 * time.Millisecond,
			Clock: clock.Real{}, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, sched)
	}
	// The producers and schedulers run in phases; between two, all pause
	// (the schedulers after their fires in flight) and the due index
	// invariant is checked on the quiet store, sources still holding rows.
	for phase := range pausePhases {
		stopSchedulers := runSchedulers(t, scheds)
		var stop atomic.Bool
		var prodWG sync.WaitGroup
		for p := range set.producers {
			prodWG.Go(func() { w.produce(phase, p, &stop) })
		}
		time.Sleep(set.produce / pausePhases)
		stop.Store(true)
		prodWG.Wait()
		stopSchedulers()
		w.checkDueIndex(fmt.Sprintf("pause %d", phase))
	}

	rows := 0
	for _, q := range w.queued {
		rows += len(q)
	}
	if rows == 0 {
		t.Fatal("no row was queued: the test tested nothing")
	}
	stopSchedulers := runSchedulers(t, scheds)
	drained := w.waitDrained()
	stopSchedulers()
	w.checkDueIndex("at the end")
	t.Logf("%d rows in %d producer batches (%d raced another producer, %d exhausted the Layer's retries)",
		rows, w.batches.Load(), w.raced.Load(), w.exhausted.Load())
	if engine != nil {
		st := engine.Stats()
		t.Logf("engine: %d commits, %d conflicts (%.3f per committed batch), %d retries (%.3f per committed batch), %d too old",
			st.Commits, st.Conflicts, float64(st.Conflicts)/float64(st.Commits), st.Retries, float64(st.Retries)/float64(st.Commits), st.TooOld)
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d relay fires ran into their %v deadline: a fire waited for itself", n, fireDeadline)
	}
	if !drained {
		w.reportUndrained()
	}
	w.verify()
	if set.failEvery > 0 {
		t.Logf("target 0's hook failed %d of its batches", hook.failed.Load())
		if hook.failed.Load() == 0 {
			t.Error("no target batch failed: the seed staged nothing")
		}
	}
}

// runSchedulers runs each scheduler's Run loop in its own goroutine until
// the returned function is called, which waits for them to return (each
// after its fires in flight). Calling it again does nothing.
func runSchedulers(t *testing.T, scheds []*timers.Scheduler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, s := range scheds {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
				t.Errorf("scheduler %d: %v", i, err)
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// checkDueIndex fails the test when a source breaks the due index
// invariant (timerstest.CheckDueIndex). The store must be quiet.
func (w *world) checkDueIndex(when string) {
	ctx := context.Background()
	parts := make([]store.Partition, w.set.sources)
	timed := 0
	for i := range parts {
		parts[i] = source(i)
		ref, _, err := timers.ReadRef(ctx, w.s, parts[i], timers.KindRelay, "")
		if err != nil {
			w.t.Fatalf("read relay timer of source %d: %v", i, err)
		}
		if ref != nil {
			timed++
		}
	}
	w.t.Logf("%s: %d of %d sources hold a relay timer", when, timed, len(parts))
	if err := timerstest.CheckDueIndex(ctx, w.s, parts); err != nil {
		w.t.Errorf("seed %d, %s: %v", w.set.seed, when, err)
	}
}

// produce queues batches of 1 to 4 relay rows into random sources until
// stop, as independent writers: each reads the outbox, builds, and applies
// guarded by what it read, retrying when another writer got there first.
// Every row puts a key unique to it, puts and deletes keys its source's
// other rows also write (so the order of application shows), and goes to a
// random target. Rows are recorded once their batch committed.
func (w *world) produce(phase, id int, stop *atomic.Bool) {
	ctx := context.Background() // never cancelled: a commit in flight must not turn unknown
	rng := rand.New(rand.NewPCG(w.set.seed, uint64(phase<<16|id)))
	nonce := 0
	for !stop.Load() && w.batches.Load() < w.set.maxBatches {
		src := rng.IntN(w.set.sources)
		obs, err := outbox.Read(ctx, store.ReaderOf(w.s, source(src)))
		if err != nil {
			w.t.Errorf("producer %d: read outbox: %v", id, err)
			return
		}
		b, err := outbox.NewBuilder(w.s, time.Now(), obs)
		if err != nil {
			w.t.Errorf("producer %d: %v", id, err)
			return
		}
		rows := map[uint64]queuedRow{}
		for range 1 + rng.IntN(4) {
			nonce++
			tag := fmt.Sprintf("p%d.%d-%d", phase, id, nonce)
			r := queuedRow{target: rng.IntN(w.set.targets), puts: []gen.RelayPut{
				{Key: fmt.Appendf(nil, "s%02d/log/%s", src, tag), Value: []byte(tag)},
				{Key: fmt.Appendf(nil, "s%02d/k%d", src, rng.IntN(6)), Value: []byte(tag)},
			}}
			if rng.IntN(2) == 0 {
				r.deletes = [][]byte{fmt.Appendf(nil, "s%02d/k%d", src, rng.IntN(6))}
			}
			seq, err := b.Relay(context.Background(), target(r.target), r.puts, r.deletes)
			if err != nil {
				w.t.Errorf("producer %d: relay row: %v", id, err)
				return
			}
			rows[seq] = r
		}
		batch := store.NewBatch()
		if err := b.Finish(batch); err != nil {
			w.t.Errorf("producer %d: finish: %v", id, err)
			return
		}
		out, err := w.s.Apply(ctx, source(src), batch)
		switch {
		case errors.Is(err, fdblayer.ErrRetriesExhausted) && !errors.Is(err, store.ErrUnknownResult):
			w.exhausted.Add(1) // nothing written: try again
			continue
		case err != nil:
			w.t.Errorf("producer %d: apply to source %d: %v", id, src, err)
			return
		case !out.Committed():
			w.raced.Add(1)
			continue
		}
		w.batches.Add(1)
		w.mu.Lock()
		for seq, r := range rows {
			if _, dup := w.queued[src][seq]; dup {
				w.t.Errorf("source %d sequence %d committed twice", src, seq)
			}
			w.queued[src][seq] = r
		}
		w.mu.Unlock()
	}
}

// drained reports whether every source's queue is empty and the due index
// holds no entry.
func (w *world) drained(ctx context.Context) (bool, error) {
	start, end := gen.ClassRange(gen.TagRelayKey)
	for src := range w.set.sources {
		page, err := w.s.Scan(ctx, source(src), start, end, nil, 1)
		if err != nil {
			return false, err
		}
		if len(page.Entries) > 0 {
			return false, nil
		}
	}
	due, err := w.s.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1})
	return len(due) == 0, err
}

// waitDrained waits, while the schedulers run on, until drained or
// drainTimeout.
func (w *world) waitDrained() bool {
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) {
		ok, err := w.drained(context.Background())
		if err != nil {
			w.t.Errorf("check drained: %v", err)
			return false
		}
		if ok {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// reportUndrained fails the test with what each undrained source holds:
// its queued rows, its relay timer and its due index wake time (a timer
// without a wake time is the lost timer of the "Timers under races"
// issue).
func (w *world) reportUndrained() {
	ctx := context.Background()
	start, end := gen.ClassRange(gen.TagRelayKey)
	var b strings.Builder
	for src := range w.set.sources {
		page, err := w.s.Scan(ctx, source(src), start, end, nil, 100_000)
		if err != nil {
			w.t.Fatalf("scan source %d: %v", src, err)
		}
		if len(page.Entries) == 0 {
			continue
		}
		ref, due, err := timers.ReadRef(ctx, w.s, source(src), timers.KindRelay, "")
		if err != nil {
			w.t.Fatalf("read relay timer of source %d: %v", src, err)
		}
		wake, hasWake, err := w.s.NextWake(ctx, source(src))
		if err != nil {
			w.t.Fatalf("read wake time of source %d: %v", src, err)
		}
		fmt.Fprintf(&b, "\n  source %d: %d rows queued; relay timer present=%v due=%v; due index wake time present=%v at=%v",
			src, len(page.Entries), ref != nil, due, hasWake, wake)
	}
	entries, err := w.s.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 100})
	if err != nil {
		w.t.Fatalf("scan due: %v", err)
	}
	w.t.Fatalf("seed %d: queues not drained %v after producers stopped:%s\n  due index entries: %d",
		w.set.seed, drainTimeout, b.String(), len(entries))
}

// verify compares every target with the sequential application of every
// queued row, checks each row was applied by exactly one target batch,
// and each high-water mark.
func (w *world) verify() {
	ctx := context.Background()
	want := make([]map[string]string, w.set.targets)
	marks := make([]map[int]uint64, w.set.targets) // target -> source -> last sequence
	for i := range want {
		want[i], marks[i] = map[string]string{}, map[int]uint64{}
	}
	appliedOnce := map[string]bool{} // audit name -> seen
	for src, rows := range w.queued {
		for seq := uint64(1); len(rows) > 0; seq++ {
			r, ok := rows[seq]
			if !ok {
				w.t.Fatalf("source %d: sequence %d missing among the committed rows: sequences are not dense", src, seq)
			}
			delete(rows, seq)
			for _, p := range r.puts {
				want[r.target][string(p.Key)] = string(p.Value)
			}
			for _, d := range r.deletes {
				delete(want[r.target], string(d))
			}
			marks[r.target][src] = seq
			appliedOnce[string(r.puts[0].Key)] = false
		}
	}
	for tg := range w.set.targets {
		page, err := w.s.Scan(ctx, target(tg), nil, nil, nil, 100_000)
		if err != nil {
			w.t.Fatalf("scan target %d: %v", tg, err)
		}
		if page.Next != nil {
			w.t.Fatalf("target %d holds over 100,000 rows", tg)
		}
		got, others := map[string]string{}, 0
		for _, row := range page.Entries {
			k := string(row.Key)
			switch {
			case strings.HasPrefix(k, auditPrefix):
				name := strings.TrimPrefix(k, auditPrefix)
				name = name[:strings.LastIndexByte(name, '/')]
				seen, ok := appliedOnce[name]
				switch {
				case !ok:
					w.t.Errorf("target %d: applied row %s that no producer committed", tg, name)
				case seen:
					w.t.Errorf("target %d: row %s applied by two target batches", tg, name)
				}
				appliedOnce[name] = true
			case strings.HasPrefix(k, "s"):
				got[k] = string(row.Value)
			default:
				others++
			}
		}
		for k, v := range want[tg] {
			if got[k] != v {
				w.t.Errorf("target %d key %s = %q, want %q (a row lost, or applied out of order)", tg, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[tg][k]; !ok {
				w.t.Errorf("target %d key %s present, want it absent (a delete lost, or a put applied again after it)", tg, k)
			}
		}
		if others != len(marks[tg]) {
			w.t.Errorf("target %d holds %d rows besides the data and audit rows, want its %d high-water marks", tg, others, len(marks[tg]))
		}
		for src, last := range marks[tg] {
			k, err := relay.HighWaterKey(source(src))
			if err != nil {
				w.t.Fatal(err)
			}
			v, ok, err := w.s.Get(ctx, target(tg), k)
			if err != nil || !ok {
				w.t.Fatalf("target %d high-water mark of source %d: present %v, %v", tg, src, ok, err)
			}
			mark, err := gen.DecodeU64Value(v)
			if err != nil {
				w.t.Fatal(err)
			}
			if mark.Value != last {
				w.t.Errorf("target %d high-water mark of source %d = %d, want %d", tg, src, mark.Value, last)
			}
		}
	}
	for name, seen := range appliedOnce {
		if !seen {
			w.t.Errorf("row %s never applied", name)
		}
	}
}

// auditHook puts, in every target batch, one audit row per relay row it
// applies, named by the row's unique first put key and the batch's own
// number: a row applied by two committed batches leaves two. With
// failEvery it fails every failEvery-th batch of target 0.
type auditHook struct {
	n               atomic.Int64
	failEvery       int64
	target0, failed atomic.Int64
}

// isTarget0 reports whether p, as the relay addresses targets (by
// identity), is target 0.
func isTarget0(p store.Partition) bool {
	a, errA := p.AppendTuple(nil)
	b, errB := target(0).AppendTuple(nil)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// errTarget0 is the failure auditHook stages.
var errTarget0 = errors.New("concurrencytest: target 0 fails this batch")

func (*auditHook) ReadKeys(store.Partition, []relay.Row) ([]store.Key, error) { return nil, nil }

func (h *auditHook) BeforeApply(_ context.Context, p store.Partition, rows []relay.Row, _ []store.KeyValue, b *store.Batch) error {
	if b.Ops()+len(rows) > store.DefaultMaxBatchOps {
		return relay.ErrHookCapacity
	}
	if h.failEvery > 0 && isTarget0(p) && h.target0.Add(1)%h.failEvery == 0 {
		h.failed.Add(1)
		return errTarget0
	}
	n := h.n.Add(1)
	for _, r := range rows {
		b.Put(fmt.Appendf(nil, "%s%s/%d", auditPrefix, r.Record.Puts[0].Key, n), store.Value{})
	}
	return nil
}

func (*auditHook) ReservedOps(store.Partition, []relay.Row) int { return 0 }
