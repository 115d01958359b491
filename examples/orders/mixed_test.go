package orders_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/examples/orders"
	"github.com/mkit-dev/mkitfdb/examples/orders/internal/ordersv1"
	v1gen "github.com/mkit-dev/mkitfdb/examples/orders/internal/ordersv1/ordersgen"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The mixed-version test runs the older and the newer binary of the
// orders service on one store, in one test program: the older is package
// ordersv1 over the codecs generated from the schema as released before
// OrderV2 (examples/orders/internal/ordersv1/ordersgen, generated with
// codegen -unregistered, since package registry rightly refuses two
// registered packages of one namespace; the handlers use the generated
// codecs directly, never the registry), its Layer's gate claiming to know
// orders format 1 (evolve.GateConfig.Known); the newer is package orders
// over ordersgen. Two test binaries could not share the memory and MVCC
// engines; one program can, and runs both binaries' schedulers on them at
// once, and on bbolt in turns (bbolt allows one process at a time).

// mixedGate is the gates' refresh: long, so that a gate reads the store's
// formats again only when the test says (Gate.Sync); a process row lives
// four refreshes on the test's clock.
const mixedGate = time.Hour

// heldBackoff is how long a scheduler holds a timer whose handler met a
// row of a newer version.
const heldBackoff = 30 * time.Second

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// deployed is one process of a binary: its Layer on the shared engine,
// its scheduler (relay, Shipper, outcome delivery) and its metrics.
type deployed struct {
	name    string
	old     bool
	l       *fdblayer.Layer
	sched   *timers.Scheduler
	metrics *telemetry.Recorder
}

// mixedSink receives every outcome of both binaries, counting each id.
// While refusing, it refuses every outcome, asking for a retry later.
type mixedSink struct {
	mu       sync.Mutex
	got      map[string]int
	events   map[string]orders.ShippedEvent
	refusing bool
}

func (s *mixedSink) Deliver(_ context.Context, e outcome.Envelope) error {
	var ev orders.ShippedEvent
	if err := json.Unmarshal(e.Data, &ev); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusing {
		return &outcome.DeliveryError{Reason: "receiver down", RetryAfter: time.Second}
	}
	s.got[e.ID]++
	s.events[e.ID] = ev
	return nil
}

// start opens a process of the older (old) or newer binary on engine,
// named name.
func start(t *testing.T, engine kv.Engine, clk clock.Clock, sink *mixedSink, name string, old bool) *deployed {
	t.Helper()
	l, err := openLayer(engine, clk, name, old)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d := &deployed{name: name, old: old, l: l, metrics: telemetry.NewRecorder()}
	rh, err := relay.NewHandler(relay.HandlerConfig{Target: l})
	if err != nil {
		t.Fatal(err)
	}
	shipped, shipper, parse := outcome.Source(orders.Shipped), timers.Handler(orders.Shipper{}), orders.ParsePartition
	if old {
		shipped, shipper, parse = ordersv1.Shipped, ordersv1.Shipper{}, ordersv1.ParsePartition
	}
	delivery, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{shipped}, Metrics: d.metrics, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := timers.NewRegistry(rh, shipper, delivery)
	if err != nil {
		t.Fatal(err)
	}
	d.sched, err = timers.NewScheduler(timers.SchedulerConfig{Store: l, Registry: reg, ParsePartition: parse, Owner: name,
		Clock: clk, HeldBackoff: heldBackoff, Metrics: d.metrics, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// openLayer opens a Layer of the older or newer binary on engine.
func openLayer(engine kv.Engine, clk clock.Clock, name string, old bool) (*fdblayer.Layer, error) {
	gate := evolve.GateConfig{Process: name, Refresh: mixedGate}
	if old {
		gate.Known = map[string]uint32{ordersgen.SchemaNamespace: 1}
		gate.Binary = "orders (OrderV1 only)"
	}
	return fdblayer.Open(engine, fdblayer.Config{Clock: clk, Logger: quietLog, Gate: gate})
}

// place places order o with the process's binary: an OrderV1 by the
// older, an OrderV2 (a gift when o.gift) by the newer.
func (d *deployed) place(ctx context.Context, o mixedOrder) error {
	lines := []ordersgen.Line{{SKU: "sku-0", Quantity: 1}}
	if d.old {
		svc, err := ordersv1.NewService(ordersv1.ServiceConfig{Store: d.l, ShipDelay: shipDelay})
		if err != nil {
			return err
		}
		return svc.Place(ctx, v1gen.MustCustomerID(o.customer), o.at, v1gen.OrderV1{Region: o.region, Lines: []v1gen.Line{{SKU: "sku-0", Quantity: 1}}})
	}
	svc, err := orders.NewService(orders.ServiceConfig{Store: d.l, ShipDelay: shipDelay})
	if err != nil {
		return err
	}
	return svc.Place(ctx, ordersgen.MustCustomerID(o.customer), o.at, ordersgen.OrderV2{Region: o.region, Lines: lines, Gift: o.gift})
}

// mixedOrder is one order of the test, and the binary that places it.
type mixedOrder struct {
	customer string
	region   uint16
	at       time.Time
	gift     bool
}

func (o mixedOrder) key(t *testing.T) (store.Partition, store.Key) {
	t.Helper()
	k, err := ordersgen.AppendOrderKey(nil, ordersgen.MustCustomerID(o.customer), uint64(o.at.UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	return ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID(o.customer)}, k
}

func (o mixedOrder) id() string { return fmt.Sprintf("ord_%s_%d", o.customer, o.at.UnixMilli()) }

// orderBatch is n orders of customer, placed from at on, a millisecond
// apart, alternating regions 1 and 2.
func orderBatch(customer string, at time.Time, n int, gift bool) []mixedOrder {
	out := make([]mixedOrder, n)
	for i := range out {
		out[i] = mixedOrder{customer: customer, region: uint16(1 + i%2), at: at.Add(time.Duration(i) * time.Millisecond), gift: gift}
	}
	return out
}

// placeAll places os with d, failing t on an error.
func placeAll(t *testing.T, d *deployed, os []mixedOrder) {
	t.Helper()
	for _, o := range os {
		if err := d.place(context.Background(), o); err != nil {
			t.Fatalf("%s: place %+v: %v", d.name, o, err)
		}
	}
}

// tickAll ticks every process's scheduler at once until no tick claims
// anything, failing t on a corrupt or failed timer, a tick error, or a
// timer held for a newer row (every process here reads every row).
func tickAll(t *testing.T, ds ...*deployed) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("still claiming partitions after 100 rounds")
		}
		reps := make([]timers.TickReport, len(ds))
		errs := make([]error, len(ds))
		var wg sync.WaitGroup
		for j, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reps[j], errs[j] = d.sched.Tick(ctx)
			}()
		}
		wg.Wait()
		claimed := 0
		for j, rep := range reps {
			if errs[j] != nil {
				t.Fatalf("%s: tick: %v", ds[j].name, errs[j])
			}
			if rep.Corrupt != 0 || rep.Errors != 0 || rep.Fenced != 0 || rep.Timers.Failed != 0 || rep.Timers.Corrupt != 0 || rep.Timers.Newer != 0 {
				t.Fatalf("%s: round %d: %+v", ds[j].name, i, rep)
			}
			claimed += rep.Claimed
		}
		if claimed == 0 {
			return
		}
	}
}

// checkStoredAsV1 checks, byte for byte, that every order of os is stored
// as the older binary writes it: an OrderV1 its own codecs decode.
func checkStoredAsV1(t *testing.T, s store.Store, os []mixedOrder) {
	t.Helper()
	for _, o := range os {
		p, k := o.key(t)
		v, ok, err := s.Get(context.Background(), p, k)
		if err != nil || !ok {
			t.Fatalf("order %s: %v, found %v", o.id(), err, ok)
		}
		if v[0] != v1gen.VersionOrderV1 {
			t.Errorf("order %s is stored as version %d while the store's format is 1", o.id(), v[0])
		}
		if _, err := v1gen.DecodeOrderV1(v); err != nil {
			t.Errorf("order %s does not decode with the older binary's codecs: %v", o.id(), err)
		}
		if _, err := ordersv1.Values.Decode(v); err != nil {
			t.Errorf("order %s does not decode with the older binary's family: %v", o.id(), err)
		}
	}
}

// checkOrdersShipped checks that every order of os is shipped, stored in
// version want (0: either), carries its gift flag, and that its outcome
// was received exactly once, saying so.
func checkOrdersShipped(t *testing.T, s store.Store, sink *mixedSink, os []mixedOrder, want uint8) {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, o := range os {
		p, k := o.key(t)
		v, ok, err := s.Get(context.Background(), p, k)
		if err != nil || !ok {
			t.Fatalf("order %s: %v, found %v", o.id(), err, ok)
		}
		got, err := orders.Values.Decode(v)
		if err != nil {
			t.Fatalf("order %s: %v", o.id(), err)
		}
		if got.Status != ordersgen.StatusShipped || got.Gift != o.gift || got.Region != o.region {
			t.Errorf("order %s: %+v, want shipped, gift %v", o.id(), got, o.gift)
		}
		if want != 0 && v[0] != want {
			t.Errorf("order %s is stored as version %d, want %d", o.id(), v[0], want)
		}
		if n := sink.got[o.id()]; n != 1 {
			t.Errorf("outcome %s received %d times, want once", o.id(), n)
		} else if ev := sink.events[o.id()]; ev.Gift != o.gift || ev.Region != o.region {
			t.Errorf("outcome %s: %+v", o.id(), ev)
		}
	}
	if ids := len(sink.got); ids != len(os) {
		t.Errorf("%d outcomes received, want %d", ids, len(os))
	}
}

// checkGiftRefused: a gift order placed by the newer binary while the
// store's format is 1 is refused, wrapping wire.ErrFormatTooOld and
// store.ErrInvalid, and writes nothing.
func checkGiftRefused(t *testing.T, d *deployed, at time.Time) {
	t.Helper()
	o := mixedOrder{customer: "early-gift", region: 1, at: at, gift: true}
	err := d.place(context.Background(), o)
	if !errors.Is(err, wire.ErrFormatTooOld) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a gift order at format 1: %v, want wire.ErrFormatTooOld", err)
	}
	p, k := o.key(t)
	if _, ok, err := d.l.Get(context.Background(), p, k); err != nil || ok {
		t.Fatalf("the refused gift order: found %v, %v", ok, err)
	}
}

// checkOlderRefused: a process of the older binary refuses to start on a
// store whose orders format is 2, in one line wrapping ErrNewerFormat.
func checkOlderRefused(t *testing.T, engine kv.Engine, clk clock.Clock) {
	t.Helper()
	l, err := openLayer(engine, clk, "old-late", true)
	if err == nil {
		_ = l.Gate().Close()
		t.Fatal("the older binary started on a store at orders format 2")
	}
	msg := err.Error()
	if !errors.Is(err, evolve.ErrNewerFormat) || strings.Contains(msg, "\n") || !strings.Contains(msg, `store format of namespace "orders" is 2; this binary knows format 1`) {
		t.Fatalf("the older binary's start: %q, want one line wrapping ErrNewerFormat", msg)
	}
}

var raiseOrders = evolve.RaiseConfig{By: "deploy", Reason: "OrderV2: gift orders"}

// TestMixedVersionsShareOneStore runs a rolling deploy of OrderV2 on
// memory and MVCC engines with both binaries live at once: the older
// places OrderV1 orders, the newer joins and, while the store's format of
// orders is 1, writes only what the older reads (every order, placed or
// shipped by either, stored as an OrderV1, checked byte for byte; a gift
// order refused); both binaries' schedulers ship every order and deliver
// its outcome exactly once. The raise is refused while the older process
// lives, naming it. The older process then pauses past its lease (gone,
// as the store sees it), the format is raised, and the newer writes gift
// orders as OrderV2: the older process, waking before its gate's
// refresh, meets them, holds their timers and counts them, passes over
// the pending outcome of a gift order the newer shipped (its receiver
// down meanwhile) and counts it, and reads nothing as corrupt; its refresh fences it, its scheduler claims
// nothing, and a process of the older binary refuses to start. The newer
// binary then ships every held order while a migration rewrites the
// OrderV1 orders as OrderV2 (refused before the raise); every order is
// delivered exactly once, and ends an OrderV2.
func TestMixedVersionsShareOneStore(t *testing.T) {
	for _, eng := range []struct {
		name string
		open func() kv.Engine
	}{
		{"memory", func() kv.Engine { return memengine.New() }},
		{"mvcc", func() kv.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}) }},
	} {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.UnixMilli(1_700_000_000_000)
			clk := clock.NewManual(t0)
			sink := &mixedSink{got: map[string]int{}, events: map[string]orders.ShippedEvent{}}
			engine := eng.open()
			// The older binary creates the store: orders starts at 1.
			old := start(t, engine, clk, sink, "old", true)
			t.Cleanup(func() { _ = old.l.Close() }) // closes the engine, last
			newer := start(t, engine, clk, sink, "new", false)
			t.Cleanup(func() { _ = newer.l.Gate().Close() })
			if f := newer.l.Format(ordersgen.SchemaNamespace); f != 1 {
				t.Fatalf("the newer binary sees orders format %d, want 1", f)
			}

			// Rolling deploy: both binaries place and ship at once.
			byOld, byNew := orderBatch("ada", t0, 4, false), orderBatch("bo", t0, 4, false)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); placeAll(t, old, byOld) }()
			go func() { defer wg.Done(); placeAll(t, newer, byNew) }()
			wg.Wait()
			checkGiftRefused(t, newer, t0)
			both := slices.Concat(byOld, byNew)
			checkStoredAsV1(t, newer.l, both)
			clk.Advance(shipDelay + time.Second)
			tickAll(t, old, newer)
			checkStoredAsV1(t, newer.l, both)
			checkOrdersShipped(t, newer.l, sink, both, v1gen.VersionOrderV1)

			// A migration to OrderV2 refuses to run before the raise.
			m, err := orders.UpgradeOrders(newer.l, newer.l, quietLog)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newRunner(t, newer.l, clk).Run(ctx, m); !errors.Is(err, wire.ErrFormatTooOld) {
				t.Fatalf("the migration at format 1: %v, want wire.ErrFormatTooOld", err)
			}
			checkStoredAsV1(t, newer.l, both)

			// The raise waits for the older process.
			err = newer.l.Gate().Raise(ctx, ordersgen.SchemaNamespace, 2, raiseOrders)
			var re *evolve.RaiseError
			if !errors.As(err, &re) || len(re.Unaware) != 1 || re.Unaware[0].Name != "old" || !strings.Contains(err.Error(), "old") {
				t.Fatalf("raise while the older process lives: %v, want a refusal naming old", err)
			}

			// The older process pauses past its lease: gone, as the store
			// sees it. The newer renews its row and raises the format.
			clk.Advance(4*mixedGate + time.Minute)
			if err := newer.l.Gate().Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := newer.l.Gate().Raise(ctx, ordersgen.SchemaNamespace, 2, raiseOrders); err != nil {
				t.Fatalf("raise once the older process's row expired: %v", err)
			}
			// A gift order the newer binary ships while the receiver is
			// down: shipped (an OrderV2), its outcome pending.
			pending := orderBatch("dee", clk.Now(), 1, true)
			placeAll(t, newer, pending)
			clk.Advance(shipDelay + time.Second)
			sink.mu.Lock()
			sink.refusing = true
			sink.mu.Unlock()
			for range 3 {
				if _, err := newer.sched.Tick(ctx); err != nil {
					t.Fatal(err)
				}
			}
			sink.mu.Lock()
			sink.refusing = false
			sink.mu.Unlock()
			if got := orderOf(t, newer.l, pending[0]); got.Status != ordersgen.StatusShipped {
				t.Fatalf("the pending gift order: %+v, want shipped", got)
			}
			gifts := orderBatch("cy", clk.Now(), 3, true)
			placeAll(t, newer, gifts)
			for _, o := range gifts {
				p, k := o.key(t)
				v, _, err := newer.l.Get(ctx, p, k)
				if err != nil || v[0] != ordersgen.VersionOrderV2 {
					t.Fatalf("gift order %s after the raise: version %v, %v; want an OrderV2", o.id(), v, err)
				}
			}

			// The older process wakes before its gate's refresh: it meets
			// the gift orders, holds them and counts them, corrupt none
			// (it fires the index's relay timer, whose rows it reads), and
			// passes over the pending outcome, counted.
			clk.Advance(shipDelay + time.Second)
			var newerTimers int
			for range 2 {
				rep, err := old.sched.Tick(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Timers.Corrupt != 0 || rep.Corrupt != 0 || rep.Timers.Failed != 0 || rep.Fenced != 0 {
					t.Fatalf("the older process meeting OrderV2 rows: %+v, want none corrupt or failed", rep)
				}
				newerTimers += rep.Timers.Newer
			}
			if newerTimers != len(gifts) {
				t.Errorf("the older process held %d ship timers as newer, want %d", newerTimers, len(gifts))
			}
			if n := old.metrics.CounterSum(telemetry.MetricTimersNewer); n != uint64(len(gifts)) {
				t.Errorf("mkitfdb_timers_newer_total = %d, want %d", n, len(gifts))
			}
			if n := old.metrics.CounterSum(telemetry.MetricOutcomeNewerRows); n == 0 {
				t.Error("mkitfdb_outcome_newer_rows_total = 0: the older delivery did not meet the pending OrderV2")
			}
			if n := countOf(sink, pending)[pending[0].id()]; n != 0 {
				t.Errorf("the older binary delivered the pending gift order's outcome %d times", n)
			}
			for _, d := range []*telemetry.Desc{telemetry.MetricTimersCorrupt, telemetry.MetricSchedulerCorrupt} {
				if n := old.metrics.CounterSum(d); n != 0 {
					t.Errorf("%s = %d in the older process", d.Name(), n)
				}
			}
			for _, o := range gifts {
				p, k := o.key(t)
				v, _, err := old.l.Get(ctx, p, k)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ordersv1.Values.Decode(v); !errors.Is(err, store.ErrNewerVersion) || errors.Is(err, store.ErrCorrupt) {
					t.Errorf("the older binary reads gift order %s as %v, want store.ErrNewerVersion and not corrupt", o.id(), err)
				}
				if got, err := orders.Values.Decode(v); err != nil || got.Status != ordersgen.StatusOpen || !got.Gift {
					t.Errorf("gift order %s after the older process held it: %+v, %v", o.id(), got, err)
				}
			}

			// Its refresh fences it; it claims nothing and ends. A process
			// of the older binary refuses to start.
			if err := old.l.Gate().Sync(ctx); !errors.Is(err, evolve.ErrNewerFormat) {
				t.Fatalf("the older process's refresh: %v, want ErrNewerFormat", err)
			}
			clk.Advance(heldBackoff)
			if rep, err := old.sched.Tick(ctx); err != nil || rep.Claimed != 0 || rep.Fenced == 0 {
				t.Fatalf("the fenced older process's tick: %+v, %v; want fenced, nothing claimed", rep, err)
			}
			if err := old.l.Gate().Close(); err != nil {
				t.Fatal(err)
			}
			checkOlderRefused(t, engine, clk)

			// The newer binary ships every held order, each delivered
			// once, while the migration rewrites the OrderV1 rows.
			all := slices.Concat(both, gifts, pending)
			migrateOrders(t, newer.l, clk, all, len(both), func() { tickAll(t, newer) })
			checkOrdersShipped(t, newer.l, sink, all, ordersgen.VersionOrderV2)
		})
	}
}

// TestMixedVersionsTakeTurnsOnBbolt runs the rolling deploy on bbolt, one
// process at a time, as a file allows: the older binary creates the store
// and places orders; the newer, at orders format 1, places orders stored
// as OrderV1 (byte for byte), refuses a gift order and ships them all;
// the older comes back (a rollback before the raise) and reads and ships
// what the newer wrote; with no older process left the newer raises the
// format without force and writes gift orders as OrderV2; the older then
// refuses to start; every order is delivered exactly once; the migration
// then rewrites the OrderV1 orders as OrderV2.
func TestMixedVersionsTakeTurnsOnBbolt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orders.db")
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewManual(t0)
	sink := &mixedSink{got: map[string]int{}, events: map[string]orders.ShippedEvent{}}
	engine := func() kv.Engine {
		e, err := boltengine.Open(path, boltengine.Config{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	stop := func(d *deployed) {
		t.Helper()
		if err := d.l.Close(); err != nil {
			t.Fatalf("stop %s: %v", d.name, err)
		}
	}

	old := start(t, engine(), clk, sink, "old", true)
	byOld := orderBatch("ada", t0, 4, false)
	placeAll(t, old, byOld)
	stop(old)

	newer := start(t, engine(), clk, sink, "new", false)
	if f := newer.l.Format(ordersgen.SchemaNamespace); f != 1 {
		t.Fatalf("the newer binary sees orders format %d, want 1", f)
	}
	byNew := orderBatch("bo", t0, 4, false)
	placeAll(t, newer, byNew)
	checkGiftRefused(t, newer, t0)
	both := slices.Concat(byOld, byNew)
	checkStoredAsV1(t, newer.l, both)
	clk.Advance(shipDelay + time.Second)
	tickAll(t, newer)
	checkStoredAsV1(t, newer.l, both)
	checkOrdersShipped(t, newer.l, sink, both, v1gen.VersionOrderV1)
	stop(newer)

	// A rollback before the raise: the older binary reads everything.
	old = start(t, engine(), clk, sink, "old", true)
	again := orderBatch("ada", clk.Now(), 2, false)
	placeAll(t, old, again)
	checkStoredAsV1(t, old.l, slices.Concat(both, again))
	clk.Advance(shipDelay + time.Second)
	tickAll(t, old)
	both = slices.Concat(both, again)
	checkOrdersShipped(t, old.l, sink, both, v1gen.VersionOrderV1)
	stop(old)

	newer = start(t, engine(), clk, sink, "new", false)
	if err := newer.l.Gate().Raise(ctx, ordersgen.SchemaNamespace, 2, raiseOrders); err != nil {
		t.Fatalf("raise with no older process left: %v", err)
	}
	gifts := orderBatch("cy", clk.Now(), 3, true)
	placeAll(t, newer, gifts)
	clk.Advance(shipDelay + time.Second)
	tickAll(t, newer)
	checkOrdersShipped(t, newer.l, sink, slices.Concat(both, gifts), 0)
	checkOrdersShipped(t, newer.l, &mixedSink{got: countOf(sink, gifts), events: sink.events}, gifts, ordersgen.VersionOrderV2)
	migrateOrders(t, newer.l, clk, slices.Concat(both, gifts), len(both), nil)
	stop(newer)

	e := engine()
	checkOlderRefused(t, e, clk)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// newRunner is a migration runner on l.
func newRunner(t *testing.T, l *fdblayer.Layer, clk clock.Clock) *evolve.Runner {
	t.Helper()
	r, err := evolve.NewRunner(l, evolve.RunnerConfig{Owner: "migrate", Clock: clk, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// migrateOrders runs orders.UpgradeOrders on l to its end, while during
// (when set) runs beside it, and checks that it rewrote exactly the orders
// stored as OrderV1 (wantRewritten), left none, and that every order of os
// is then stored as an OrderV2 holding what it held (shipped, its region,
// its gift flag); run again from the start, it rewrites nothing.
func migrateOrders(t *testing.T, l *fdblayer.Layer, clk clock.Clock, os []mixedOrder, wantRewritten int, during func()) {
	t.Helper()
	ctx := context.Background()
	m, err := orders.UpgradeOrders(l, l, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, l, clk)
	var (
		wg  sync.WaitGroup
		rep evolve.Report
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, err = r.Run(ctx, m)
	}()
	if during != nil {
		during()
	}
	wg.Wait()
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	cp := rep.Checkpoint
	if cp.Done.IsZero() || cp.Left != 0 || cp.Rewritten != uint64(wantRewritten) {
		t.Fatalf("migration: %s (%+v), want done, %d rewritten, none left", rep, cp, wantRewritten)
	}
	for _, o := range os {
		p, k := o.key(t)
		v, _, err := l.Get(ctx, p, k)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] != ordersgen.VersionOrderV2 {
			t.Errorf("order %s is stored as version %d after the migration", o.id(), v[0])
		}
		got, err := ordersgen.DecodeOrderV2(v)
		if err != nil || got.Status != ordersgen.StatusShipped || got.Region != o.region || got.Gift != o.gift || len(got.Lines) != 1 || got.Lines[0].SKU != "sku-0" {
			t.Errorf("order %s after the migration: %+v, %v", o.id(), got, err)
		}
	}
	again, err := r.Rerun(ctx, m)
	if err != nil || again.Checkpoint.Rewritten != 0 || again.Checkpoint.Rows < uint64(len(os)) {
		t.Errorf("the migration run again: %s, %v; want every row read and none rewritten", again, err)
	}
}

// orderOf is order o as the newer binary reads it.
func orderOf(t *testing.T, s store.Store, o mixedOrder) ordersgen.OrderV2 {
	t.Helper()
	p, k := o.key(t)
	v, ok, err := s.Get(context.Background(), p, k)
	if err != nil || !ok {
		t.Fatalf("order %s: %v, found %v", o.id(), err, ok)
	}
	got, err := orders.Values.Decode(v)
	if err != nil {
		t.Fatalf("order %s: %v", o.id(), err)
	}
	return got
}

// countOf is sink's counts of os's outcomes alone.
func countOf(sink *mixedSink, os []mixedOrder) map[string]int {
	sink.mu.Lock()
	defer sink.mu.Unlock()
	out := map[string]int{}
	for _, o := range os {
		out[o.id()] = sink.got[o.id()]
	}
	return out
}
