// Command demo is the library's main job, end to end on the embedded bbolt
// store: writers queue relay rows in source partitions through the outbox
// writer; a Scheduler finds the due partitions through the due index and
// fires the relay, which delivers every row to its target partition
// exactly once in effect; then demo checks every target holds exactly the
// rows queued for it and prints what it measured.
//
// Usage:
//
//	go run ./cmd/demo [-db demo.db] [-sources 4] [-targets 10] [-rows 2000] [-workers 4] [-nosync]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// config is what the flags set.
type config struct {
	db      string
	sources int
	targets int
	rows    int
	workers int
	noSync  bool
	timeout time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.db, "db", filepath.Join(os.TempDir(), "mkitfdb-demo.db"), "bbolt file (replaced)")
	flag.IntVar(&c.sources, "sources", 4, "source partitions queuing relay rows")
	flag.IntVar(&c.targets, "targets", 10, "target partitions the rows go to")
	flag.IntVar(&c.rows, "rows", 2000, "relay rows queued per source")
	flag.IntVar(&c.workers, "workers", 4, "scheduler workers")
	flag.BoolVar(&c.noSync, "nosync", false, "skip fsync on commit (bbolt NoSync)")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		flag.Usage()
		os.Exit(2)
	}
	res, err := run(context.Background(), c, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	fmt.Print(res)
}

func (c config) validate() error {
	switch {
	case c.db == "":
		return errors.New("-db is empty")
	case c.sources < 1 || c.sources > 10_000:
		return fmt.Errorf("-sources %d out of 1..10000", c.sources)
	case c.targets < 1 || c.targets > 10_000:
		return fmt.Errorf("-targets %d out of 1..10000", c.targets)
	case c.rows < 1 || c.rows > 1_000_000:
		return fmt.Errorf("-rows %d out of 1..1000000", c.rows)
	case c.workers < 1 || c.workers > 256:
		return fmt.Errorf("-workers %d out of 1..256", c.workers)
	case c.timeout <= 0:
		return fmt.Errorf("-timeout %v is not positive", c.timeout)
	}
	return nil
}

// result is what a run measured.
type result struct {
	rows              int
	queue, relay      time.Duration
	ticks, fires      int
	delivered, checks int
}

func (r result) String() string {
	return fmt.Sprintf("queued %d relay rows in %v (%.0f rows/s)\nrelayed them in %v over %d ticks, %d timer fires (%.0f rows/s)\nverified %d target rows and %d high-water marks: every row delivered exactly once\n",
		r.rows, r.queue.Round(time.Millisecond), float64(r.rows)/r.queue.Seconds(),
		r.relay.Round(time.Millisecond), r.ticks, r.fires, float64(r.rows)/r.relay.Seconds(),
		r.delivered, r.checks)
}

func source(i int) gen.RefPartition {
	return gen.RefPartition{NS: gen.MustNamespaceKey("demo"), Repo: gen.MustRepoName(fmt.Sprintf("repo-%04d", i)), ShardRef: gen.MustShardRef("refs/heads/main")}
}

func target(i int) gen.RefIndexPartition {
	return gen.RefIndexPartition{NS: gen.MustNamespaceKey("demo"), Repo: gen.MustRepoName(fmt.Sprintf("index-%04d", i)), ShardRef: gen.MustShardRef("refs/heads/main")}
}

// targetKey is the key a row writes: unique per source and sequence.
func targetKey(src, seq, put int) []byte {
	return fmt.Appendf(nil, "row/%04d/%08d/%d", src, seq, put)
}

func run(ctx context.Context, c config, log *slog.Logger) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := os.Remove(c.db); err != nil && !errors.Is(err, os.ErrNotExist) {
		return result{}, err
	}
	engine, err := fdblayer.OpenBoltEngine(c.db, fdblayer.BoltOptions{NoSync: c.noSync})
	if err != nil {
		return result{}, err
	}
	s, err := fdblayer.Open(engine, fdblayer.WithLogger(log))
	if err != nil {
		engine.Close()
		return result{}, err
	}
	defer s.Close()

	res := result{rows: c.sources * c.rows}
	start := time.Now()
	for src := 0; src < c.sources; src++ {
		if err := queue(ctx, s, c, src); err != nil {
			return res, err
		}
	}
	res.queue = time.Since(start)

	reg, err := timers.NewRegistry(&relay.Handler{Target: s})
	if err != nil {
		return res, err
	}
	sched, err := timers.NewScheduler(timers.SchedulerConfig{
		Store: s, Registry: reg, ParsePartition: timers.ParseGenPartition,
		Workers: c.workers, Clock: clock.Real{}, Logger: log,
	})
	if err != nil {
		return res, err
	}
	start = time.Now()
	for {
		rep, err := sched.Tick(ctx)
		if err != nil {
			return res, fmt.Errorf("tick: %w", err)
		}
		res.ticks++
		res.fires += rep.Timers.Fired
		if rep.Due == 0 && rep.Parked == 0 {
			idle, err := drained(ctx, s, c)
			if err != nil {
				return res, err
			}
			if idle {
				break
			}
			// A relay reschedules itself 1 ms ahead while it works.
			time.Sleep(time.Millisecond)
		}
	}
	res.relay = time.Since(start)
	res.delivered, res.checks, err = verify(ctx, s, c)
	return res, err
}

// queue appends c.rows relay rows to source src, 50 rows a batch, each of
// 4 puts to one target (round robin), retrying a batch whose guards a
// concurrent writer broke.
func queue(ctx context.Context, s store.Store, c config, src int) error {
	p := source(src)
	value := make([]byte, 256)
	for done := 0; done < c.rows; {
		n := min(50, c.rows-done)
		for {
			obs, err := outbox.Read(ctx, s, p)
			if err != nil {
				return err
			}
			b, err := outbox.NewBuilder(s.Capabilities(), clock.NowMs(clock.Real{}), obs)
			if err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				seq := done + i + 1
				puts := make([]gen.RelayPut, 4)
				for j := range puts {
					puts[j] = gen.RelayPut{Key: targetKey(src, seq, j), Value: value}
				}
				got, err := b.Relay(target(seq%c.targets), puts, nil)
				if err != nil {
					return err
				}
				if got != uint64(seq) {
					return fmt.Errorf("source %d row %d got sequence %d: another writer shares the source", src, seq, got)
				}
			}
			batch := store.NewBatch()
			if err := b.Finish(batch); err != nil {
				return err
			}
			out, err := s.Apply(ctx, p, batch)
			if err != nil {
				return err
			}
			if out.Committed() {
				break
			}
		}
		done += n
	}
	return nil
}

// drained reports whether every source's relay queue is empty.
func drained(ctx context.Context, s store.Store, c config) (bool, error) {
	start, end := gen.ClassRange(gen.TagRelayKey)
	for src := 0; src < c.sources; src++ {
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

// verify checks that every queued put landed in its target and that each
// target's high-water mark for each source is that source's last row to it.
func verify(ctx context.Context, s store.Store, c config) (rows, marks int, err error) {
	for src := 0; src < c.sources; src++ {
		last := map[int]uint64{}
		for seq := 1; seq <= c.rows; seq++ {
			t := seq % c.targets
			last[t] = uint64(seq)
			keys := make([]store.Key, 4)
			for j := range keys {
				keys[j] = targetKey(src, seq, j)
			}
			vals, err := s.GetMany(ctx, target(t), keys)
			if err != nil {
				return rows, marks, err
			}
			for j, v := range vals {
				if v == nil {
					return rows, marks, fmt.Errorf("source %d row %d put %d missing in target %d", src, seq, j, t)
				}
				rows++
			}
		}
		for t, want := range last {
			k, err := gen.AppendRelayHighWaterKey(nil, source(src))
			if err != nil {
				return rows, marks, err
			}
			v, ok, err := s.Get(ctx, target(t), k)
			if err != nil {
				return rows, marks, err
			}
			if !ok {
				return rows, marks, fmt.Errorf("target %d has no high-water mark for source %d", t, src)
			}
			got, err := gen.DecodeU64Value(v)
			if err != nil {
				return rows, marks, err
			}
			if got.Value != want {
				return rows, marks, fmt.Errorf("target %d high-water mark for source %d is %d, want %d", t, src, got.Value, want)
			}
			marks++
		}
	}
	return rows, marks, nil
}
