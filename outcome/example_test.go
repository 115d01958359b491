package outcome_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A reservation becomes terminal through the outbox, which queues its
// outcome and creates the delivery timer; the Delivery, registered like
// any timer handler, pushes it to its sink when the timer fires.
func ExampleDelivery() {
	ctx := context.Background()
	clk := clock.NewManualMs(1_000)
	s, err := fdblayer.Open(fdblayer.NewMemoryEngine(), fdblayer.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")}
	id := refdomain.MustReservationID("res-1")

	// A ticketed reservation...
	key, _ := refdomain.AppendReservationKey(nil, id)
	ticketed, _ := refdomain.EncodeReservationV1(&refdomain.ReservationTicketed{})
	if _, err := s.Apply(ctx, p, store.NewBatch().Put(key, ticketed)); err != nil {
		panic(err)
	}
	// ...commits, and its outcome is queued in the same batch.
	o, err := outbox.Read(ctx, store.ReaderOf(s, p))
	if err != nil {
		panic(err)
	}
	ob, err := outbox.NewBuilder(s.Capabilities(), 1_000, o)
	if err != nil {
		panic(err)
	}
	if _, err := outcome.Append(ob, id, ticketed, &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 1_000}); err != nil {
		panic(err)
	}
	b := store.NewBatch()
	if err := ob.Finish(b); err != nil {
		panic(err)
	}
	if _, err := s.Apply(ctx, p, b); err != nil {
		panic(err)
	}

	d, err := outcome.NewDelivery(outcome.Config{
		Audience: "https://git.example.com",
		Sink: outcome.SinkFunc(func(_ context.Context, e outcome.Envelope) error {
			fmt.Println("delivered", e.ID, e.Type)
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
	rep, err := timers.RunDue(ctx, s, p, reg, 1_000, timers.Budget{}, timers.WithClock(clk))
	if err != nil {
		panic(err)
	}
	fmt.Println("fired", rep.Fired)
	// Output:
	// delivered res-1 reservation.committed
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

	sink, err := outcome.NewWebhookSink(outcome.WebhookConfig{URL: srv.URL, Signer: key})
	if err != nil {
		panic(err)
	}
	o, err := outcome.FromReservation(refdomain.MustReservationID("res-2"), "https://git.example.com",
		&refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), Reason: refdomain.AbortReasonExpired})
	if err != nil {
		panic(err)
	}
	e, err := o.Envelope()
	if err != nil {
		panic(err)
	}
	fmt.Println("error:", sink.Deliver(context.Background(), e))
	// Output:
	// received res-2 reservation.aborted
	// error: <nil>
}
