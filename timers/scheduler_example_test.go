package timers_test

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A Scheduler finds the partitions with due timers through the store's
// due index and fires them; a service calls Run, a test drives Tick.
func ExampleScheduler() {
	ctx := context.Background()
	clk := clock.NewManualMs(1_000)
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for _, ns := range []refdomain.NamespaceKey{refdomain.MustNamespaceKey("alpha"), refdomain.MustNamespaceKey("beta")} {
		b := store.NewBatch()
		tm := timers.Timer{Kind: 300, Reference: ns.String(), DueAt: ms(1_000)}
		if err := timers.Schedule(b, s.Capabilities(), nil, tm); err != nil {
			panic(err)
		}
		if _, err := s.Apply(ctx, refdomain.NamespacePartition{NS: ns}, b); err != nil {
			panic(err)
		}
	}

	reg, _ := timers.NewRegistry(reminder{})
	sched, err := timers.NewScheduler(timers.SchedulerConfig{
		Store:          s,
		Registry:       reg,
		ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		Owner:          "worker-1",
		Workers:        1,
		Clock:          clk,
	})
	if err != nil {
		panic(err)
	}
	for {
		rep, err := sched.Tick(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("claimed %d, fired %d, next due at %d\n", rep.Claimed, rep.Timers.Fired, msOf(rep.Timers.NextDue))
		if msOf(rep.Timers.NextDue) == 0 {
			break
		}
		clk.SetMs(msOf(rep.Timers.NextDue))
	}
	// Output:
	// reminder alpha #1 at 1000
	// reminder beta #1 at 1000
	// claimed 2, fired 2, next due at 61000
	// reminder alpha #2 at 61000
	// reminder beta #2 at 61000
	// claimed 2, fired 2, next due at 121000
	// reminder alpha #3 at 121000
	// reminder beta #3 at 121000
	// claimed 2, fired 2, next due at 0
}
