package watermark_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/leases"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// benchNowMs is the benchmarks' now as stored: above every lease's
// watermark, so the result is the least of them; benchNow is it as a time.
const benchNowMs = 1 << 40

var benchNow = store.DecodeTime(benchNowMs)

// The benchmarks run on the reference domain's lease table
// (refdomain/leases), whose rows are what their figures have always
// measured.
var benchLeases = func() *leases.Table {
	t, err := leases.NewTable()
	if err != nil {
		panic(err)
	}
	return t
}()

// benchEngines are the engines the benchmarks run on: bbolt without fsync
// (a scan does not write).
var benchEngines = []string{"memory", "bbolt"}

// benchTable is a coordinator whose lease table holds shards leases, with
// watermarks from a fixed seed, on one engine; least is the least of them.
type benchTable struct {
	layer  *fdblayer.Layer
	shards int
	least  uint64
}

// benchTables are built once per engine and size and kept for every run
// of the benchmarks (bbolt files in dir, removed by TestMain).
var benchTables = struct {
	sync.Mutex
	dir string
	m   map[string]*benchTable
}{m: map[string]*benchTable{}}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, t := range benchTables.m {
		_ = t.layer.Close()
	}
	if benchTables.dir != "" {
		_ = os.RemoveAll(benchTables.dir)
	}
	os.Exit(code)
}

// benchTableOf returns the table of shards leases on engine, building it
// the first time, in batches of 300 rows (about what the engines' transaction limits allow).
func benchTableOf(b *testing.B, engine string, shards int) *benchTable {
	benchTables.Lock()
	defer benchTables.Unlock()
	name := fmt.Sprintf("%s/%d", engine, shards)
	if t, ok := benchTables.m[name]; ok {
		return t
	}
	var e kv.Engine
	switch engine {
	case "memory":
		e = memengine.New()
	case "bbolt":
		if benchTables.dir == "" {
			dir, err := os.MkdirTemp("", "watermark-bench-")
			if err != nil {
				b.Fatal(err)
			}
			benchTables.dir = dir
		}
		be, err := boltengine.Open(filepath.Join(benchTables.dir, fmt.Sprintf("%d.bbolt", shards)), boltengine.Config{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		e = be
	default:
		b.Fatalf("no engine %q", engine)
	}
	const batchRows = 300
	l, err := fdblayer.Open(e, fdblayer.Config{MaxBatchOps: batchRows})
	if err != nil {
		b.Fatal(err)
	}
	t := &benchTable{layer: l, shards: shards, least: benchNowMs}
	rng := rand.New(rand.NewPCG(uint64(shards), 12))
	ref := refdomain.MustShardRef("refs/heads/main")
	batch := store.NewBatch()
	for i := range shards {
		key, err := refdomain.AppendLeasedShardKey(nil, refdomain.MustRepoName(fmt.Sprintf("repo-%07d", i)), ref)
		if err != nil {
			b.Fatal(err)
		}
		w := 1_000_000 + rng.Uint64N(1_000_000_000)
		t.least = min(t.least, w)
		row, err := refdomain.EncodeLeasedShard(refdomain.LeasedShard{Epoch: 3, AckedEpoch: 3, ExpiresAtMs: w + 60_000, SweepDueMs: w + 120_000, RelayWatermarkMs: w})
		if err != nil {
			b.Fatal(err)
		}
		batch.Put(key, row)
		if batch.Ops() == batchRows || i == shards-1 {
			if out, err := l.Apply(context.Background(), benchCoordinator, batch); err != nil || !out.Committed() {
				b.Fatalf("seed: %v, %v", out, err)
			}
			batch = store.NewBatch()
		}
	}
	benchTables.m[name] = t
	return t
}

var benchCoordinator = refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("bench")}

// watermark runs a full watermark of the table on s and checks its result.
func (t *benchTable) watermark(b *testing.B, s store.Store) {
	got, err := benchLeases.Watermark(context.Background(), s, benchCoordinator, benchNow)
	if want := store.DecodeTime(t.least); err != nil || !got.Equal(want) {
		b.Fatalf("watermark %v, %v; want %v", got, err, want)
	}
}

// scan reads the lease table in pages of watermark.PageSize with nothing
// else (no markers, no decoding): the baseline the watermark is compared
// with.
func (t *benchTable) scan(b *testing.B) {
	for next := t.scanner(b); !next(); {
	}
}

// The lease table's range.
var shardStart, shardEnd = refdomain.ClassRange(refdomain.TagLeasedShardKey)

// callsPerPage counts the store calls of one watermark and its pages
// (its scans), through a counting wrapper.
func (t *benchTable) callsPerPage(b *testing.B) float64 {
	f := storetest.NewFaults(t.layer)
	t.watermark(b, f)
	calls := 0
	for _, m := range []storetest.Method{storetest.MethodGet, storetest.MethodGetMany, storetest.MethodScan, storetest.MethodApply} {
		calls += f.Calls(m)
	}
	return float64(calls) / float64(f.Calls(storetest.MethodScan))
}

// BenchmarkWatermark measures a full watermark (Table.Watermark: pages of 128,
// the recovery fence read at each page and again after the last) over a
// coordinator of 10,000 shards, on the memory engine and on bbolt:
// ns/shard, and store-calls/page (counted, not timed). Its pair
// sub-benchmark runs the same watermark page by page alternating with a
// bare scan of the same pages (no fence, no decoding), so that machine
// noise slows both alike, and reports the ratio of their median page
// times, watermark/scan: what the fence reads and the decoding of each
// row cost on top of the store's own reads.
func BenchmarkWatermark(b *testing.B) {
	const shards = 10_000
	for _, engine := range benchEngines {
		benchTableOf(b, engine, shards)
	}
	for _, engine := range benchEngines {
		t := benchTableOf(b, engine, shards)
		b.Run(fmt.Sprintf("%s/shards=%d", engine, shards), func(b *testing.B) {
			perPage := t.callsPerPage(b)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t.watermark(b, t.layer)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*shards), "ns/shard")
			b.ReportMetric(perPage, "store-calls/page")
		})
		b.Run(fmt.Sprintf("%s/shards=%d/pair", engine, shards), func(b *testing.B) {
			var marking, scanning samples
			for range b.N {
				alternate(&marking, &scanning, t.stepper(b), t.scanner(b))
			}
			b.ReportMetric(marking.median(), "ns/shard")
			b.ReportMetric(scanning.median(), "scan-ns/shard")
			b.ReportMetric(marking.median()/scanning.median(), "watermark/scan")
			b.ReportMetric(0, "ns/op") // both passes: not a figure of its own
		})
	}
}

// BenchmarkWatermarkScaling compares a full watermark over 1,000 shards
// with one over 100,000 and reports each one's ns/shard and their ratio
// (the target is at most 1.25: a page's cost does not follow the table's
// size). Each iteration runs the large watermark (Step, PageSize rows a
// step: what Watermark does) and, between each 8 of its pages (1,024
// shards), a whole small one (Watermark), so that both see the machine's
// load at the same moments. The figures are medians over those chunks,
// which a chunk hit by preemption on a busy machine does not move;
// mean-ratio-100k/1k is the ratio of the total times instead.
// scan-ratio-100k/1k is ratio-100k/1k for bare scans of the same pages,
// interleaved alike: how much the engine's own reads slow down with its
// size.
func BenchmarkWatermarkScaling(b *testing.B) {
	sizes := [2]int{1_000, 100_000}
	for _, engine := range benchEngines {
		for _, shards := range sizes {
			// Every table exists before any runs: each run then works with
			// the same live heap.
			benchTableOf(b, engine, shards)
		}
	}
	for _, engine := range benchEngines {
		b.Run(engine, func(b *testing.B) {
			small, large := benchTableOf(b, engine, sizes[0]), benchTableOf(b, engine, sizes[1])
			var marking, scanning [2]samples
			for range b.N {
				interleave(&marking, func() { small.watermark(b, small.layer) }, small.shards, large.stepper(b))
				interleave(&scanning, func() { small.scan(b) }, small.shards, large.scanner(b))
			}
			b.ReportMetric(marking[0].median(), "ns/shard@1k")
			b.ReportMetric(marking[1].median(), "ns/shard@100k")
			b.ReportMetric(marking[1].median()/marking[0].median(), "ratio-100k/1k")
			b.ReportMetric(marking[1].mean()/marking[0].mean(), "mean-ratio-100k/1k")
			b.ReportMetric(scanning[1].median()/scanning[0].median(), "scan-ratio-100k/1k")
			b.ReportMetric(0, "ns/op") // both sizes and their scans: not a figure of its own
		})
	}
}

// samples are the times per shard, in ns, of timed chunks of work of
// equal size.
type samples []float64

func (s *samples) add(d time.Duration, shards int) {
	*s = append(*s, float64(d.Nanoseconds())/float64(shards))
}

func (s samples) median() float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return c[len(c)/2]
}

func (s samples) mean() float64 {
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return sum / float64(max(len(s), 1))
}

// alternate runs two passes page by page, a page of one then a page of
// the other (next reads a page and reports whether its pass is done),
// until both are done, and adds the time of each full page (each but the
// last) to sa or sb.
func alternate(sa, sb *samples, a, b func() bool) {
	for aDone, bDone := false, false; !aDone || !bDone; {
		if !aDone {
			start := time.Now()
			if aDone = a(); !aDone {
				sa.add(time.Since(start), watermark.PageSize)
			}
		}
		if !bDone {
			start := time.Now()
			if bDone = b(); !bDone {
				sb.add(time.Since(start), watermark.PageSize)
			}
		}
	}
}

// interleavedPages is how many pages of the large pass run between two
// small passes.
const interleavedPages = 8

// interleave runs one whole large pass, interleavedPages pages at a time
// (next reads one page and reports whether the pass is done), and a whole
// small pass of smallShards before each of those chunks, and adds the
// time of each small pass to s[0] and of each full chunk (each but the
// last) to s[1].
func interleave(s *[2]samples, small func(), smallShards int, next func() bool) {
	for done := false; !done; {
		start := time.Now()
		small()
		s[0].add(time.Since(start), smallShards)
		start = time.Now()
		for range interleavedPages {
			if done = next(); done {
				break
			}
		}
		if !done {
			s[1].add(time.Since(start), interleavedPages*watermark.PageSize)
		}
	}
}

// stepper returns a function that runs the next Step of a watermark of
// the table, as Watermark does, and reports whether it was the last,
// checking the result.
func (t *benchTable) stepper(b *testing.B) func() bool {
	var checkpoint *leases.Checkpoint
	return func() bool {
		next, got, err := benchLeases.Step(context.Background(), t.layer, benchCoordinator, benchNow, checkpoint, watermark.PageSize)
		if err != nil {
			b.Fatal(err)
		}
		if checkpoint = next; next != nil {
			return false
		}
		if want := store.DecodeTime(t.least); !got.Equal(want) {
			b.Fatalf("watermark %v; want %v", got, want)
		}
		return true
	}
}

// scanner returns a function that reads the next page of a bare scan of
// the table (see scan) and reports whether it was the last.
func (t *benchTable) scanner(b *testing.B) func() bool {
	var cursor store.Cursor
	rows := 0
	return func() bool {
		page, err := t.layer.Scan(context.Background(), benchCoordinator, shardStart, shardEnd, cursor, watermark.PageSize)
		if err != nil {
			b.Fatal(err)
		}
		rows += len(page.Entries)
		if cursor = page.Next; cursor != nil {
			return false
		}
		if rows != t.shards {
			b.Fatalf("scanned %d rows of %d", rows, t.shards)
		}
		return true
	}
}
