package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
)

// Every relay benchmark reports, besides Go's own columns:
//
//	ns/row          time per relayed row
//	rows/s          relayed rows per second
//	allocs/row      heap allocations per relayed row
//	B/row           heap bytes allocated per relayed row
//
// and those that run the baseline beside the relay (the same batches
// applied directly: see plan) report baseline-ns/row, baseline-rows/s,
// baseline-allocs/row, baseline-B/row and relay/baseline, the ratio of
// the two times; BenchmarkRelayVsBaseline also read-ns/row and
// read/baseline, for reading the rows as the relay does (see readQueue).
// All are measured over the timed regions only: rows are queued, and the
// baseline planned, with the timer stopped. Run them with
//
//	go test -run '^$' -bench . -count 6 -cpu 1,2 ./bench/ | tee new.txt
//	benchstat new.txt
//
// On a machine of few cores shared with other work, the garbage
// collector's background work competes with the benchmark for them; -cpu 1
// shows the cost without that contention. The collector's cycles also fall
// in step with a benchmark's fixed per-op pattern, so they can land more
// in the relay's timed regions than in the baseline's at one target count
// and the reverse at another, for the same bytes allocated: compare B/row,
// and ratios across target counts, with that in mind.

// opRows is the rows relayed per benchmark op: four fires of the default
// window (4*relay.DefaultMaxRows rows).
const opRows = 1024

var targetCounts = []int{1, 10, 100}

// meter accumulates time and heap allocations of timed regions.
type meter struct {
	d       time.Duration
	mallocs uint64
	bytes   uint64
	rows    int

	t0 time.Time
	m0 uint64
	b0 uint64
}

func (m *meter) start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.m0, m.b0 = ms.Mallocs, ms.TotalAlloc
	m.t0 = time.Now()
}

func (m *meter) stop(rows int) {
	m.d += time.Since(m.t0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs += ms.Mallocs - m.m0
	m.bytes += ms.TotalAlloc - m.b0
	m.rows += rows
}

func (m *meter) nsPerRow() float64 { return float64(m.d.Nanoseconds()) / float64(m.rows) }

// report reports the meter's rows under prefix ("" or "baseline-").
func (m *meter) report(b *testing.B, prefix string) {
	b.ReportMetric(m.nsPerRow(), prefix+"ns/row")
	b.ReportMetric(float64(m.rows)/m.d.Seconds(), prefix+"rows/s")
	b.ReportMetric(float64(m.mallocs)/float64(m.rows), prefix+"allocs/row")
	// Bytes as well as allocations: with few cores the garbage
	// collector's work, which grows with the bytes, is much of the cost.
	b.ReportMetric(float64(m.bytes)/float64(m.rows), prefix+"B/row")
}

// timed runs fn in the benchmark's timed region, metering exactly fn
// (the timer's own memory statistics reads stay outside). The timer must
// be stopped; it is stopped again after.
func timed(b *testing.B, m *meter, rows int, fn func()) {
	b.StartTimer()
	m.start()
	fn()
	m.stop(rows)
	b.StopTimer()
}

// BenchmarkRelay relays opRows rows per op, round-robin from one source to
// 1, 10 or 100 targets, through timers.RunDue (four fires per op, the last
// completing the relay timer).
func BenchmarkRelay(b *testing.B) {
	for _, eng := range testengine.All {
		for _, n := range targetCounts {
			b.Run(fmt.Sprintf("%s/targets=%d", eng.Name, n), func(b *testing.B) {
				f := newFixture(b, eng, n, benchBudget, nil)
				f.queue(b, opRows)
				f.drain(b)
				var m meter
				for b.Loop() {
					b.StopTimer()
					f.queue(b, opRows)
					timed(b, &m, opRows, func() { f.drain(b) })
					b.StartTimer()
				}
				m.report(b, "")
			})
		}
	}
}

// BenchmarkRelayBacklog relays 1,000 rows per op (five fires of 200
// rows: MaxRows 50) from the head of a queue of 1,000 or 100,000 rows to
// 10 targets, queueing 1,000 rows at its end after each op so the backlog
// stays. The per-row cost must not grow with the backlog. Beside it, on a
// second store fed the same rows, the baseline applies the same batches
// (see BenchmarkRelayVsBaseline), so that what the store itself costs more
// with a longer queue shows apart from the relay.
func BenchmarkRelayBacklog(b *testing.B) {
	const rows, fires = 1_000, 5
	budget := benchBudget
	budget.MaxRows = rows / fires / 4
	for _, eng := range testengine.All {
		for _, backlog := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/backlog=%d", eng.Name, backlog), func(b *testing.B) {
				r := newFixture(b, eng, 10, budget, nil)
				base := newFixture(b, eng, 10, budget, nil)
				r.queue(b, backlog)
				base.queue(b, backlog)
				var rm, bm meter
				i := 0
				for b.Loop() {
					b.StopTimer()
					steps := base.plan(b, 4*budget.MaxRows, fires)
					runRelay := func() {
						for range fires {
							r.fire(b)
						}
					}
					runBase := func() { base.applyAll(b, steps) }
					if i%2 == 0 {
						timed(b, &rm, rows, runRelay)
						timed(b, &bm, rows, runBase)
					} else {
						timed(b, &bm, rows, runBase)
						timed(b, &rm, rows, runRelay)
					}
					i++
					base.now = r.now // rows are stamped with it
					r.queue(b, rows)
					base.queue(b, rows)
					b.StartTimer()
				}
				if q := r.queued(b); q != backlog {
					b.Fatalf("backlog %d rows, want %d", q, backlog)
				}
				rm.report(b, "")
				bm.report(b, "baseline-")
				b.ReportMetric(rm.nsPerRow()/bm.nsPerRow(), "relay/baseline")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkRelayVsBaseline times the relay and the baseline on identical
// data: two stores fed the same rows each op, one drained by the relay
// through timers.RunDue, the other by applying the batches the relay
// applies, planned beforehand (see plan). A third store fed the same rows
// times reading them as the relay reads them, and nothing else (see
// readQueue): the part of the relay's cost that no relay avoids. The
// three take turns in going first. It reports the three costs per row,
// relay/baseline, the relay's time over the baseline's, and
// read/baseline, the reading's (relay/baseline minus read/baseline is
// what the relay's own logic costs beyond reading its rows); ns/op is
// reported as 0 (it would be the sum of all three).
func BenchmarkRelayVsBaseline(b *testing.B) {
	for _, eng := range testengine.All {
		for _, n := range targetCounts {
			b.Run(fmt.Sprintf("%s/targets=%d", eng.Name, n), func(b *testing.B) {
				if benchBudget.MaxTargets < n {
					b.Fatalf("a fire must reach all %d targets for the baseline's batches to be the relay's", n)
				}
				r := newFixture(b, eng, n, benchBudget, nil)
				base := newFixture(b, eng, n, benchBudget, nil)
				rd := newFixture(b, eng, n, benchBudget, nil)
				var rm, bm, dm meter
				i := 0
				for b.Loop() {
					b.StopTimer()
					base.now, rd.now = r.now, r.now // rows are stamped with it
					r.queue(b, opRows)
					base.queue(b, opRows)
					rd.queue(b, opRows)
					steps := base.plan(b, 4*benchBudget.MaxRows, 0)
					runs := []func(){
						func() { timed(b, &rm, opRows, func() { r.drain(b) }) },
						func() { timed(b, &bm, opRows, func() { base.applyAll(b, steps) }) },
						func() { timed(b, &dm, opRows, func() { rd.readQueue(b) }) },
					}
					for k := range runs {
						runs[(i+k)%len(runs)]()
					}
					i++
					// The reader's rows go as the baseline's did, so that
					// its store keeps the others' shape.
					rd.applyAll(b, rd.plan(b, 4*benchBudget.MaxRows, 0))
					b.StartTimer()
				}
				rm.report(b, "")
				bm.report(b, "baseline-")
				b.ReportMetric(rm.nsPerRow()/bm.nsPerRow(), "relay/baseline")
				b.ReportMetric(dm.nsPerRow(), "read-ns/row")
				b.ReportMetric(dm.nsPerRow()/bm.nsPerRow(), "read/baseline")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkQueueRead reads opRows queued rows per op as the relay reads
// them (see readQueue), and nothing else: the part of the relay's cost
// that the baseline, which knows its batches beforehand, does not pay. It
// reads the same rows each op, so they are warmer in the caches than a
// relay's newly queued rows: BenchmarkRelayVsBaseline's read-ns/row is the
// figure beside the relay's.
func BenchmarkQueueRead(b *testing.B) {
	for _, eng := range testengine.All {
		b.Run(eng.Name, func(b *testing.B) {
			f := newFixture(b, eng, 10, benchBudget, nil)
			f.queue(b, opRows)
			var m meter
			for b.Loop() {
				b.StopTimer()
				timed(b, &m, opRows, func() { f.readQueue(b) })
				b.StartTimer()
			}
			m.report(b, "")
		})
	}
}
