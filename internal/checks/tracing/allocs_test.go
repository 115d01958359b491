package tracing_test

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// mallocs returns the heap allocations run makes on average over rounds
// (after warm rounds not counted), each after setup(i), which is not
// counted, on one P, as testing.AllocsPerRun measures, and with the
// garbage collector off: a collection empties every sync.Pool, and the
// garbage setup makes would then decide how often run refills them.
func mallocs(warm, rounds int, setup func(i int), run func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var ms runtime.MemStats
	var total uint64
	for i := range warm + rounds {
		setup(i)
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		run()
		runtime.ReadMemStats(&ms)
		if i >= warm {
			total += ms.Mallocs - before
		}
	}
	return float64(total) / float64(rounds)
}

// TestDeliveryAllocatesNothingMoreForTracedRowsWithoutAProvider: without
// a tracer provider (none configured, none installed globally), a fire of
// the relay and of outcome delivery allocates as much for rows a traced
// writer queued (RelayV2 and OutcomePendingV2, at format 2) as for rows
// of a writer without a span: the trace contexts are decoded in place and
// no span is started. An allocation added per row or per fire would add
// at least one per round; what differs between two measures of the same
// rows is under a tenth (the first fires of a process warm what the
// others reuse, and are measured and dropped).
func TestDeliveryAllocatesNothingMoreForTracedRowsWithoutAProvider(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are counted without the race detector, whose instrumentation allocates")
	}
	tp, rec := recorder()
	const warm, rounds = 20, 100
	measure := func(traced bool) float64 {
		w := newWorld(t, 2, nil, nil)
		// A new store starts at the format this binary knows: 2.
		s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: w.clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.Equal(t, uint32(2), store.FormatOf(s, gen.SchemaNamespace))
		rh, err := relay.NewHandler(relay.HandlerConfig{Target: s})
		require.NoError(t, err)
		d, err := outcome.NewDelivery(outcome.DeliveryConfig{
			Sink:    outcome.SinkFunc(func(context.Context, outcome.Envelope) error { return nil }),
			Sources: []outcome.Source{w.source},
			// No real-time timer beside the sink's goroutine: a sink call
			// allocates the same whichever answers first.
			Sleep: func(ctx context.Context, _ time.Duration) error { <-ctx.Done(); return ctx.Err() },
		})
		require.NoError(t, err)
		reg, err := timers.NewRegistry(rh, d)
		require.NoError(t, err)
		return mallocs(warm, rounds, func(i int) {
			pctx := ctx
			if traced {
				var span trace.Span
				pctx, span = tp.Tracer("shop").Start(ctx, "place order")
				defer span.End()
			}
			w.produce(pctx, s, i)
		}, func() {
			rep, err := timers.RunDue(ctx, s, source, reg, w.clock.Now(), timers.RunConfig{Clock: w.clock, Logger: quiet})
			if err != nil || rep.Fired != 2 {
				t.Errorf("RunDue: %+v, %v", rep, err)
			}
		})
	}
	measure(false)
	measure(true)
	n := len(rec.Ended())
	untraced, traced := measure(false), measure(true)
	t.Logf("allocations per fire of the relay and outcome delivery: %.2f for untraced rows, %.2f for traced ones", untraced, traced)
	assert.InDelta(t, untraced, traced, 0.5)
	assert.Len(t, rec.Ended(), n+warm+rounds, "only the writers' spans")
}
