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

// reminder is a handler that fires each reminder three times, a minute
// apart, keeping the count in the timer's value.
type reminder struct{}

func (reminder) Kind() timers.Kind { return 300 }

func (reminder) Fire(_ context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	n := len(t.Value) + 1
	fmt.Printf("reminder %s #%d at %s\n", t.Reference, n, c.Now.UTC().Format("15:04"))
	if n == 3 {
		return timers.Done{}, nil
	}
	return timers.Reschedule{DueAt: c.Now.Add(time.Minute), Value: append(t.Value, 'x')}, nil
}

// A timer is written with Schedule, inside any batch, and fired by RunDue.
func ExampleRunDue() {
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")}

	b := store.NewBatch()
	tm := timers.Timer{Kind: 300, Reference: "standup", DueAt: start}
	if err := timers.Schedule(b, s.Capabilities(), nil, tm); err != nil {
		panic(err)
	}
	if _, err := s.Apply(ctx, p, b); err != nil {
		panic(err)
	}

	reg, _ := timers.NewRegistry(reminder{})
	for now := start; !now.IsZero(); { // NextDue is the zero Time once no timer is left
		rep, err := timers.RunDue(ctx, s, p, reg, now, timers.RunConfig{Clock: clk})
		if err != nil {
			panic(err)
		}
		now = rep.NextDue
	}
	// Output:
	// reminder standup #1 at 09:00
	// reminder standup #2 at 09:01
	// reminder standup #3 at 09:02
}
