package timers_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// charge charges an order: the gateway times out on order-1, and declines
// order-2's card, which no retry cures.
type charge struct{}

func (charge) Kind() timers.Kind { return 301 }

func (charge) Fire(_ context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	fmt.Printf("charge %s, attempt %d, at %v\n", t.Reference, t.Attempts+1, c.Now.Sub(time.UnixMilli(0)))
	if t.Reference == "order-2" {
		return nil, timers.Permanent(errors.New("card declined"))
	}
	if t.Attempts < 3 {
		return nil, errors.New("gateway timeout")
	}
	return timers.Done{}, nil
}

// report writes a daily report for the period it fires for.
type report struct{}

func (report) Kind() timers.Kind { return 302 }

func (report) Fire(_ context.Context, _ *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	fmt.Printf("report for %s\n", t.Period.Format("2006-01-02 15:04"))
	return timers.Done{}, nil
}

// A kind registers with a retry policy (KindConfig.Retry) or a schedule
// (KindConfig.Period); a timer that used its attempts, or failed
// permanently, becomes a dead letter, which DeadLetters lists and Redrive
// fires again.
func ExampleRegistry_Register() {
	ctx := context.Background()
	clk := clock.NewManual(time.UnixMilli(1_000))
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("shop")}

	// Charges get 3 attempts, 1s then 2s apart (no jitter, for the
	// example); reports run every day at 06:00 UTC.
	policy := timers.DefaultRetryPolicy
	policy.MaxAttempts, policy.Jitter = 3, 0
	daily, err := timers.Cron("0 6 * * *")
	if err != nil {
		panic(err)
	}
	reg := &timers.Registry{}
	if err := reg.Register(charge{}, timers.KindConfig{Retry: policy}); err != nil {
		panic(err)
	}
	if err := reg.Register(report{}, timers.KindConfig{Period: daily}); err != nil {
		panic(err)
	}

	b := store.NewBatch()
	for _, t := range []timers.Timer{
		{Kind: 301, Reference: "order-1", DueAt: clk.Now()},
		{Kind: 301, Reference: "order-2", DueAt: clk.Now()},
		{Kind: 302, Reference: "daily", DueAt: daily.Next(clk.Now())},
	} {
		if err := timers.Schedule(b, s.Capabilities(), nil, t); err != nil {
			panic(err)
		}
	}
	if _, err := s.Apply(ctx, p, b); err != nil {
		panic(err)
	}

	run := func(fires int) {
		for range fires {
			if next := nextDue(ctx, s, p); next.After(clk.Now()) {
				clk.Set(next)
			}
			if _, err := timers.RunDue(ctx, s, p, reg, clk.Now(), timers.RunConfig{Clock: clk}); err != nil {
				panic(err)
			}
		}
	}
	run(4)

	dead, _, err := timers.DeadLetters(ctx, store.ReaderOf(s, p), nil, 100)
	if err != nil {
		panic(err)
	}
	for _, d := range dead {
		fmt.Printf("dead letter %s after %d attempts (permanent %v): %s\n", d.Reference, d.Attempts, d.Permanent, d.LastError)
	}
	// Re-driven, order-1 fires again, its attempts cleared.
	b = store.NewBatch()
	if err := timers.Redrive(b, s.Capabilities(), dead[0], clk.Now()); err != nil {
		panic(err)
	}
	if _, err := s.Apply(ctx, p, b); err != nil {
		panic(err)
	}
	run(2)
	// Output:
	// charge order-1, attempt 1, at 1s
	// charge order-2, attempt 1, at 1s
	// charge order-1, attempt 2, at 2s
	// charge order-1, attempt 3, at 4s
	// report for 1970-01-01 06:00
	// dead letter order-1 after 3 attempts (permanent false): gateway timeout
	// dead letter order-2 after 1 attempts (permanent true): card declined
	// charge order-1, attempt 1, at 6h0m0s
	// charge order-1, attempt 2, at 6h0m1s
}

// nextDue is the earliest due time of p's timers.
func nextDue(ctx context.Context, s store.Store, p store.Partition) time.Time {
	var next time.Time
	for _, k := range []timers.Kind{301, 302} {
		for _, ref := range []string{"order-1", "order-2", "daily"} {
			v, due, err := timers.ReadRef(ctx, s, p, k, ref)
			if err != nil {
				panic(err)
			}
			if v != nil && (next.IsZero() || due.Before(next)) {
				next = due
			}
		}
	}
	return next
}
