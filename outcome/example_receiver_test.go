package outcome_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// A receiver of Standard Webhooks holds the "whsec_" secret the sender
// issued (24 bytes and more, as Svix issues them); the sink, in Standard
// Webhooks mode, signs with the same secret. The receiver's replicas
// share a PartitionNonceStore in the receiving service's store, so that
// none accepts a request another already took.
func ExampleReceiver_standardWebhooks() {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // from the deployment's secret store
	secret, err := outcome.ParseWebhookSecret(whsec)
	if err != nil {
		log.Fatal(err)
	}
	db, err := fdblayer.Open(memengine.New(), fdblayer.Config{}) // the receiving service's store
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	nonces, err := outcome.NewPartitionNonceStore(outcome.PartitionNonceStoreConfig{
		Store:     db,
		Partition: refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("receiver")},
	})
	if err != nil {
		log.Fatal(err)
	}
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{
		StandardWebhooks: []outcome.Verifier{secret},
		Nonces:           nonces,
		Sender:           "billing", // the sender these keys are of: its message ids are its own in the shared store
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(_ context.Context, e outcome.Envelope) error {
		fmt.Println("received", e.ID, e.Type)
		return nil
	})))
	defer srv.Close()

	sink, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: srv.URL, Signer: secret, StandardWebhooks: true})
	if err != nil {
		log.Fatal(err)
	}
	e := outcome.Envelope{ID: "msg_1", Type: "order.shipped", Timestamp: time.UnixMilli(1_700_000_000_000), Data: []byte(`{"order":"ada/1"}`)}
	fmt.Println("error:", sink.Deliver(context.Background(), e))
	// Output:
	// received msg_1 order.shipped
	// error: <nil>
}

// Several keys sign every attempt while they rotate: receivers still on
// the old key and those already on the new one both accept.
func ExampleWebhookSinkConfig_rotation() {
	oldKey, _ := outcome.NewHMACKey(bytes.Repeat([]byte{1}, 32))
	newKey, _ := outcome.NewHMACKey(bytes.Repeat([]byte{2}, 32))
	for name, key := range map[string]*outcome.HMACKey{"old": oldKey, "new": newKey} {
		recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
		if err != nil {
			log.Fatal(err)
		}
		srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(_ context.Context, e outcome.Envelope) error {
			fmt.Println("a receiver holding the", name, "key received", e.ID)
			return nil
		})))
		sink, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: srv.URL, Signer: newKey, ExtraSigners: []outcome.Signer{oldKey}})
		if err != nil {
			log.Fatal(err)
		}
		e := outcome.Envelope{ID: "msg_" + name, Type: "order.shipped", Timestamp: time.UnixMilli(1_700_000_000_000), Data: []byte(`{}`)}
		if err := sink.Deliver(context.Background(), e); err != nil {
			log.Fatal(err)
		}
		srv.Close()
	}
	// Unordered output:
	// a receiver holding the old key received msg_old
	// a receiver holding the new key received msg_new
}
