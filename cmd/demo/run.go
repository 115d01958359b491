package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// errInterrupted: the run's context ended (SIGINT, SIGTERM) before the end
// check; the summary was printed and the database closed cleanly.
var errInterrupted = errors.New("interrupted")

func source(i int) refdomain.RefPartition {
	return refdomain.RefPartition{NS: refdomain.MustNamespaceKey("demo"), Repo: refdomain.MustRepoName(fmt.Sprintf("repo-%04d", i)), ShardRef: refdomain.MustShardRef("refs/heads/main")}
}

func target(i int) refdomain.RefIndexPartition {
	return refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("demo"), Repo: refdomain.MustRepoName(fmt.Sprintf("index-%04d", i)), ShardRef: refdomain.MustShardRef("refs/heads/main")}
}

// targetOf is the target partition a source's row seq goes to.
func targetOf(seq uint64, targets int) int { return int(seq % uint64(targets)) }

// targetKey is the key a row writes: unique per source and sequence.
func targetKey(src int, seq uint64, put int) []byte {
	return fmt.Appendf(nil, "row/%04d/%08d/%d", src, seq, put)
}

// run opens the database, queues this run's rows while the scheduler
// relays them, and checks every row the database's runs queued. When ctx
// ends first it prints a summary, closes the database and returns
// errInterrupted; c.timeout ending is an error.
func run(ctx context.Context, c config, log *slog.Logger, out *output) (err error) {
	d, err := openDB(ctx, c, log)
	if err != nil {
		return err
	}
	p, err := d.start(ctx, c)
	if err != nil {
		d.Close()
		if d.created {
			os.Remove(d.path) // ours, created by this run, and holding no plan
		}
		return err
	}
	defer func() {
		if cerr := d.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", d.path, cerr)
		}
	}()
	before, err := status(ctx, d, p)
	if err != nil {
		return err
	}
	out.opened(d, p, before)

	work, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	started := time.Now()
	stopProgress := out.progress(work, func(ctx context.Context) (progress, error) { return status(ctx, d, p) })
	ticks, fires, err := relayAll(work, d, c, p, log)
	stopProgress()
	now, serr := status(context.WithoutCancel(ctx), d, p)
	if serr != nil {
		return errors.Join(err, serr)
	}
	switch {
	case ctx.Err() != nil:
		out.interrupted(d, before, now, time.Since(started))
		return errInterrupted
	case err != nil && work.Err() != nil:
		return fmt.Errorf("-timeout %v passed with %d rows still queued; run again to resume: %w", c.timeout, now.backlog, err)
	case err != nil:
		return err
	}
	checked, err := verify(ctx, d, p)
	if err != nil {
		return fmt.Errorf("end check of %s: %w", d.path, err)
	}
	if err := d.finish(ctx, p); err != nil {
		return err
	}
	out.finished(d, p, before, now, checked, ticks, fires, time.Since(started))
	return nil
}

// relayAll runs the writers (queuing every source up to the plan's goal)
// and a Scheduler, until the writers are done and every source's queue is
// empty. The scheduler is the library's own loop (Scheduler.Run): after a
// tick that claimed a partition it ticks again at once; after one that
// claimed nothing it waits until the next wake time, at most PollInterval,
// so that leases held by a scheduler that died (of another program: a
// killed demo's are the demo's own, schedulerOwner) are waited out at a
// poll a second, not in a busy loop. Run ends at one of those waits once the
// writers are done and the queues empty (untilDrained). A tick that fails
// is logged and retried after PollInterval, as in any service, within
// -timeout.
func relayAll(ctx context.Context, s store.Store, c config, p plan, log *slog.Logger) (ticks, fires int, err error) {
	rh, err := relay.NewHandler(relay.HandlerConfig{Target: s})
	if err != nil {
		return 0, 0, err
	}
	reg, err := timers.NewRegistry(rh)
	if err != nil {
		return 0, 0, err
	}
	var n counter
	wait := &untilDrained{waiter: c.waiter, s: s, p: p}
	sched, err := timers.NewScheduler(timers.SchedulerConfig{
		Store: s, Registry: reg, ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		Owner: schedulerOwner, Workers: c.workers, Clock: c.clock, Metrics: &n, Logger: log, Waiter: wait,
	})
	if err != nil {
		return 0, 0, err
	}
	wait.writing, wait.werr = queueAll(ctx, s, c, p)
	err = sched.Run(ctx)
	ticks, fires = int(n.ticks.Load()), int(n.fires.Load())
	switch {
	case errors.Is(err, errDrained):
		return ticks, fires, nil
	case err != nil:
		return ticks, fires, err
	}
	// Run returns nil only once ctx has ended.
	return ticks, fires, ctx.Err()
}

// schedulerOwner is the demo's Scheduler in the leases it writes. One
// name for every run: a run killed while it held leases is followed by a
// run that takes them back at once, instead of waiting out
// DefaultLeaseDuration; only one demo at a time opens a database (bbolt's
// file lock), so no two schedulers of that name ever share one.
const schedulerOwner = "mkitfdb-demo"

// errDrained ends Scheduler.Run: the writers are done and the queues are
// empty.
var errDrained = errors.New("every row relayed")

// untilDrained is the demo scheduler's Waiter. Run waits only after a tick
// that claimed nothing; before such a wait it ends Run with errDrained once
// the writers are done and every source's queue is empty (or with the
// writers' error), and otherwise waits through waiter (nil: real time).
type untilDrained struct {
	waiter  timers.Waiter
	writing <-chan struct{}
	werr    func() error
	s       store.Store
	p       plan
}

func (w *untilDrained) Wait(ctx context.Context, d time.Duration) error {
	select {
	case <-w.writing:
		if err := w.werr(); err != nil {
			return err
		}
		idle, err := drained(ctx, w.s, w.p)
		if err != nil || idle {
			return cmp.Or(err, errDrained)
		}
	default:
	}
	if w.waiter == nil {
		return timers.RealWaiter{}.Wait(ctx, d)
	}
	return w.waiter.Wait(ctx, d)
}

// counter counts the scheduler's ticks and the timers it fired, from its
// metrics.
type counter struct{ ticks, fires atomic.Uint64 }

func (n *counter) Gauge(*telemetry.Desc, []telemetry.Label, float64) {}

func (n *counter) Add(d *telemetry.Desc, _ []telemetry.Label, delta uint64) {
	switch d {
	case telemetry.MetricSchedulerTicks:
		n.ticks.Add(delta)
	case telemetry.MetricTimersFired:
		n.fires.Add(delta)
	}
}

// queueAll starts up to workers writers that queue every source up to the
// plan's goal; the channel closes when they are done, and the function
// then returns their first error.
func queueAll(ctx context.Context, s store.Store, c config, p plan) (<-chan struct{}, func() error) {
	srcs := make(chan int, p.sources)
	for i := range p.sources {
		srcs <- i
	}
	close(srcs)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(c.workers, p.sources) {
		wg.Go(func() {
			for src := range srcs {
				if err := queue(ctx, s, p, src, c.clock); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done, func() error { mu.Lock(); defer mu.Unlock(); return first }
}

// queue appends relay rows to source src, 50 a batch, until its outbox
// sequence reaches the plan's goal; each row is 4 puts to target
// seq % targets, queued at clk's time (nil: real time). A batch whose
// guards another writer broke is rebuilt from a fresh read, so a resumed
// run continues exactly where the last stopped.
func queue(ctx context.Context, s store.Store, p plan, src int, clk clock.Clock) error {
	if clk == nil {
		clk = clock.Real{}
	}
	part := source(src)
	value := make([]byte, 256)
	for {
		obs, err := outbox.Read(ctx, store.ReaderOf(s, part))
		if err != nil {
			return err
		}
		seq, err := outbox.DecodeSequence(obs.Sequence)
		if err != nil {
			return err
		}
		if seq >= p.goal {
			return nil
		}
		b, err := outbox.NewBuilder(s, clk.Now(), obs)
		if err != nil {
			return err
		}
		for next := seq + 1; next <= min(seq+50, p.goal); next++ {
			puts := make([]gen.RelayPut, 4)
			for j := range puts {
				puts[j] = gen.RelayPut{Key: targetKey(src, next, j), Value: value}
			}
			if _, err := b.Relay(ctx, target(targetOf(next, p.targets)), puts, nil); err != nil {
				return err
			}
		}
		batch := store.NewBatch()
		if err := b.Finish(batch); err != nil {
			return err
		}
		if _, err := s.Apply(ctx, part, batch); err != nil {
			return err
		}
	}
}

// drained reports whether every source's relay queue is empty.
func drained(ctx context.Context, s store.Store, p plan) (bool, error) {
	start, end := gen.ClassRange(gen.TagRelayKey)
	for src := range p.sources {
		page, err := s.Scan(ctx, source(src), start, end, nil, 1)
		if err != nil {
			return false, err
		}
		if len(page.Entries) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// verify checks that every put of every row the sources' outbox sequences
// say were queued landed in its target, and that each target's high-water
// mark for each source is that source's last row to it. It returns the
// rows, puts and marks it checked.
func verify(ctx context.Context, s store.Store, p plan) (checked, error) {
	var n checked
	if idle, err := drained(ctx, s, p); err != nil || !idle {
		return n, errors.Join(err, errors.New("rows are still queued"))
	}
	for src := range p.sources {
		obs, err := outbox.Read(ctx, store.ReaderOf(s, source(src)))
		if err != nil {
			return n, err
		}
		queued, err := outbox.DecodeSequence(obs.Sequence)
		if err != nil {
			return n, err
		}
		if queued != p.goal {
			return n, fmt.Errorf("source %d queued %d rows, the plan says %d", src, queued, p.goal)
		}
		last := make(map[int]uint64, p.targets)
		keys := make([]store.Key, 4)
		for seq := uint64(1); seq <= queued; seq++ {
			t := targetOf(seq, p.targets)
			last[t] = seq
			for j := range keys {
				keys[j] = targetKey(src, seq, j)
			}
			vals, err := s.GetMany(ctx, target(t), keys)
			if err != nil {
				return n, err
			}
			for j, v := range vals {
				if v == nil {
					return n, fmt.Errorf("source %d row %d put %d missing in target %d", src, seq, j, t)
				}
				n.puts++
			}
			n.rows++
		}
		hwKey, err := relay.HighWaterKey(source(src))
		if err != nil {
			return n, err
		}
		for t, want := range last {
			v, ok, err := s.Get(ctx, target(t), hwKey)
			if err != nil {
				return n, err
			}
			if !ok {
				return n, fmt.Errorf("target %d has no high-water mark for source %d", t, src)
			}
			got, err := gen.DecodeU64Value(v)
			if err != nil {
				return n, err
			}
			if got.Value != want {
				return n, fmt.Errorf("target %d high-water mark for source %d is %d, want %d", t, src, got.Value, want)
			}
			n.marks++
		}
	}
	return n, nil
}

// checked counts what verify checked.
type checked struct{ rows, puts, marks int }
