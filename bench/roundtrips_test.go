package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/timers"
)

// BenchmarkRelayRoundTrips counts, on the MVCC engine, what relaying a row
// asks of a FoundationDB cluster, in BenchmarkRelayWorkers' shape
// (workerSources sources queueing workerRows rows each per op, to
// workerTargets targets round robin) with one scheduler of one worker
// ticking until every source's queue is empty: transactions (read
// versions: those begun and their retries), read round trips (a GetMany or
// a range read each) and commits that wrote, per relayed row, the
// scheduler's listing, claims and releases included. The counts are
// exact, not timed.
func BenchmarkRelayRoundTrips(b *testing.B) {
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{})
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	h := &drainedHandler{inner: newRelayHandler(b, relay.HandlerConfig{Target: l, Budget: benchBudget})}
	reg, err := timers.NewRegistry(h)
	if err != nil {
		b.Fatal(err)
	}
	s, err := timers.NewScheduler(timers.SchedulerConfig{
		Store: l, Registry: reg, ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		Workers: 1, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	q := newWorkerQueue()
	var txns, reads, commits uint64
	rows := 0
	for b.Loop() {
		b.StopTimer()
		queued := q.rows
		q.queueAll(b, l)
		h.done.Store(newCountdown(workerSources))
		before := e.Stats()
		b.StartTimer()
		deadline := time.Now().Add(time.Minute)
	ticks:
		for {
			if _, err := s.Tick(ctx); err != nil {
				b.Fatal(err)
			}
			select {
			case <-h.done.Load().ch:
				break ticks
			default:
			}
			if time.Now().After(deadline) {
				b.Fatal("the relay did not drain the sources within a minute")
			}
		}
		b.StopTimer()
		after := e.Stats()
		if !q.drained(b, l) {
			b.Fatal("a source's queue is not empty after its relay completed")
		}
		txns += after.Begun + after.Retries - before.Begun - before.Retries
		reads += after.Reads - before.Reads
		commits += after.Commits - before.Commits
		rows += q.rows - queued
		b.StartTimer()
	}
	b.ReportMetric(float64(txns)/float64(rows), "txns/row")
	b.ReportMetric(float64(reads)/float64(rows), "reads/row")
	b.ReportMetric(float64(commits)/float64(rows), "commits/row")
}

// BenchmarkRelayWindowRoundTrips drains opRows rows from one source to 10
// targets (four fires of a full window, 4*relay.DefaultMaxRows rows, each
// target batch one transaction) on the MVCC engine and counts, per fire,
// the transactions begun, the reads (a GetMany or a range read each) and
// the commits that wrote; on the engine with a latency of up to a
// millisecond on each transaction start, read and commit it also reports
// the time a fire takes. The counts are exact, not timed: what a full
// window asks of a FoundationDB cluster.
func BenchmarkRelayWindowRoundTrips(b *testing.B) {
	for _, latency := range []time.Duration{0, time.Millisecond} {
		name := "engine=mvcc"
		if latency > 0 {
			name = "engine=mvcc-latency"
		}
		b.Run(name, func(b *testing.B) {
			var e *fdbsim.MVCCEngine
			eng := testengine.Engine{Name: name, Open: func(testing.TB, string) kv.Engine {
				e = fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Latency: latency})
				return e
			}}
			f := newFixture(b, eng, 10, benchBudget, nil)
			var fires int
			var took time.Duration
			var txns, reads, commits uint64
			for b.Loop() {
				b.StopTimer()
				f.queue(b, opRows)
				before, t0 := e.Stats(), time.Now()
				b.StartTimer()
				fires += f.drain(b)
				b.StopTimer()
				took += time.Since(t0)
				after := e.Stats()
				txns += after.Begun + after.Retries - before.Begun - before.Retries
				reads += after.Reads - before.Reads
				commits += after.Commits - before.Commits
				b.StartTimer()
			}
			b.ReportMetric(float64(txns)/float64(fires), "txns/fire")
			b.ReportMetric(float64(reads)/float64(fires), "reads/fire")
			b.ReportMetric(float64(commits)/float64(fires), "commits/fire")
			if latency > 0 {
				b.ReportMetric(float64(took.Microseconds())/1000/float64(fires), "ms/fire")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
