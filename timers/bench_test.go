package timers_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// benchTimers is how many due timers each iteration fires.
const benchTimers = 64

// BenchmarkRunDue measures what RunDue costs per fired timer on the memory
// engine (a Done handler with an empty batch), beside a baseline in the
// same run: the same guarded deletes applied directly, one Apply per
// timer, with the keys and values already known. The difference is
// RunDue's own work: the paged scan, the GetMany of rows and reference
// entries, the handler call and the outcome batch.
func BenchmarkRunDue(b *testing.B) {
	b.Run("RunDue", func(b *testing.B) {
		e := newEnv(b, memengine.New(), now)
		reg := registry(b, benchHandler{})
		budget := timers.Budget{MaxTimers: benchTimers}
		perTimer(b, func() { seedBench(b, e) }, func() {
			rep, err := timers.RunDue(e.ctx, e.inner, e.p, reg, now, timers.RunConfig{Budget: budget})
			if err != nil || rep.Fired != benchTimers {
				b.Fatalf("RunDue: %+v, %v", rep, err)
			}
		})
	})
	b.Run("DirectApply", func(b *testing.B) {
		e := newEnv(b, memengine.New(), now)
		var batches []*store.Batch
		perTimer(b, func() { batches = seedBench(b, e) }, func() {
			for _, batch := range batches {
				out, err := e.inner.Apply(e.ctx, e.p, batch)
				if err != nil || !out.Committed() {
					b.Fatalf("Apply: %v, %v", out, err)
				}
			}
		})
	})
}

// perTimer runs measured b.N times after an unmeasured setup each, and
// reports ns/timer and allocs/timer of the measured part.
func perTimer(b *testing.B, setup, measured func()) {
	b.ReportAllocs()
	var mallocs uint64
	var ms runtime.MemStats
	b.StopTimer()
	for range b.N {
		setup()
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		measured()
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
	}
	n := float64(b.N * benchTimers)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/timer")
	b.ReportMetric(float64(mallocs)/n, "allocs/timer")
}

// seedBench schedules benchTimers due timers and returns, per timer, the
// batch that deletes it directly (guards and deletes as Done's).
func seedBench(b *testing.B, e *env) []*store.Batch {
	caps := e.inner.Capabilities()
	deletes := make([]*store.Batch, 0, benchTimers)
	seed := store.NewBatch()
	for i := range benchTimers {
		tm := timers.Timer{Kind: kindA, Reference: fmt.Sprintf("t%03d", i), DueAt: now.Add(time.Duration(i-benchTimers) * time.Millisecond)}
		if err := timers.Schedule(seed, caps, nil, tm); err != nil {
			b.Fatal(err)
		}
		key, _ := timers.TimerKey(tm.DueAt, tm.Kind, tm.Reference)
		refKey, _ := timers.RefKey(tm.Kind, tm.Reference)
		ref := seed.Writes[len(seed.Writes)-1].Value
		deletes = append(deletes, store.NewBatch().
			Require(store.Equals(key, store.Value{}), store.Equals(refKey, ref)).
			Delete(key).Delete(refKey))
		if seed.Ops() > caps.MaxBatchOps-3 || i == benchTimers-1 {
			if out, err := e.inner.Apply(e.ctx, e.p, seed); err != nil || !out.Committed() {
				b.Fatalf("seed: %v, %v", out, err)
			}
			seed = store.NewBatch()
		}
	}
	return deletes
}

// benchHandler completes every timer, keeping nothing.
type benchHandler struct{}

func (benchHandler) Kind() timers.Kind { return kindA }

func (benchHandler) Fire(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
	return timers.Done{}, nil
}
