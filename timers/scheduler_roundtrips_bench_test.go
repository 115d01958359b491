package timers_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// BenchmarkSchedulerRoundTrips counts, on the MVCC engine, what a Tick
// asks of a FoundationDB cluster per fired partition, for partitions
// holding 1 and 64 due timers (each also holds a timer a day ahead), with
// a Done handler and one worker, which claims them 16 at a time and
// shares the commits of their outcomes: transactions (read versions: those begun
// and their retries), read round trips (a GetMany or a range read each)
// and commits that wrote. The listing of due partitions (its ScanDue
// transactions and the memberships' read) is amortized over the 50 of a
// tick; claim+fire-txns leaves it out (it keeps the memberships' one
// registration commit, 0.001 per partition). The counts are exact, not
// timed: the figures that carry over to a cluster, where each is about a
// millisecond of latency.
func BenchmarkSchedulerRoundTrips(b *testing.B) {
	const partitions = 50
	for _, due := range []int{1, 64} {
		b.Run(fmt.Sprintf("timers=%d", due), func(b *testing.B) {
			clk := clock.NewManual(now)
			e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Clock: clk})
			l, err := fdblayer.Open(e, fdblayer.Config{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			// Counted: the listing's transactions (ScanDue calls and the
			// memberships' read), to tell them from the claims' and fires'.
			counted := storetest.NewFaults(l)
			members := 0
			counted.FailWhen(storetest.MethodTransact, func(c storetest.Call) bool {
				if c.Batch == nil && c.Partition == timers.MembersPartition {
					members++ // counted once per call, before its function runs
				}
				return false
			}, nil)
			s, err := timers.NewScheduler(timers.SchedulerConfig{
				Store:          counted,
				Registry:       registry(b, benchHandler{}),
				ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
				Clock:          clk,
				Logger:         slog.New(slog.DiscardHandler),
				Workers:        1,
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			caps := l.Capabilities()
			apply := func(p store.Partition, tms ...timers.Timer) {
				batch := store.NewBatch()
				for _, tm := range tms {
					if err := timers.Schedule(batch, caps, nil, tm); err != nil {
						b.Fatal(err)
					}
				}
				if out, err := l.Apply(ctx, p, batch); err != nil || !out.Committed() {
					b.Fatalf("schedule: %v, %v", out, err)
				}
			}
			for i := range partitions {
				apply(part(i), timers.Timer{Kind: kindA, Reference: "tomorrow", DueAt: now.Add(24 * time.Hour)})
			}
			tms := make([]timers.Timer, due)
			for j := range tms {
				tms[j] = timers.Timer{Kind: kindA, Reference: fmt.Sprintf("t%02d", j), DueAt: now}
			}
			var txns, reads, commits, fired, listing uint64
			for b.Loop() {
				b.StopTimer()
				for i := range partitions {
					// 64 timers take 192 operations: schedule them in
					// batches within the store's limit.
					for j := 0; j < due; j += 30 {
						apply(part(i), tms[j:min(j+30, due)]...)
					}
				}
				before := e.Stats()
				listed := counted.Calls(storetest.MethodScanDue) + members
				b.StartTimer()
				rep, err := s.Tick(ctx)
				b.StopTimer()
				if err != nil || rep.Claimed != partitions || rep.Timers.Fired != partitions*due {
					b.Fatalf("Tick: %+v, %v", rep, err)
				}
				after := e.Stats()
				txns += after.Begun + after.Retries - before.Begun - before.Retries
				reads += after.Reads - before.Reads
				commits += after.Commits - before.Commits
				fired += uint64(rep.Claimed)
				listing += uint64(counted.Calls(storetest.MethodScanDue) + members - listed)
				b.StartTimer()
			}
			b.ReportMetric(float64(txns)/float64(fired), "txns/fired-partition")
			b.ReportMetric(float64(txns-listing)/float64(fired), "claim+fire-txns/fired-partition")
			b.ReportMetric(float64(reads)/float64(fired), "reads/fired-partition")
			b.ReportMetric(float64(commits)/float64(fired), "commits/fired-partition")
		})
	}
}
