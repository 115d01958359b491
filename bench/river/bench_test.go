package riverbench

import (
	"fmt"
	"testing"
	"time"
)

// Sizes of BenchmarkFireDue's ops.
const (
	benchItems = 10_000 // timers, and jobs
	benchParts = 100    // partitions the timers are spread over
)

// BenchmarkFireDue fires 10,000 due timers in 100 partitions of a bbolt
// file with one timers.Scheduler, and works 10,000 jobs scheduled due now
// in a SQLite file with one River client, at 1 and at 16 workers (the
// Scheduler's Workers, River's MaxWorkers). Both are durable (see
// sqliteDSN), both handlers only count, and each op checks that every
// timer and job fired exactly once. Each op runs both sides, alternating
// which goes first, so that they share the machine's load; files are
// made and filled outside the timed regions. It reports ours-jobs/s,
// river-jobs/s and ours/river, the ratio of the two rates (ns/op is
// reported as 0: it would be the sum of both sides).
func BenchmarkFireDue(b *testing.B) {
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var ours, theirs time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				o := newOursOp(b, b.TempDir(), benchItems, benchParts)
				r := newRiverOp(b, b.TempDir(), benchItems, workers)
				if i%2 == 0 {
					ours += o.run(b, workers)
					theirs += r.run(b)
				} else {
					theirs += r.run(b)
					ours += o.run(b, workers)
				}
				i++
				b.StartTimer()
			}
			oursRate := float64(i*benchItems) / ours.Seconds()
			riverRate := float64(i*benchItems) / theirs.Seconds()
			b.ReportMetric(oursRate, "ours-jobs/s")
			b.ReportMetric(riverRate, "river-jobs/s")
			b.ReportMetric(oursRate/riverRate, "ours/river")
			b.ReportMetric(0, "ns/op")
		})
	}
}
