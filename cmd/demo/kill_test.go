package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// manualWaiter moves its clock by each wait instead of sleeping.
type manualWaiter struct{ clock *clock.Manual }

func (w manualWaiter) Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.clock.Advance(d)
	return nil
}

// TestResumeAfterKillWaitsOutLeasesAtPollRate: a scheduler that died
// holding the sources' leases leaves them held for DefaultLeaseDuration.
// When it was a demo's, the next demo takes them back at once (one owner
// name for every run). When it was another's, the next run waits them out
// as Scheduler.Run does, a tick per PollInterval, so it takes at most
// twice the ticks of a resume of the same database whose leases were not
// held, and ends after the leases expired. Time is a manual clock that
// only the scheduler's waits move: no tick count depends on the machine's
// speed, and a run that ticks without waiting never ends (the test's
// deadline fails it).
func TestResumeAfterKillWaitsOutLeasesAtPollRate(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	dir := t.TempDir()
	killed := filepath.Join(dir, "killed.db")
	// The demo's default plan: 4 sources x 2,000 rows to 10 targets.
	c := config{db: killed, sources: 4, targets: 10, rows: 2000, workers: 4, noSync: true, timeout: time.Minute, set: map[string]bool{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// A first run queues every row, then dies before relaying any.
	c.clock = clock.NewManual(t0)
	d, err := openDB(t.Context(), c, log)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	for src := range p.sources {
		if err := queue(t.Context(), d, p, src, c.clock); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	clean, demoKilled := filepath.Join(dir, "clean.db"), filepath.Join(dir, "demo-killed.db")
	copyFile(t, killed, clean)

	// ... or dies with the sources claimed: its scheduler's claims commit,
	// and nothing after them does. A demo's scheduler, or another's.
	copyFile(t, killed, demoKilled)
	holdLeases(t, demoKilled, clock.NewManual(t0), p.sources, schedulerOwner)
	holdLeases(t, killed, clock.NewManual(t0), p.sources, "another")

	// resume runs the demo on db, as `demo -db db -nosync` would, on a
	// manual clock at t0 that only the scheduler's waits move; it returns
	// the ticks the run reports and how far the waits moved the clock.
	resume := func(db string) (ticks int, waited time.Duration) {
		t.Helper()
		clk := clock.NewManual(t0)
		c := c
		c.db, c.clock, c.waiter = db, clk, manualWaiter{clk}
		// A run that ticks without waiting never moves the clock, so the
		// leases never expire: this deadline ends it.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var out bytes.Buffer
		if err := run(ctx, c, log, newOutput(&out, time.Hour)); err != nil {
			t.Fatalf("resume of %s: %v\n%s", filepath.Base(db), err, out.String())
		}
		contains(t, out.String(), "(resumed: the last run was interrupted with 8,000 of 8,000 rows queued, 8,000 still to relay)",
			"end check over 2 runs: 8,000 rows (32,000 target puts)")
		m := regexp.MustCompile(`over (\d+) ticks`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no tick count in:\n%s", out.String())
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		return n, clk.Now().Sub(t0)
	}
	cleanTicks, cleanWaited := resume(clean)
	demoTicks, demoWaited := resume(demoKilled)
	killedTicks, killedWaited := resume(killed)
	t.Logf("ticks: %d after a clean stop, %d after a demo was killed, %d after another scheduler was; waited %v, %v and %v",
		cleanTicks, demoTicks, killedTicks, cleanWaited, demoWaited, killedWaited)
	if cleanWaited >= timers.DefaultLeaseDuration || demoWaited >= timers.DefaultLeaseDuration || killedWaited < timers.DefaultLeaseDuration {
		t.Errorf("the resumes waited %v (clean), %v (a demo killed) and %v (another scheduler killed): want only the last held back by the leases",
			cleanWaited, demoWaited, killedWaited)
	}
	if demoTicks > cleanTicks+1 {
		t.Errorf("the resume after a demo was killed took %d ticks, the clean one %d: want no more than one more", demoTicks, cleanTicks)
	}
	// A tick per PollInterval while the leases are held, and until the
	// next listing of the parked entries after they expire (a scheduler
	// lists them every quarter of the lease duration), and one more.
	waits := int((timers.DefaultLeaseDuration+timers.DefaultLeaseDuration/4)/timers.DefaultPollInterval) + 1
	if killedTicks > cleanTicks+waits || killedTicks > 2*cleanTicks {
		t.Errorf("the resume after a kill took %d ticks; the clean resume %d: want at most %d more, and at most twice as many", killedTicks, cleanTicks, waits)
	}
}

// holdLeases plays a scheduler named owner that dies holding the leases of
// the database's sources: one tick of a Scheduler at clk's time of which only
// the first batch in each source commits (its claim) and every other batch
// fails, as if the process died after claiming.
func holdLeases(t *testing.T, path string, clk *clock.Manual, sources int, owner string) {
	t.Helper()
	e, err := boltengine.Open(path, boltengine.Config{NoSync: true, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := fdblayer.Open(e, fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var (
		mu      sync.Mutex
		unclaim = map[string]bool{} // the sources, until their first batch
	)
	for src := range sources {
		id, err := source(src).AppendTuple(nil)
		if err != nil {
			t.Fatal(err)
		}
		unclaim[string(id)] = true
	}
	faults := storetest.NewFaults(l).BeforeApply(func(_ context.Context, p store.Partition, _ *store.Batch) error {
		id, err := p.AppendTuple(nil)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if unclaim[string(id)] {
			delete(unclaim, string(id))
			return nil
		}
		return storetest.ErrInjected
	})
	rh, err := relay.NewHandler(relay.HandlerConfig{Target: faults})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := timers.NewRegistry(rh)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := timers.NewScheduler(timers.SchedulerConfig{
		Store: faults, Registry: reg, Clock: clk, Workers: 1, Owner: owner,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := sched.Tick(t.Context())
	if rep.Claimed != sources {
		t.Fatalf("the dying scheduler claimed %d sources, want %d: %+v", rep.Claimed, sources, rep)
	}
}

// copyFile copies the file at from to a new file at to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
