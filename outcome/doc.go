// Package outcome delivers the terminal outcomes of the reference
// domain's reservations (package refdomain) to a sink, at least once.
//
// # Queueing and acknowledging
//
// Append queues an outcome in a partition's outbox as its reservation
// becomes terminal (outbox.Builder), in the writer's own batch; the batch
// that fills an empty backlog creates the outcome-delivery timer
// (timers.KindOutcomeDelivery). Ack plans the acknowledgment of a
// delivered one (outbox.Acks). The rows it queues are the library's
// (gen.OutcomePendingKey, the backlog, the timer); the records it reads
// and rewrites are the domain's (refdomain.ReservationKey).
//
// # Delivery
//
// Delivery is the timer's handler: register it in the timers.Registry of
// a timers.Scheduler, and every partition's queued outcomes are pushed to
// its Sink, each sink call bounded by a timeout and each fire by a row
// count and a wall-clock budget, and the delivered ones acknowledged in
// one guarded batch. A failing sink keeps its rows queued and the timer
// backs off (1 s doubling to 15 min, with jitter, or the sink's
// Retry-After); a row that cannot become an outcome (corrupt, missing) is
// logged and kept, never dropped, and never holds up the rows behind it.
// Delivery is at least once: a sink deduplicates by Envelope.ID.
//
// # Webhooks
//
// Each outcome reaches its sink as an Envelope (id, type, timestamp and
// the payload as data; its JSON form is stable within EnvelopeVersion).
// WebhookSink POSTs each envelope's JSON form to an https URL, each
// attempt signed afresh with HMAC-SHA256 (HMACKey) or Ed25519
// (Ed25519Signer), by several keys at once while they rotate
// (WebhookConfig.ExtraSigners), in the library's own scheme, which binds
// the recipient (WebhookConfig.Endpoint), and, with
// WebhookConfig.StandardWebhooks, in Standard Webhooks' as well
// (webhook-id, webhook-timestamp, webhook-signature; "whsec_" secrets of
// 24 bytes and more, ParseWebhookSecret). sign.go's design note says
// exactly what each scheme signs.
//
// On the receiving side, Receiver verifies either scheme as http.Handler
// middleware: the signature, the validity window, the endpoint when
// configured, and that the request's key (its nonce, or its Standard
// Webhooks message id) was not accepted before; Handle turns verified
// requests into calls of the service's own function, which deduplicates
// by Envelope.ID:
//
//	recv, _ := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, Endpoint: "https://hooks.example.com/outcomes"})
//	http.Handle("/outcomes", recv.Wrap(outcome.Handle(record)))
//
// A receiver of Standard Webhooks (from this library's sink or any other
// sender of that specification) is configured with the secret:
//
//	secret, _ := outcome.ParseWebhookSecret("whsec_...")
//	recv, _ := outcome.NewReceiver(outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{secret}})
//
// The keys a Receiver accepted are held in a NonceStore. The default,
// MemoryNonceStore, serves one process; a receiver running as several
// replicas, or that must refuse a replay after a restart, uses a
// PartitionNonceStore, kept in a partition of the receiving service's
// store, so that every replica refuses what any of them accepted (one
// commit per request). nonces.go's and receiver.go's design notes say
// what is held, for how long, and when it is released.
package outcome
