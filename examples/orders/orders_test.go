package orders_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/examples/orders"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

const shipDelay = 10 * time.Second

// placed is one order the test places.
type placed struct {
	customer ordersgen.CustomerID
	region   uint16
	at       time.Time
	lines    int
}

// placedAtMs is the order's time as its key holds it (store.EncodeTime).
func (o placed) placedAtMs() uint64 {
	u, err := store.EncodeTime(o.at)
	if err != nil {
		panic(err)
	}
	return u
}

// TestServiceRelaysBetweenItsOwnPartitionsAndShipsOnItsOwnTimer runs the
// example service end to end on every engine, through one Scheduler
// firing its Shipper (kind 1000), the library's relay and its outcome
// delivery: orders placed in customer shards are indexed in their
// regions' shards by relay rows, shipped by their timers, the new status
// relayed again, and each shipment's "order.shipped" outcome delivered
// over HTTP to the service's webhook receiver, signed and verified. The same
// store carries the reference domain's relay traffic between partitions
// with the same names, writing the very key bytes the orders index uses;
// each target ends with exactly its own rows, every queue drains and no
// timer is left without its wake time.
func TestServiceRelaysBetweenItsOwnPartitionsAndShipsOnItsOwnTimer(t *testing.T) {
	ctx := context.Background()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			t0 := time.UnixMilli(1_000)
			clk := clock.NewManual(t0)
			s, err := fdblayer.Open(e.Open(t, "orders.db"), fdblayer.Config{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			svc, err := orders.NewService(orders.ServiceConfig{Store: s, ShipDelay: shipDelay})
			if err != nil {
				t.Fatal(err)
			}

			var all []placed
			for i, name := range []string{"acme", "bob", "cy"} {
				for n := range 3 {
					all = append(all, placed{ordersgen.MustCustomerID(name), uint16(1 + i%2), t0.Add(time.Duration(n) * time.Millisecond), 1 + n})
				}
			}
			for _, o := range all {
				if err := svc.Place(ctx, o.customer, o.at, order(o)); err != nil {
					t.Fatalf("place %v: %v", o, err)
				}
			}
			refSource, refTarget := refPartitions()
			refRows := queueRefRows(t, s, refSource, refTarget, all)

			hook := newHook(t)
			rh, err := relay.NewHandler(relay.HandlerConfig{Target: s})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := timers.NewRegistry(rh, orders.Shipper{}, hook.delivery)
			if err != nil {
				t.Fatal(err)
			}
			sched, err := timers.NewScheduler(timers.SchedulerConfig{
				Store: s, Registry: reg, ParsePartition: orders.ParsePartition, Owner: "w1", Workers: 2, Clock: clk,
			})
			if err != nil {
				t.Fatal(err)
			}
			parts := partitionsOf(all, refSource, refTarget)

			settle(t, sched, s, parts)
			checkIndex(t, s, all, ordersgen.StatusOpen)
			checkOrders(t, s, all, ordersgen.StatusOpen)
			checkRefTarget(t, s, refTarget, refRows)
			if got := hook.received(); len(got) != 0 {
				t.Errorf("%d outcomes before any order shipped", len(got))
			}

			shippedAt := t0.Add(3*time.Millisecond + shipDelay)
			clk.Set(shippedAt)
			settle(t, sched, s, parts)
			checkOrders(t, s, all, ordersgen.StatusShipped)
			checkShippedOutcomes(t, hook.received(), all, shippedAt)
			checkIndex(t, s, all, ordersgen.StatusShipped)
			checkRefTarget(t, s, refTarget, refRows)
			for _, p := range parts {
				if rows := scanClass(t, s, p, gen.TagRelayKey); len(rows) != 0 {
					t.Errorf("%s: %d relay rows still queued", store.PartitionName(p), len(rows))
				}
				if rows := scanClass(t, s, p, gen.TagTimerKey); len(rows) != 0 {
					t.Errorf("%s: %d timers left", store.PartitionName(p), len(rows))
				}
			}
		})
	}
}

// TestPlaceRefusesARepeatedOrAnInvalidOrder: a second Place of one order
// is ErrExists, an order breaking the schema store.ErrInvalid, and
// neither writes anything.
func TestPlaceRefusesARepeatedOrAnInvalidOrder(t *testing.T) {
	ctx := context.Background()
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	svc, err := orders.NewService(orders.ServiceConfig{Store: s, ShipDelay: shipDelay})
	if err != nil {
		t.Fatal(err)
	}
	o := placed{ordersgen.MustCustomerID("acme"), 1, time.UnixMilli(5_000), 1}
	if err := svc.Place(ctx, o.customer, o.at, order(o)); err != nil {
		t.Fatal(err)
	}
	shard := ordersgen.CustomerShard{Customer: o.customer}
	before, err := s.Stats(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Place(ctx, o.customer, o.at, order(o)); !errors.Is(err, orders.ErrExists) {
		t.Errorf("second Place: %v, want ErrExists", err)
	}
	bad := order(o)
	bad.Lines[0].Quantity = 0 // the schema's min=1
	if err := svc.Place(ctx, o.customer, o.at.Add(time.Millisecond), bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Place of a zero quantity: %v, want store.ErrInvalid", err)
	}
	after, err := s.Stats(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("refused Places wrote: stats %+v, then %+v", before, after)
	}
}

// TestShipperLeavesATimerOfAMissingOrderAsCorrupt: a ship timer whose
// order is gone is corrupt data, reported and kept for a later run, not
// completed.
func TestShipperLeavesATimerOfAMissingOrderAsCorrupt(t *testing.T) {
	ctx := context.Background()
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	shard := ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("acme")}
	b := store.NewBatch()
	if err := timers.Schedule(b, s.Capabilities(), nil, timers.Timer{Kind: orders.KindShip, Reference: "7", DueAt: time.UnixMilli(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, shard, b); err != nil {
		t.Fatal(err)
	}
	reg, err := timers.NewRegistry(orders.Shipper{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := timers.RunDue(ctx, s, shard, reg, time.UnixMilli(10), timers.RunConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Corrupt != 1 || rep.Fired != 0 {
		t.Errorf("report %+v, want one corrupt timer and none fired", rep)
	}
	if rows := scanClass(t, s, shard, gen.TagTimerKey); len(rows) != 1 {
		t.Errorf("%d timer rows, want the corrupt one kept", len(rows))
	}
}

// hook is the service's webhook: a Receiver over loopback HTTP, and the
// Delivery whose WebhookSink posts the service's outcomes (its Shipped
// source) to it, signed with the key the Receiver verifies.
type hook struct {
	mu       sync.Mutex
	got      []outcome.Envelope
	delivery *outcome.Delivery
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	key, err := outcome.NewHMACKey([]byte("orders-webhook-secret-of-32-bytes!"))
	if err != nil {
		t.Fatal(err)
	}
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
	if err != nil {
		t.Fatal(err)
	}
	// The service's own server, with its timeouts, on a test listener.
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = orders.HookServer("", recv.Wrap(outcome.Handle(func(_ context.Context, e outcome.Envelope) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.got = append(h.got, e)
		return nil
	})))
	srv.Start()
	t.Cleanup(srv.Close)
	sink, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: srv.URL + "/outcomes", Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	if h.delivery, err = outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{orders.Shipped}}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *hook) received() []outcome.Envelope {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]outcome.Envelope(nil), h.got...)
}

// checkShippedOutcomes checks that the receiver got each order's
// "order.shipped" outcome exactly once, stamped with the time it shipped.
func checkShippedOutcomes(t *testing.T, got []outcome.Envelope, all []placed, shippedAt time.Time) {
	t.Helper()
	byID := map[string]outcome.Envelope{}
	for _, e := range got {
		if _, dup := byID[e.ID]; dup {
			t.Errorf("outcome %s received twice", e.ID)
		}
		byID[e.ID] = e
	}
	if len(byID) != len(all) {
		t.Errorf("%d outcomes received, want one per order (%d)", len(byID), len(all))
	}
	for _, o := range all {
		id := fmt.Sprintf("ord_%s_%d", o.customer, o.placedAtMs())
		e, ok := byID[id]
		if !ok {
			t.Errorf("no outcome %s", id)
			continue
		}
		if e.Type != "order.shipped" || !e.Timestamp.Equal(shippedAt) {
			t.Errorf("outcome %s: type %q at %v", id, e.Type, e.Timestamp)
		}
		var ev orders.ShippedEvent
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Customer != o.customer.String() || ev.PlacedAtMs != o.placedAtMs() || ev.Region != o.region || len(ev.Lines) != o.lines || ev.Lines[0].SKU != "sku-0" {
			t.Errorf("outcome %s carries %+v", id, ev)
		}
	}
}

func order(o placed) ordersgen.OrderV2 {
	lines := make([]ordersgen.Line, o.lines)
	for i := range lines {
		lines[i] = ordersgen.Line{SKU: fmt.Sprintf("sku-%d", i), Quantity: uint32(i + 1)}
	}
	return ordersgen.OrderV2{Region: o.region, Lines: lines}
}

// refPartitions are a reference-domain source and target whose names
// match the orders partitions' ("acme", 1).
func refPartitions() (store.Partition, store.Partition) {
	ns := refdomain.MustNamespaceKey("acme")
	return refdomain.RefPartition{NS: ns, Repo: refdomain.MustRepoName("acme"), ShardRef: refdomain.MustShardRef("1")},
		refdomain.NamespacePartition{NS: ns}
}

// queueRefRows queues, in source, one relay row per order to target,
// putting the key the orders index uses for that order (so the two
// schemas' targets hold the same key bytes), and returns what target must
// end up holding.
func queueRefRows(t *testing.T, s store.Store, source, target store.Partition, all []placed) map[string]string {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	obs, err := outbox.Read(ctx, store.ReaderOf(s, source))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.NewBuilder(s, time.UnixMilli(1_000), obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		k, err := ordersgen.AppendRegionOrderKey(nil, o.customer, o.placedAtMs())
		if err != nil {
			t.Fatal(err)
		}
		v := "refdomain:" + o.customer.String()
		if _, err := ob.Relay(context.Background(), target, []gen.RelayPut{{Key: k, Value: []byte(v)}}, nil); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = v
	}
	b := store.NewBatch()
	if err := ob.Finish(b); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Apply(ctx, source, b); err != nil || !out.Committed() {
		t.Fatalf("queue reference rows: %v, %v", out, err)
	}
	return want
}

func partitionsOf(all []placed, extra ...store.Partition) []store.Partition {
	seen := map[string]bool{}
	var out []store.Partition
	add := func(p store.Partition) {
		if n := store.PartitionName(p); !seen[n] {
			seen[n] = true
			out = append(out, p)
		}
	}
	for _, o := range all {
		add(ordersgen.CustomerShard{Customer: o.customer})
		add(ordersgen.RegionShard{Region: o.region})
	}
	for _, p := range extra {
		add(p)
	}
	return out
}

// settle ticks until a tick claims nothing, checking the due index
// invariant after each.
func settle(t *testing.T, sched *timers.Scheduler, s store.Store, parts []store.Partition) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("still claiming partitions after 50 ticks")
		}
		rep, err := sched.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Timers.Failed != 0 || rep.Timers.Corrupt != 0 {
			t.Fatalf("tick %d: %+v", i, rep)
		}
		if err := timerstest.CheckDueIndex(ctx, s, parts); err != nil {
			t.Fatalf("after tick %d: %v", i, err)
		}
		if rep.Claimed == 0 {
			return
		}
	}
}

func checkOrders(t *testing.T, s store.Store, all []placed, status ordersgen.Status) {
	t.Helper()
	for _, o := range all {
		k, err := ordersgen.AppendOrderKey(nil, o.customer, o.placedAtMs())
		if err != nil {
			t.Fatal(err)
		}
		v, ok, err := s.Get(context.Background(), ordersgen.CustomerShard{Customer: o.customer}, k)
		if err != nil || !ok {
			t.Fatalf("order %v: %v, found %v", o, err, ok)
		}
		got, err := orders.Values.Decode(v)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != status || got.Region != o.region || len(got.Lines) != o.lines {
			t.Errorf("order %v: %+v, want status %v", o, got, status)
		}
	}
}

// checkIndex checks that each region's shard indexes exactly its orders,
// with their status, and nothing else of the class.
func checkIndex(t *testing.T, s store.Store, all []placed, status ordersgen.Status) {
	t.Helper()
	byRegion := map[uint16][]placed{}
	for _, o := range all {
		byRegion[o.region] = append(byRegion[o.region], o)
	}
	for region, os := range byRegion {
		rows := scanClass(t, s, ordersgen.RegionShard{Region: region}, gen.Tag(ordersgen.TagRegionOrderKey))
		if len(rows) != len(os) {
			t.Fatalf("region %d indexes %d orders, want %d", region, len(rows), len(os))
		}
		for _, kv := range rows {
			k, err := ordersgen.ParseRegionOrderKey(kv.Key)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ordersgen.DecodeIndexEntryV1(kv.Value)
			if err != nil {
				t.Fatalf("region %d, %s at %d: %v", region, k.Customer, k.PlacedAtMs, err)
			}
			if e.Status != status {
				t.Errorf("region %d, %s at %d: status %v, want %v", region, k.Customer, k.PlacedAtMs, e.Status, status)
			}
		}
	}
}

// checkRefTarget checks that the reference domain's target holds exactly
// the rows relayed to it: none of the orders index's values.
func checkRefTarget(t *testing.T, s store.Store, target store.Partition, want map[string]string) {
	t.Helper()
	rows := scanClass(t, s, target, gen.Tag(ordersgen.TagRegionOrderKey))
	if len(rows) != len(want) {
		t.Fatalf("%s holds %d rows of the index class, want %d", store.PartitionName(target), len(rows), len(want))
	}
	for _, kv := range rows {
		if w, ok := want[string(kv.Key)]; !ok || w != string(kv.Value) {
			t.Errorf("%s: %x = %q, want %q", store.PartitionName(target), kv.Key, kv.Value, w)
		}
	}
}

// scanClass lists partition p's rows of key class tag (a tag of any
// schema: the range is the tuple prefix (tag)).
func scanClass(t *testing.T, s store.Store, p store.Partition, tag gen.Tag) []store.KeyValue {
	t.Helper()
	start, end := gen.ClassRange(tag)
	page, err := s.Scan(context.Background(), p, start, end, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if page.Next != nil {
		t.Fatalf("%s: more than 1000 rows of class %d", store.PartitionName(p), tag)
	}
	return page.Entries
}
