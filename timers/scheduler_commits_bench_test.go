package timers_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// BenchmarkSchedulerCommits counts the commits (Apply and TransactOnce
// calls that write: on FoundationDB each is a round trip) and reads a Tick
// spends per fired partition, on the memory engine, for partitions holding
// 1 and 64 due timers (each also holds a timer a day ahead), with a Done
// handler, with the default 4 workers, which claim the 50 partitions in
// batches of 13 and share the commits of their outcomes. The counts are
// exact, not timed: they need no statistics. A partition fired alone
// costs a claim and its outcomes' batches, the last of which carries the
// release; claimed together, partitions share those commits. BenchmarkSchedulerRoundTrips counts the
// transactions on the MVCC engine.
func BenchmarkSchedulerCommits(b *testing.B) {
	const partitions = 50
	for _, due := range []int{1, 64} {
		b.Run(fmt.Sprintf("timers=%d", due), func(b *testing.B) {
			clk := clock.NewManual(now)
			l, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			counted := storetest.NewFaults(l)
			s, err := timers.NewScheduler(timers.SchedulerConfig{
				Store:          counted,
				Registry:       registry(b, benchHandler{}),
				ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
				Clock:          clk,
				Logger:         slog.New(slog.DiscardHandler),
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			caps := l.Capabilities()
			apply := func(p store.Partition, tm timers.Timer) {
				batch := store.NewBatch()
				if err := timers.Schedule(batch, caps, nil, tm); err != nil {
					b.Fatal(err)
				}
				if out, err := l.Apply(ctx, p, batch); err != nil || !out.Committed() {
					b.Fatalf("schedule: %v, %v", out, err)
				}
			}
			for i := range partitions {
				apply(part(i), timers.Timer{Kind: kindA, Reference: "tomorrow", DueAt: now.Add(24 * time.Hour)})
			}
			reads := []storetest.Method{storetest.MethodGet, storetest.MethodGetMany, storetest.MethodScan, storetest.MethodNextWake}
			// A commit is an Apply, a TransactOnce (a claim), a Commit (the
			// outcomes of partitions claimed together) or a
			// TransactManyOnce (their claim) with something to write, of
			// fired partitions.
			writes := 0
			countWrites := func(c storetest.Call) bool {
				if (c.Batch != nil && c.Batch.Ops() > 0 || len(c.Batches) > 0) && c.Partition != timers.MembersPartition {
					writes++
				}
				return false
			}
			for _, m := range []storetest.Method{storetest.MethodApply, storetest.MethodTransact, storetest.MethodCommit, storetest.MethodTransactMany} {
				counted.FailWhen(m, countWrites, nil)
			}
			var commits, read, fired int
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				for i := range partitions {
					for j := range due {
						apply(part(i), timers.Timer{Kind: kindA, Reference: fmt.Sprintf("t%02d", j), DueAt: now})
					}
				}
				applies, before := writes, 0
				for _, m := range reads {
					before += counted.Calls(m)
				}
				b.StartTimer()
				rep, err := s.Tick(ctx)
				b.StopTimer()
				if err != nil || rep.Claimed != partitions || rep.Timers.Fired != partitions*due {
					b.Fatalf("Tick: %+v, %v", rep, err)
				}
				commits += writes - applies
				after := 0
				for _, m := range reads {
					after += counted.Calls(m)
				}
				read += after - before
				fired += rep.Claimed
				b.StartTimer()
			}
			b.ReportMetric(float64(commits)/float64(fired), "commits/fired-partition")
			b.ReportMetric(float64(read)/float64(fired), "reads/fired-partition")
		})
	}
}
