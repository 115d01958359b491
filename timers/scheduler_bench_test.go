package timers_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// benchDue is how many partitions are due at each measured tick, whatever
// the partition count: a tick reads only due entries, so its cost per due
// partition should not follow how many partitions the store holds.
const benchDue = 100

// benchSizes are the partition counts of the scheduler benchmarks.
var benchSizes = []int{1_000, 10_000, 100_000}

// BenchmarkSchedulerTick measures one Tick firing benchDue due partitions
// (one timer each, a Done handler, default workers and budget) among
// 1,000, 10,000 (1% due) and 100,000 partitions on the memory engine, the
// due ones spread evenly over the keyspace, every partition also holding
// a timer a day ahead. Stores are built once; each iteration re-arms the
// due partitions outside the timer. ns/due-partition compares sizes.
func BenchmarkSchedulerTick(b *testing.B) {
	for _, partitions := range benchSizes {
		// Every size's store exists before any runs: each run then works
		// with the same live heap, and the garbage collector's share of a
		// tick does not vary with the size measured.
		benchStoreOf(b, partitions)
	}
	for _, partitions := range benchSizes {
		b.Run(fmt.Sprintf("partitions=%d/due=%d", partitions, benchDue), func(b *testing.B) {
			st := benchStoreOf(b, partitions)
			s := st.scheduler(b)
			ctx := context.Background()
			b.ReportAllocs()
			b.StopTimer()
			for range b.N {
				st.arm(b, st.spread)
				b.StartTimer()
				rep, err := s.Tick(ctx)
				b.StopTimer()
				if err != nil || rep.Claimed != benchDue || rep.Timers.Fired != benchDue {
					b.Fatalf("Tick: %+v, %v", rep, err)
				}
			}
			perDue := float64(b.Elapsed().Nanoseconds()) / float64(b.N*benchDue)
			b.ReportMetric(perDue, "ns/due-partition")
			b.ReportMetric(1e9/perDue, "due-partitions/s")
		})
	}
}

// BenchmarkSchedulerTickScaling ticks over 1,000 and then 100,000
// partitions (benchDue due in each) in every iteration, so that both see
// the same background load, and reports each one's ns/due-partition and
// their ratio. store-ratio-100k/1k is the same ratio for re-arming the
// due partitions (plain guarded timer writes, no scheduler code): how much
// the memory engine's own operations slow down with its size.
//
// With the due partitions spread over the keyspace, each of their reads
// and writes walks a cold path of a much larger B-tree; clustered, they
// share one, and the ratio shows the scheduler alone.
func BenchmarkSchedulerTickScaling(b *testing.B) {
	const small, large = 1_000, 100_000
	for _, layout := range []string{"spread", "clustered"} {
		b.Run("due="+layout, func(b *testing.B) {
			stores := []*benchStore{benchStoreOf(b, small), benchStoreOf(b, large)}
			scheds := []*timers.Scheduler{stores[0].scheduler(b), stores[1].scheduler(b)}
			ctx := context.Background()
			var ticking, arming [2]time.Duration
			b.StopTimer()
			for range b.N {
				for i, st := range stores {
					due := st.spread
					if layout == "clustered" {
						due = st.clustered
					}
					start := time.Now()
					st.arm(b, due)
					arming[i] += time.Since(start)
					start = time.Now()
					b.StartTimer()
					rep, err := scheds[i].Tick(ctx)
					b.StopTimer()
					ticking[i] += time.Since(start)
					if err != nil || rep.Claimed != benchDue {
						b.Fatalf("Tick: %+v, %v", rep, err)
					}
				}
			}
			n := float64(b.N * benchDue)
			b.ReportMetric(float64(ticking[0].Nanoseconds())/n, "ns/due-partition@1k")
			b.ReportMetric(float64(ticking[1].Nanoseconds())/n, "ns/due-partition@100k")
			b.ReportMetric(float64(ticking[1])/float64(ticking[0]), "ratio-100k/1k")
			b.ReportMetric(float64(arming[1])/float64(arming[0]), "store-ratio-100k/1k")
			b.ReportMetric(0, "ns/op") // both sizes' ticks: not a figure of its own
		})
	}
}

// benchStore is a memory-engine store of many partitions, built once per
// size and kept for every run of the benchmarks. spread and clustered
// are two choices of benchDue partitions to make due: evenly spaced over
// the keyspace, or its first ones.
type benchStore struct {
	layer     *fdblayer.Layer
	clock     *clock.Manual
	spread    []store.Partition
	clustered []store.Partition
}

var (
	benchStoresMu sync.Mutex
	benchStores   = map[int]*benchStore{}
)

func benchStoreOf(b *testing.B, partitions int) *benchStore {
	benchStoresMu.Lock()
	defer benchStoresMu.Unlock()
	if st, ok := benchStores[partitions]; ok {
		return st
	}
	clk := clock.NewManual(now)
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	st := &benchStore{layer: l, clock: clk}
	ctx := context.Background()
	caps := l.Capabilities()
	for i := range partitions {
		p := part(i)
		batch := store.NewBatch()
		if err := timers.Schedule(batch, caps, nil, timers.Timer{Kind: kindA, Reference: "tomorrow", DueAt: now.Add(24 * time.Hour)}); err != nil {
			b.Fatal(err)
		}
		if out, err := l.Apply(ctx, p, batch); err != nil || !out.Committed() {
			b.Fatalf("seed: %v, %v", out, err)
		}
		if i%(partitions/benchDue) == 0 {
			st.spread = append(st.spread, p)
		}
		if i < benchDue {
			st.clustered = append(st.clustered, p)
		}
	}
	benchStores[partitions] = st
	return st
}

// scheduler returns a Scheduler of the store with the default workers,
// lease and budget, logging nothing.
func (st *benchStore) scheduler(b *testing.B) *timers.Scheduler {
	s, err := timers.NewScheduler(timers.SchedulerConfig{
		Store:          st.layer,
		Registry:       registry(b, benchHandler{}),
		ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		Clock:          st.clock,
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// arm schedules a due timer in each partition of due (the last tick's
// Done deleted it).
func (st *benchStore) arm(b *testing.B, due []store.Partition) {
	ctx := context.Background()
	caps := st.layer.Capabilities()
	for _, p := range due {
		batch := store.NewBatch()
		if err := timers.Schedule(batch, caps, nil, timers.Timer{Kind: kindA, Reference: "now", DueAt: now}); err != nil {
			b.Fatal(err)
		}
		if out, err := st.layer.Apply(ctx, p, batch); err != nil || !out.Committed() {
			b.Fatalf("arm: %v, %v", out, err)
		}
	}
}
