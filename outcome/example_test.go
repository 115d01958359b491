package outcome_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A service declares an outcome source for a record class of its own
// schema (here the orders example's orders, which are terminal once
// shipped). Its writer makes a record terminal through the source, in its
// own batch, which queues the outcome and creates the delivery timer; the
// Delivery, registered like any timer handler, pushes the outcome to its
// sink in an Envelope when the timer fires.
func ExampleNewSource() {
	ctx := context.Background()
	clk := clock.NewManual(time.UnixMilli(1_000))
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	shipped, err := outcome.NewSource(outcome.SourceConfig[ordersgen.OrderKey, ordersgen.OrderV1]{
		Name:      "orders.shipped",
		Namespace: ordersgen.SchemaNamespace,
		ParseKey:  ordersgen.ParseOrderKey,
		Decode:    ordersgen.DecodeOrderV1,
		Encode:    outcome.OneVersion(ordersgen.EncodeOrderV1),
		Terminal:  func(o ordersgen.OrderV1) bool { return o.Status == ordersgen.StatusShipped },
		ID: func(k ordersgen.OrderKey, _ ordersgen.OrderV1) string {
			return fmt.Sprintf("ord_%s_%d", k.Customer, k.PlacedAtMs)
		},
		Event: func(k ordersgen.OrderKey, o ordersgen.OrderV1) (outcome.Event, error) {
			// Time left zero: the time the outcome was queued.
			return outcome.Event{Type: "order.shipped", Data: map[string]any{"customer": k.Customer.String(), "lines": len(o.Lines)}}, nil
		},
		OnAck: outcome.KeepRecord,
	})
	if err != nil {
		panic(err)
	}

	// An open order...
	shard := ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("ada")}
	key := ordersgen.OrderKey{Customer: shard.Customer, PlacedAtMs: 7}
	order := ordersgen.OrderV1{Status: ordersgen.StatusOpen, Lines: []ordersgen.Line{{SKU: "tea", Quantity: 2}}}
	k, _ := key.AppendKey(nil)
	open, _ := ordersgen.EncodeOrderV1(order)
	if _, err := s.Apply(ctx, shard, store.NewBatch().Put(k, open)); err != nil {
		panic(err)
	}
	// ...ships, and its outcome is queued in the same batch.
	_, err = store.Transact(ctx, s, shard, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		o, err := outbox.Read(ctx, r)
		if err != nil {
			return nil, err
		}
		ob, err := outbox.NewBuilder(s, clk.Now(), o)
		if err != nil {
			return nil, err
		}
		order.Status = ordersgen.StatusShipped
		if _, err := shipped.Append(context.Background(), ob, key, open, order); err != nil {
			return nil, err
		}
		b := store.NewBatch()
		return b, ob.Finish(b)
	}, store.TransactConfig{})
	if err != nil {
		panic(err)
	}

	d, err := outcome.NewDelivery(outcome.DeliveryConfig{
		Sources: []outcome.Source{shipped},
		Sink: outcome.SinkFunc(func(_ context.Context, e outcome.Envelope) error {
			fmt.Println("delivered", e.ID, e.Type, e.Timestamp.UnixMilli(), string(e.Data))
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	reg, err := timers.NewRegistry(d)
	if err != nil {
		panic(err)
	}
	rep, err := timers.RunDue(ctx, s, shard, reg, time.UnixMilli(1_000), timers.RunConfig{Clock: clk})
	if err != nil {
		panic(err)
	}
	fmt.Println("fired", rep.Fired)
	// Output:
	// delivered ord_ada_7 order.shipped 1000 {"customer":"ada","lines":1}
	// fired 1
}

// The receiving service wraps its handler in a Receiver, which verifies
// each request's signature, window and nonce; the sending service
// delivers through a WebhookSink signing with the matching key.
func ExampleReceiver() {
	secret := bytes.Repeat([]byte{0x5e}, 32) // from the deployment's secret store
	key, err := outcome.NewHMACKey(secret)
	if err != nil {
		panic(err)
	}
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(_ context.Context, e outcome.Envelope) error {
		fmt.Println("received", e.ID, e.Type)
		return nil // deduplicate by e.ID: delivery is at least once
	})))
	defer srv.Close()

	sink, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: srv.URL, Signer: key})
	if err != nil {
		panic(err)
	}
	e := outcome.Envelope{ID: "ord_ada_7", Type: "order.shipped", Timestamp: time.UnixMilli(1_000), Data: json.RawMessage(`{"customer":"ada"}`)}
	fmt.Println("error:", sink.Deliver(context.Background(), e))
	// Output:
	// received ord_ada_7 order.shipped
	// error: <nil>
}
