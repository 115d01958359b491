package admin

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// t0 is the fixture's "now".
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The fixture's partitions: a customer shard whose relay rows go to two
// region shards, and a partition of a namespace no linked package
// declares.
var (
	ada     = ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("ada")}
	region1 = ordersgen.RegionShard{Region: 1}
	region2 = ordersgen.RegionShard{Region: 2}
	foreign = mustIdentity(tuple.Tuple{"elsewhere", int64(1), "x"})
)

func mustIdentity(t tuple.Tuple) store.Identity {
	b, err := tuple.Pack(t)
	if err != nil {
		panic(err)
	}
	id, err := store.ParseIdentity(b)
	if err != nil {
		panic(err)
	}
	return id
}

func idText(p store.Partition) string {
	b, err := p.AppendTuple(nil)
	if err != nil {
		panic(err)
	}
	return formatTuple(b)
}

// kindShip is the fixture service's timer kind.
const kindShip timers.Kind = 1000

// fixture writes, into a new bbolt file, a store holding what every view
// shows: queued relay rows, one of them corrupt, holding the source; a
// blocked target; due, waiting and held timers; an outcome backlog whose
// sink failed; a partition of an unlinked namespace. It returns the
// file's path, closed.
func fixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fixture.db")
	l := openBolt(t, path)
	defer l.Close()
	ctx := context.Background()
	apply := func(p store.Partition, b *store.Batch) {
		t.Helper()
		out, err := l.Apply(ctx, p, b)
		if err != nil || !out.Committed() {
			t.Fatalf("apply to %v: %v %v", p, out, err)
		}
	}
	// Three relay rows queued five minutes ago, and an order made
	// terminal as an outcome.
	obs, err := outbox.Read(ctx, store.ReaderOf(l, ada))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.NewBuilder(l, t0.Add(-5*time.Minute), obs)
	if err != nil {
		t.Fatal(err)
	}
	for i, target := range []store.Partition{region1, region2, region1} {
		put := gen.RelayPut{Key: orderKey(t, uint64(i+1)), Value: []byte{byte(i + 1)}}
		if _, err := ob.Relay(context.Background(), target, []gen.RelayPut{put}, nil); err != nil {
			t.Fatal(err)
		}
	}
	orderK := orderKey(t, 9)
	prior, _ := ordersgen.EncodeOrderV1(ordersgen.OrderV1{Status: ordersgen.StatusOpen, Region: 1, Note: "teapot"})
	terminal, _ := ordersgen.EncodeOrderV1(ordersgen.OrderV1{Status: ordersgen.StatusShipped, Region: 1, Note: "teapot"})
	apply(ada, store.NewBatch().Put(orderK, prior))
	if _, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("ord_ada_9"), Source: gen.MustOutcomeSource("orders.shipped"),
		Key: orderK, Prior: prior, Terminal: terminal}); err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	if err := ob.Finish(b); err != nil {
		t.Fatal(err)
	}
	apply(ada, b)

	// Row 2 corrupted; the relay held by it (as a fire that found it
	// leaves the timer), region 2 blocked, the sink failed twice.
	apply(ada, store.NewBatch().Put(gen.AppendRelayKey(nil, 2), []byte{0x01, 0xde, 0xad}))
	id2, _ := region2.AppendTuple(nil)
	scan, _ := gen.EncodeRelayScanV1(gen.RelayScanV1{CycleEnd: 3, Cursor: 1, Blocked: [][]byte{id2}})
	apply(ada, store.NewBatch().Put(gen.AppendRelayScanKey(nil), scan))
	hold, _ := gen.EncodeRelayTimerV1(gen.RelayTimerV1{HoldMs: 4000})
	schedule(t, l, ada, timers.Timer{Kind: timers.KindRelay, DueAt: t0.Add(4 * time.Second), Value: hold})
	backoff, _ := gen.EncodeOutcomeTimer(gen.OutcomeTimer{Attempt: 2})
	schedule(t, l, ada, timers.Timer{Kind: timers.KindOutcomeDelivery, DueAt: t0.Add(30 * time.Second), Value: backoff})
	// The service's timers: one due a minute ago, one in an hour.
	schedule(t, l, ada, timers.Timer{Kind: kindShip, Reference: "ship/ada/1", DueAt: t0.Add(-time.Minute), Value: []byte("box 1")})
	schedule(t, l, ada, timers.Timer{Kind: kindShip, Reference: "ship/ada/2", DueAt: t0.Add(time.Hour)})
	// A target that received a row, and a partition of a namespace
	// nothing linked declares, with a due timer.
	mark, _ := gen.EncodeU64Value(gen.U64Value{Value: 1})
	idAda, _ := ada.AppendTuple(nil)
	hw, _ := gen.AppendRelayHighWaterKey(nil, idAda)
	apply(region1, store.NewBatch().Put(orderKey(t, 1), []byte{1}).Put(hw, mark))
	schedule(t, l, foreign, timers.Timer{Kind: kindShip, Reference: "elsewhere", DueAt: t0.Add(-2 * time.Minute)})
	return path
}

func orderKey(t *testing.T, n uint64) store.Key {
	k, err := ordersgen.AppendOrderKey(nil, ordersgen.MustCustomerID("ada"), n)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openBolt opens the bbolt file at path for writing, as the service that
// writes the fixtures would: a new store starts at the formats this
// binary knows (the evolution partition holds them).
func openBolt(t *testing.T, path string) *fdblayer.Layer {
	t.Helper()
	e, err := boltengine.Open(path, boltengine.Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// schedule writes timer tm in p, replacing the timer of its kind and
// reference.
func schedule(t *testing.T, s store.Store, p store.Partition, tm timers.Timer) {
	t.Helper()
	ctx := context.Background()
	ref, _, err := timers.ReadRef(ctx, s, p, tm.Kind, tm.Reference)
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	if err := timers.Schedule(b, s.Capabilities(), ref, tm); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Apply(ctx, p, b); err != nil || !out.Committed() {
		t.Fatalf("schedule %v: %v %v", tm, out, err)
	}
}

// run runs the command with args at now and returns its status and
// output.
func run(t *testing.T, now time.Time, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := NewCommand(Config{Name: "mkitfdb", Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Clock: clock.NewManual(now), KindNames: map[timers.Kind]string{kindShip: "ship"}})
	code := c.Run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}
