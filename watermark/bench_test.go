package watermark_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// benchNowMs is the benchmarks' nowMs: above every lease's watermark, so
// the result is the least of them.
const benchNowMs = 1 << 40

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
	var e fdblayer.Engine
	switch engine {
	case "memory":
		e = fdblayer.NewMemoryEngine()
	case "bbolt":
		if benchTables.dir == "" {
			dir, err := os.MkdirTemp("", "watermark-bench-")
			if err != nil {
				b.Fatal(err)
			}
			benchTables.dir = dir
		}
		be, err := fdblayer.OpenBoltEngine(filepath.Join(benchTables.dir, fmt.Sprintf("%d.bbolt", shards)), fdblayer.BoltOptions{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		e = be
	default:
		b.Fatalf("no engine %q", engine)
	}
	const batchRows = 300
	l, err := fdblayer.Open(e, fdblayer.WithMaxBatchOps(batchRows))
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
	got, err := watermark.Watermark(context.Background(), s, benchCoordinator, benchNowMs)
	if err != nil || got != t.least {
		b.Fatalf("watermark %d, %v; want %d", got, err, t.least)
	}
}

// scan reads the lease table in pages of watermark.PageSize with nothing
// else (no markers, no decoding): the baseline the watermark is compared
// with.
func (t *benchTable) scan(b *testing.B) {
	start, end := refdomain.ClassRange(refdomain.TagLeasedShardKey)
	var cursor store.Cursor
	rows := 0
	for {
		page, err := t.layer.Scan(context.Background(), benchCoordinator, start, end, cursor, watermark.PageSize)
		if err != nil {
			b.Fatal(err)
		}
		rows += len(page.Entries)
		if page.Next == nil {
			break
		}
		cursor = page.Next
	}
	if rows != t.shards {
		b.Fatalf("scanned %d rows of %d", rows, t.shards)
	}
}

// callsPerPage counts the store calls of one watermark and its pages
// (its scans), through a counting wrapper.
func (t *benchTable) callsPerPage(b *testing.B) float64 {
	f := storetest.WithFaults(t.layer)
	t.watermark(b, f)
	calls := 0
	for _, m := range []storetest.Method{storetest.MethodGet, storetest.MethodGetMany, storetest.MethodScan, storetest.MethodApply} {
		calls += f.Calls(m)
	}
	return float64(calls) / float64(f.Calls(storetest.MethodScan))
}

// BenchmarkWatermark measures a full watermark (Watermark: pages of 128,
// the recovery fence read at each page and again after the last) over a
// coordinator of 10,000 shards, on the memory engine and on bbolt. Each
// iteration also scans the same pages with nothing else, timed apart:
// ratio-vs-scan is what the fence reads and the decoding of each row cost
// on top of the store's own reads. store-calls/page is counted, not timed.
func BenchmarkWatermark(b *testing.B) {
	const shards = 10_000
	for _, engine := range benchEngines {
		benchTableOf(b, engine, shards)
	}
	for _, engine := range benchEngines {
		b.Run(fmt.Sprintf("%s/shards=%d", engine, shards), func(b *testing.B) {
			t := benchTableOf(b, engine, shards)
			perPage := t.callsPerPage(b)
			var scanning time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t.watermark(b, t.layer)
				b.StopTimer()
				start := time.Now()
				t.scan(b)
				scanning += time.Since(start)
				b.StartTimer()
			}
			n := float64(b.N * shards)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/shard")
			b.ReportMetric(perPage, "store-calls/page")
			b.ReportMetric(float64(scanning.Nanoseconds())/n, "scan-ns/shard")
			b.ReportMetric(float64(b.Elapsed())/float64(scanning), "ratio-vs-scan")
		})
	}
}

// BenchmarkWatermarkScaling runs a full watermark over 1,000 and then
// 100,000 shards in every iteration, so that both see the same load, and
// reports each one's ns/shard and their ratio (the target is at most
// 1.25: a page's cost does not follow the table's size).
// scan-ratio-100k/1k is the same ratio for the bare scan of the same
// pages: how much the engine's own reads slow down with its size.
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
			tables := [2]*benchTable{benchTableOf(b, engine, sizes[0]), benchTableOf(b, engine, sizes[1])}
			var marking, scanning [2]time.Duration
			b.ResetTimer()
			for range b.N {
				for i, t := range tables {
					start := time.Now()
					t.watermark(b, t.layer)
					marking[i] += time.Since(start)
					start = time.Now()
					t.scan(b)
					scanning[i] += time.Since(start)
				}
			}
			perShard := func(d time.Duration, shards int) float64 {
				return float64(d.Nanoseconds()) / float64(b.N*shards)
			}
			small, large := perShard(marking[0], sizes[0]), perShard(marking[1], sizes[1])
			b.ReportMetric(small, "ns/shard@1k")
			b.ReportMetric(large, "ns/shard@100k")
			b.ReportMetric(large/small, "ratio-100k/1k")
			b.ReportMetric(perShard(scanning[1], sizes[1])/perShard(scanning[0], sizes[0]), "scan-ratio-100k/1k")
			b.ReportMetric(0, "ns/op") // both sizes and their scans: not a figure of its own
		})
	}
}
