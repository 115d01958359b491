// Package bench holds the benchmarks of the relay hot path (this
// directory, in the main module) and of the codecs (bench/codecs, a module
// of its own). It has no non-test code.
//
// The relay benchmarks fire the relay through timers.RunDue, as a
// scheduler would, so each fire also pays for the timer's own scan, read
// and guarded move. Rows are queued through outbox.Builder outside the
// timed region (b.StopTimer/b.StartTimer).
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The shape of a benchmark row: 4 puts of 64-byte keys and 256-byte values.
const (
	putsPerRow = 4
	keyBytes   = 64
	valueBytes = 256
	// keyPool distinct target keys per target: rows overwrite them, so a
	// target stays small however many rows are relayed.
	keyPool = 1024
	// queueBatchRows rows are queued per outbox batch.
	queueBatchRows = 64
)

// benchBudget is the relay budget of the benchmarks: the defaults, but
// room for every target in one fire, so that each fire delivers its
// whole window (4*MaxRows rows) and the baseline's batches are the
// relay's.
var benchBudget = relay.Budget{MaxRows: relay.DefaultMaxRows, MaxTargets: 128}

// sourcePartition is the relay's source, converted to the interface once.
var sourcePartition store.Partition = refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}

// fixture is one source partition relaying to n target partitions of one
// store, with a relay registered and a clock the benchmark moves.
type fixture struct {
	ctx     context.Context
	s       store.Store
	targets []refdomain.Partition
	reg     *timers.Registry
	now     time.Time
	rows    int // rows queued so far
	keys    [][]byte
	value   []byte
	log     *slog.Logger

	// readQueue's memory, reused as a relay's scratch is.
	readBuf    []byte
	readPage   []store.KeyValue
	readRecord gen.RelayV1
}

// newFixture opens a Layer on eng's engine with nTargets targets; the
// relay's target store is the same store unless wrap returns another.
func newFixture(tb testing.TB, eng testengine.Engine, nTargets int, budget relay.Budget, wrap func(store.Store) store.Store) *fixture {
	tb.Helper()
	l, err := fdblayer.Open(eng.Open(tb, "bench.bbolt"), fdblayer.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	var s store.Store = l
	if wrap != nil {
		s = wrap(l)
	}
	f := &fixture{ctx: context.Background(), s: s, now: time.UnixMilli(1_000_000), log: slog.New(slog.DiscardHandler)}
	for i := range nTargets {
		f.targets = append(f.targets, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("target-%03d", i))})
	}
	for i := range keyPool {
		f.keys = append(f.keys, fmt.Appendf(nil, "bench/key/%054d", i))
	}
	f.value = make([]byte, valueBytes)
	for i := range f.value {
		f.value[i] = byte('a' + i%26)
	}
	f.reg, err = timers.NewRegistry(newRelayHandler(tb, relay.HandlerConfig{Target: s, Budget: budget}))
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// queue appends n rows to the source's outbox, round-robin over the
// targets, through outbox.Builder (which keeps the relay timer).
func (f *fixture) queue(tb testing.TB, n int) {
	tb.Helper()
	puts := make([]gen.RelayPut, putsPerRow)
	for n > 0 {
		o, err := outbox.Read(f.ctx, store.ReaderOf(f.s, sourcePartition))
		if err != nil {
			tb.Fatal(err)
		}
		ob, err := outbox.NewBuilder(f.s, f.now, o)
		if err != nil {
			tb.Fatal(err)
		}
		for range min(n, queueBatchRows) {
			for j := range puts {
				puts[j] = gen.RelayPut{Key: f.keys[(f.rows*putsPerRow+j)%keyPool], Value: f.value}
			}
			if _, err := ob.Relay(context.Background(), f.targets[f.rows%len(f.targets)], puts, nil); err != nil {
				tb.Fatal(err)
			}
			f.rows++
			n--
		}
		b := store.NewBatch()
		if err := ob.Finish(b); err != nil {
			tb.Fatal(err)
		}
		out, err := f.s.Apply(f.ctx, sourcePartition, b)
		if err != nil || !out.Committed() {
			tb.Fatalf("queue rows: %v %v", out, err)
		}
	}
}

// fire runs the source's due timers once at the fixture's time, which
// must fire the relay, and moves the time on by a millisecond (the delay
// of a relay fire that delivered rows). done reports that the relay timer
// completed.
func (f *fixture) fire(tb testing.TB) (done bool) {
	rep, err := timers.RunDue(f.ctx, f.s, sourcePartition, f.reg, f.now, timers.RunConfig{Logger: f.log})
	if err != nil {
		tb.Fatal(err)
	}
	if rep.Fired != 1 {
		tb.Fatalf("relay fire at %v: %+v", f.now, rep)
	}
	f.now = f.now.Add(time.Millisecond)
	return rep.NextDue.IsZero()
}

// drain fires the relay until its timer completes and returns the fires.
func (f *fixture) drain(tb testing.TB) int {
	for n := 1; ; n++ {
		if f.fire(tb) {
			return n
		}
	}
}

// readQueue reads the source's whole queue as relay fires read it, and
// does nothing else: windows of 4*relay.DefaultMaxRows rows in scan pages
// of relay.ScanPageRows rows, read into memory the fixture reuses (the
// relay's store.ScanAppender path), each row's key parsed and its value
// decoded into a record the fixture reuses (the relay's decoder). It is
// the part of the relay's cost that the baseline, which knows its batches
// beforehand, does not pay: no relay can deliver a row it has not read.
func (f *fixture) readQueue(tb testing.TB) {
	sa, ok := f.s.(store.ScanAppender)
	if !ok {
		tb.Fatalf("%T is not a store.ScanAppender", f.s)
	}
	start, end := gen.ClassRange(gen.TagRelayKey)
	var after store.Cursor
	for window := 0; ; {
		if window == 4*relay.DefaultMaxRows {
			// A fire keeps its read buffer for the next one.
			f.readBuf, window = f.readBuf[:0], 0
		}
		page, buf, err := sa.AppendScan(f.ctx, sourcePartition, start, end, after, relay.ScanPageRows, f.readPage[:0], f.readBuf)
		if err != nil {
			tb.Fatal(err)
		}
		f.readPage, f.readBuf = page.Entries, buf
		for _, kv := range page.Entries {
			if _, err := gen.ParseRelayKey(kv.Key); err != nil {
				tb.Fatal(err)
			}
			if err := gen.DecodeRelayV1Into(kv.Value, &f.readRecord); err != nil {
				tb.Fatal(err)
			}
		}
		window += len(page.Entries)
		if page.Next == nil {
			f.readBuf = f.readBuf[:0]
			return
		}
		after = page.Next
	}
}

// queued counts the source's queued rows.
func (f *fixture) queued(tb testing.TB) int {
	tb.Helper()
	start, end := gen.ClassRange(gen.TagRelayKey)
	n := 0
	var after store.Cursor
	for {
		page, err := f.s.Scan(f.ctx, sourcePartition, start, end, after, 10_000)
		if err != nil {
			tb.Fatal(err)
		}
		n += len(page.Entries)
		if page.Next == nil {
			return n
		}
		after = page.Next
	}
}
