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
// (Ed25519Signer), optionally with the Standard Webhooks headers as well. On the receiving side, Receiver verifies the
// signature, the validity window and the nonce (so that no request is
// accepted twice) as http.Handler middleware, and Handle turns verified
// requests into calls of the service's own function, which deduplicates
// by Envelope.ID:
//
//	recv, _ := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
//	http.Handle("/outcomes", recv.Wrap(outcome.Handle(record)))
package outcome
