package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
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
