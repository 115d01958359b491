package riverbench

import (
	"fmt"
	"testing"
	"time"
)

// benchShape is one shape of the comparison: n timers (and jobs), the
// timers spread over parts partitions.
type benchShape struct {
	name     string
	n, parts int
}

// benchShapes are the shapes BenchmarkFireDue and BenchmarkInsert run:
// 10,000 timers sharing 100 partitions (100 each), and a partition per
// timer (a service keeping a partition per entity, one timer each) at
// 1,000 and 10,000.
var benchShapes = []benchShape{
	{"100-partitions", 10_000, 100},
	{"partition-per-timer", 1_000, 1_000},
	{"partition-per-timer", 10_000, 10_000},
}

// BenchmarkFireDue fires n due timers in parts partitions of a bbolt
// file with one timers.Scheduler, and works n jobs scheduled due now in
// a SQLite file with one River client, at 1 and at 16 workers (the
// Scheduler's Workers, River's MaxWorkers), for each of benchShapes.
// Both are durable (see sqliteDSN), both handlers only count, and each op
// checks that every timer and job fired exactly once. Each op runs both
// sides, alternating which goes first, so that they share the machine's
// load; files are made and filled outside the timed regions. It reports
// ours-jobs/s, river-jobs/s and ours/river, the ratio of the two rates
// (ns/op is reported as 0: it would be the sum of both sides).
func BenchmarkFireDue(b *testing.B) {
	for _, sh := range benchShapes {
		for _, workers := range []int{1, 16} {
			b.Run(fmt.Sprintf("shape=%s/n=%d/workers=%d", sh.name, sh.n, workers), func(b *testing.B) {
				var ours, theirs time.Duration
				i := 0
				for b.Loop() {
					b.StopTimer()
					o := newOursOp(b, b.TempDir(), sh.n, sh.parts)
					r := newRiverOp(b, b.TempDir(), sh.n, workers)
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
				report(b, i*sh.n, ours, theirs)
			})
		}
	}
}

// BenchmarkInsert inserts n timers due now, insertBatch to a commit
// (see oursOp.insert: with a partition per timer, a commit of
// insertBatch partitions' batches), into a fresh bbolt file, and n River jobs
// scheduled now, insertBatch to an InsertMany, into a fresh SQLite file,
// for each of benchShapes. Each op runs both sides, alternating which goes
// first, and checks that every timer and job is stored; it reports
// ours-jobs/s, river-jobs/s and ours/river as BenchmarkFireDue does.
func BenchmarkInsert(b *testing.B) {
	for _, sh := range benchShapes {
		b.Run(fmt.Sprintf("shape=%s/n=%d", sh.name, sh.n), func(b *testing.B) {
			var ours, theirs time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				o := openOurs(b, b.TempDir(), sh.n, sh.parts)
				r := openRiver(b, b.TempDir(), sh.n, 1)
				if i%2 == 0 {
					ours += o.insert(b)
					theirs += r.insert(b)
				} else {
					theirs += r.insert(b)
					ours += o.insert(b)
				}
				o.checkInserted(b)
				r.checkInserted(b)
				o.close(b)
				r.close(b)
				i++
				b.StartTimer()
			}
			report(b, i*sh.n, ours, theirs)
		})
	}
}

// report reports items items done in ours and theirs.
func report(b *testing.B, items int, ours, theirs time.Duration) {
	oursRate := float64(items) / ours.Seconds()
	riverRate := float64(items) / theirs.Seconds()
	b.ReportMetric(oursRate, "ours-jobs/s")
	b.ReportMetric(riverRate, "river-jobs/s")
	b.ReportMetric(oursRate/riverRate, "ours/river")
	b.ReportMetric(0, "ns/op")
}
