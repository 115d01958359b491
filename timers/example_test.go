package timers_test

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
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
	fmt.Printf("reminder %s #%d at %d\n", t.Reference, n, msOf(c.Now))
	if n == 3 {
		return timers.Done{}, nil
	}
	return timers.Reschedule{DueAt: ms(msOf(c.Now) + 60_000), Value: append(t.Value, 'x')}, nil
}

// A timer is written with Schedule, inside any batch, and fired by RunDue.
func ExampleRunDue() {
	ctx := context.Background()
	clk := clock.NewManualMs(1_000)
	s, err := fdblayer.Open(fdblayer.NewMemoryEngine(), fdblayer.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")}

	b := store.NewBatch()
	tm := timers.Timer{Kind: 300, Reference: "standup", DueAt: ms(1_000)}
	if err := timers.Schedule(b, s.Capabilities(), nil, tm); err != nil {
		panic(err)
	}
	if _, err := s.Apply(ctx, p, b); err != nil {
		panic(err)
	}

	reg, _ := timers.NewRegistry(reminder{})
	for nowMs := uint64(1_000); nowMs != 0; {
		rep, err := timers.RunDue(ctx, s, p, reg, ms(nowMs), timers.RunConfig{Clock: clk})
		if err != nil {
			panic(err)
		}
		nowMs = msOf(rep.NextDue)
	}
	// Output:
	// reminder standup #1 at 1000
	// reminder standup #2 at 61000
	// reminder standup #3 at 121000
}
