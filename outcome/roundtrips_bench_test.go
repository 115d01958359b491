package outcome_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/timers"
)

// BenchmarkDeliveryRoundTrips counts what one fire of the outcome-delivery
// timer delivering 16 outcomes to an in-process sink asks of a
// FoundationDB cluster, on the MVCC engine: transactions (read versions:
// those begun and their retries), read round trips (a GetMany or a range
// read each) and commits that wrote, per delivered outcome and per fire
// (RunDue's own scan and read of the timer included; no scheduler). The
// counts are exact. With latency=200us every transaction start, read and
// commit waits up to 200µs (about a millisecond on a loaded machine), and
// ms/fire is what the round trips in sequence cost.
//
//	go test -run '^$' -bench DeliveryRoundTrips -benchtime 20x ./outcome
func BenchmarkDeliveryRoundTrips(b *testing.B) {
	const rows = 16
	ids := make([]string, rows)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
	}
	for _, latency := range []time.Duration{0, 200 * time.Microsecond} {
		b.Run(fmt.Sprintf("latency=%v", latency), func(b *testing.B) {
			m := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Latency: latency})
			e := newEnvOn(b, testengine.Engine{Name: "mvcc", Open: func(testing.TB, string) kv.Engine { return m }}, t0)
			sink := outcome.SinkFunc(func(context.Context, outcome.Envelope) error { return nil })
			reg, err := timers.NewRegistry(delivery(b, sink))
			if err != nil {
				b.Fatal(err)
			}
			var txns, reads, commits uint64
			var d time.Duration
			for b.Loop() {
				b.StopTimer()
				e.seed(ids...)
				before := m.Stats()
				start := time.Now()
				b.StartTimer()
				rep, err := timers.RunDue(ctx, e.s, partition, reg, t0, timers.RunConfig{Clock: e.clock})
				b.StopTimer()
				d += time.Since(start)
				if err != nil || rep.Fired != 1 || e.backlogRows() != 0 {
					b.Fatalf("%+v %v, backlog %d", rep, err, e.backlogRows())
				}
				after := m.Stats()
				txns += after.Begun + after.Retries - before.Begun - before.Retries
				reads += after.Reads - before.Reads
				commits += after.Commits - before.Commits
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(txns)/(n*rows), "txns/outcome")
			b.ReportMetric(float64(reads)/(n*rows), "reads/outcome")
			b.ReportMetric(float64(commits)/(n*rows), "commits/outcome")
			b.ReportMetric(float64(txns+reads+commits)/n, "roundtrips/fire")
			b.ReportMetric(d.Seconds()*1000/n, "ms/fire")
		})
	}
}
