package timers_test

import (
	"context"
	"fmt"
	"time"

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
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for _, ns := range []refdomain.NamespaceKey{refdomain.MustNamespaceKey("alpha"), refdomain.MustNamespaceKey("beta")} {
		b := store.NewBatch()
		tm := timers.Timer{Kind: 300, Reference: ns.String(), DueAt: start}
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
		next := rep.Timers.NextDue
		if next.IsZero() { // no timer left
			fmt.Printf("claimed %d, fired %d, none left\n", rep.Claimed, rep.Timers.Fired)
			break
		}
		fmt.Printf("claimed %d, fired %d, next due at %s\n", rep.Claimed, rep.Timers.Fired, next.UTC().Format("15:04"))
		clk.Set(next)
	}
	// Output:
	// reminder alpha #1 at 09:00
	// reminder beta #1 at 09:00
	// claimed 2, fired 2, next due at 09:01
	// reminder alpha #2 at 09:01
	// reminder beta #2 at 09:01
	// claimed 2, fired 2, next due at 09:02
	// reminder alpha #3 at 09:02
	// reminder beta #3 at 09:02
	// claimed 2, fired 2, none left
}
