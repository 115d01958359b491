package fdblayer_test

import (
	"bytes"
	"context"
	"fmt"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"path/filepath"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// The benchmarks pair the Layer with a "raw" baseline that does the same
// engine work by hand through the Engine interface: the same reads and
// writes on precomputed full keys, and (for scans) the same copy into
// caller-owned memory that the Store contract requires. The raw
// sub-benchmark runs second and reports layer/raw, the Layer's time over
// the baseline's in the same run.

const (
	benchRows      = 1000
	benchValueSize = 100
	benchPuts      = 10
	benchScanRows  = 64
)

// benchPartition is converted to the interface once: a conversion per
// call would allocate and be charged to the Layer.
var benchPartition store.Partition = testPartition("bench")

func benchKey(i int) store.Key { return store.Key(fmt.Sprintf("row/%06d", i)) }

// benchLayer returns a memory-engine Layer holding benchRows rows in
// benchPartition.
func benchLayer(b *testing.B) *Layer {
	b.Helper()
	l := openLayer(b, memengine.New())
	value := bytes.Repeat([]byte{'v'}, benchValueSize)
	for i := 0; i < benchRows; i += 50 {
		batch := store.NewBatch()
		for j := i; j < i+50; j++ {
			batch.Put(benchKey(j), value)
		}
		if _, err := l.Apply(context.Background(), benchPartition, batch); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// fullKey is the engine key of k in p under l.
func fullKey(b testing.TB, l *Layer, p store.Partition, k store.Key) []byte {
	b.Helper()
	sub, err := l.AppendSubspace(nil, p)
	if err != nil {
		b.Fatal(err)
	}
	return append(sub, k...)
}

// guardedBatch is one Equals guard on an existing row plus benchPuts puts.
func guardedBatch() *store.Batch {
	value := bytes.Repeat([]byte{'v'}, benchValueSize)
	batch := store.NewBatch().Require(store.Equals(benchKey(0), value))
	for i := range benchPuts {
		batch.Put(benchKey(100+i*37), bytes.Repeat([]byte{byte('a' + i)}, benchValueSize))
	}
	return batch
}

// benchPair runs layer and raw alternately, in blocks, so that drift in
// the machine's speed (other processes, frequency scaling) slows both
// alike, and reports each one's time per operation and their ratio. Both
// are warmed up first, and which goes first alternates from block to
// block, so that neither always runs on the caches the other left.
func benchPair(b *testing.B, layer, raw func()) {
	benchPairOf(b, "layer", "raw", layer, raw)
}

// benchPairOf is benchPair with the two sides named x and y: it reports
// x-ns/op, y-ns/op and x/y.
func benchPairOf(b *testing.B, x, y string, layer, raw func()) {
	const block = 32
	for range block {
		layer()
		raw()
	}
	var tl, tr time.Duration
	timed := func(fn func(), n int) time.Duration {
		start := time.Now()
		for range n {
			fn()
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for done, i := 0, 0; done < b.N; done, i = done+block, i+1 {
		n := min(block, b.N-done)
		if i%2 == 0 {
			tl += timed(layer, n)
			tr += timed(raw, n)
		} else {
			tr += timed(raw, n)
			tl += timed(layer, n)
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(tl.Nanoseconds())/float64(b.N), x+"-ns/op")
	b.ReportMetric(float64(tr.Nanoseconds())/float64(b.N), y+"-ns/op")
	b.ReportMetric(float64(tl)/float64(tr), x+"/"+y)
}

// applyBench holds one guarded batch and the ways to apply it.
type applyBench struct {
	l     *Layer
	p     store.Partition
	batch *store.Batch
	// The raw baseline's precomputed engine keys and scratch.
	guardKeys [][]byte
	putKeys   [][]byte
	vals      [][]byte
}

func newApplyBench(b *testing.B) *applyBench {
	a := &applyBench{l: benchLayer(b), p: benchPartition, batch: guardedBatch()}
	for _, c := range a.batch.Preconditions {
		a.guardKeys = append(a.guardKeys, fullKey(b, a.l, a.p, c.Key))
	}
	for _, w := range a.batch.Writes {
		a.putKeys = append(a.putKeys, fullKey(b, a.l, a.p, w.Key))
	}
	return a
}

func (a *applyBench) layer(b *testing.B) {
	out, err := a.l.Apply(context.Background(), a.p, a.batch)
	if err != nil || !out.Committed() {
		b.Fatalf("Apply: %v %v", out, err)
	}
}

// raw does by hand what Apply does for this batch: begin, read the guard,
// compare, put, commit.
func (a *applyBench) raw(b *testing.B) {
	txn, err := a.l.Engine().Begin(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer txn.Close()
	if a.vals, err = txn.GetMany(a.vals[:0], a.guardKeys); err != nil {
		b.Fatal(err)
	}
	for i, c := range a.batch.Preconditions {
		if !bytes.Equal(a.vals[i], c.Value) {
			b.Fatalf("guard %d does not hold", i)
		}
	}
	for i, w := range a.batch.Writes {
		txn.Set(a.putKeys[i], w.Value)
	}
	if err := txn.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMemoryApplyGuarded applies one Equals guard plus 10 puts of
// 100-byte values on the memory engine: through the Layer, by hand
// (raw), and both interleaved (pair, which reports layer/raw).
func BenchmarkMemoryApplyGuarded(b *testing.B) {
	b.Run("layer", func(b *testing.B) {
		a := newApplyBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			a.layer(b)
		}
	})
	b.Run("raw", func(b *testing.B) {
		a := newApplyBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			a.raw(b)
		}
	})
	b.Run("pair", func(b *testing.B) {
		la, ra := newApplyBench(b), newApplyBench(b)
		benchPair(b, func() { la.layer(b) }, func() { ra.raw(b) })
	})
}

// markBench is the relay's target batch in small: read a mark, then
// apply a batch guarded by what was read (benchPuts puts and the new
// mark), in one TransactOnce or as a Get and an Apply.
type markBench struct {
	l     *Layer
	p     store.Partition
	mark  store.Key
	puts  []store.Key
	batch *store.Batch
	fn    store.TransactFunc
}

func newMarkBench(b *testing.B) *markBench {
	m := &markBench{l: benchLayer(b), p: benchPartition, mark: benchKey(0), batch: store.NewBatch()}
	for i := range benchPuts {
		m.puts = append(m.puts, benchKey(100+i*37))
	}
	m.fn = func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		v, _, err := r.Get(ctx, m.mark)
		if err != nil {
			return nil, err
		}
		return m.build(v), nil
	}
	return m
}

// build resets the batch to the guard on the mark's value v, the puts,
// and the mark rewritten as it was.
func (m *markBench) build(v store.Value) *store.Batch {
	*m.batch = store.Batch{Preconditions: m.batch.Preconditions[:0], Writes: m.batch.Writes[:0]}
	m.batch.Require(store.Guard(m.mark, v))
	for _, k := range m.puts {
		m.batch.Put(k, v)
	}
	m.batch.Put(m.mark, v)
	return m.batch
}

func (m *markBench) transact(b *testing.B) {
	out, err := m.l.TransactOnce(context.Background(), m.p, m.fn)
	if err != nil || !out.Committed() {
		b.Fatalf("TransactOnce: %v %v", out, err)
	}
}

func (m *markBench) getApply(b *testing.B) {
	v, _, err := m.l.Get(context.Background(), m.p, m.mark)
	if err != nil {
		b.Fatal(err)
	}
	out, err := m.l.Apply(context.Background(), m.p, m.build(v))
	if err != nil || !out.Committed() {
		b.Fatalf("Apply: %v %v", out, err)
	}
}

// BenchmarkMemoryTransactOnce reads a row and applies 10 puts and the row
// guarded by what it read, on the memory engine, whose transactions run
// one at a time: in one TransactOnce (transact), as a Get and an Apply
// (getapply), and both interleaved (pair, which reports
// transact/getapply). One transaction must cost no more than the two.
func BenchmarkMemoryTransactOnce(b *testing.B) {
	b.Run("transact", func(b *testing.B) {
		m := newMarkBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			m.transact(b)
		}
	})
	b.Run("getapply", func(b *testing.B) {
		m := newMarkBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			m.getApply(b)
		}
	})
	b.Run("pair", func(b *testing.B) {
		x, y := newMarkBench(b), newMarkBench(b)
		benchPairOf(b, "transact", "getapply", func() { x.transact(b) }, func() { y.getApply(b) })
	})
}

// scanBench reads one page of benchScanRows rows.
type scanBench struct {
	l           *Layer
	p           store.Partition
	start, end  store.Key
	begin, stop []byte
	rows        []kv.KeyValue
}

func newScanBench(b *testing.B) *scanBench {
	s := &scanBench{l: benchLayer(b), p: benchPartition, start: benchKey(200), end: store.Key("row0")}
	s.begin, s.stop = fullKey(b, s.l, s.p, s.start), fullKey(b, s.l, s.p, s.end)
	return s
}

func (s *scanBench) layer(b *testing.B) {
	page, err := s.l.Scan(context.Background(), s.p, s.start, s.end, nil, benchScanRows)
	if err != nil || len(page.Entries) != benchScanRows || page.Next == nil {
		b.Fatalf("Scan: %d rows, %v", len(page.Entries), err)
	}
}

// raw reads one row more than the page, as Scan does to know whether the
// range goes on, and copies the page into caller-owned memory, as the
// Store contract requires.
func (s *scanBench) raw(b *testing.B) {
	txn, err := s.l.Engine().BeginRead(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer txn.Close()
	if s.rows, err = txn.GetRange(s.rows[:0], s.begin, s.stop, benchScanRows+1, 0); err != nil || len(s.rows) != benchScanRows+1 {
		b.Fatalf("GetRange: %d rows, %v", len(s.rows), err)
	}
	prefixLen := len(s.begin) - len(s.start)
	n := 0
	for _, r := range s.rows[:benchScanRows] {
		n += len(r.Key) - prefixLen + len(r.Value)
	}
	arena := make([]byte, 0, n)
	entries := make([]store.KeyValue, benchScanRows)
	for i, r := range s.rows[:benchScanRows] {
		k := len(arena)
		arena = append(arena, r.Key[prefixLen:]...)
		v := len(arena)
		arena = append(arena, r.Value...)
		entries[i] = store.KeyValue{Key: arena[k:v:v], Value: arena[v:len(arena):len(arena)]}
	}
	scanSink = entries
}

// scanSink keeps the raw baseline's copy from being optimised away.
var scanSink []store.KeyValue

// BenchmarkMemoryScanPage reads one 64-row page of 100-byte values on the
// memory engine: through the Layer, by hand (raw), and both interleaved
// (pair, which reports layer/raw).
func BenchmarkMemoryScanPage(b *testing.B) {
	b.Run("layer", func(b *testing.B) {
		s := newScanBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			s.layer(b)
		}
	})
	b.Run("raw", func(b *testing.B) {
		s := newScanBench(b)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			s.raw(b)
		}
	})
	b.Run("pair", func(b *testing.B) {
		ls, rs := newScanBench(b), newScanBench(b)
		benchPair(b, func() { ls.layer(b) }, func() { rs.raw(b) })
	})
}

// BenchmarkBoltApplyGuarded applies one Equals guard plus 10 puts to a
// bbolt file, syncing each commit (sync) or not (nosync).
func BenchmarkBoltApplyGuarded(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		name := "sync"
		if noSync {
			name = "nosync"
		}
		b.Run(name, func(b *testing.B) {
			e, err := boltengine.Open(filepath.Join(b.TempDir(), "bench.bbolt"), boltengine.Config{NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			l := openLayer(b, e)
			ctx := context.Background()
			batch := guardedBatch()
			if _, err := l.Apply(ctx, benchPartition, store.NewBatch().Put(benchKey(0), batch.Preconditions[0].Value)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				out, err := l.Apply(ctx, benchPartition, batch)
				if err != nil || !out.Committed() {
					b.Fatalf("Apply: %v %v", out, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
		})
	}
}
