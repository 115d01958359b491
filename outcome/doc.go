// Package outcome delivers the terminal outcomes of a service's own
// records to a sink, at least once: an order shipped, a withdrawal
// settled, a reservation committed.
//
// # Sources
//
// A service declares an outcome source ([NewSource]) for a record class of
// its own schema, from the generated codec functions and its own rules:
// the record's key and record codecs, when a record is terminal, the
// outcome's id (what receivers deduplicate by), its [Event] (type,
// timestamp, payload), optionally which outcomes are synthetic
// (acknowledged without a sink call), and what the acknowledgment does to
// the record (OnAck: [KeepRecord] or [DeleteRecord], in the acknowledging
// batch). The reference domain's reservations are one such source
// (package refdomain/reservations).
//
// # Queueing
//
// The service makes a record terminal through its source, in its own
// batch ([TypedSource.Append] on an [outbox.Builder]): the batch rewrites the
// record, guarded by the value the service read, and queues a pending row
// that names the source and the record's key, with the time it was
// queued; the batch that fills an empty backlog creates the
// outcome-delivery timer ([timers.KindOutcomeDelivery]). The rows it queues
// are the library's ([gen.OutcomePendingKey], the backlog, the timer); the
// record stays where it is, in the service's own partition, which holds
// the service's records and the library's runtime rows, never another
// schema's records.
//
// # Delivery
//
// [Delivery] is the timer's handler: register it, with every source whose
// outcomes it delivers, in the [timers.Registry] of a [timers.Scheduler], and
// every partition's queued outcomes, of all its sources in one backlog,
// are pushed to its [Sink] in sequence order, each sink call bounded by a
// timeout and each fire by a row count and a wall-clock budget, and the
// delivered ones acknowledged in one guarded batch: the pending rows are
// deleted, and the records too when their source says so. A failing sink
// keeps its rows queued and the timer backs off (1 s doubling to 15 min,
// with jitter, or the sink's Retry-After). A row that cannot become an
// outcome (corrupt, of a source the Delivery does not have, a missing or
// non-terminal record) is logged and kept, never dropped, and never holds
// up the rows behind it; so is one whose pending row or record is of a
// newer version than this binary reads (store.ErrNewerVersion: a newer
// binary wrote it), counted in mkitfdb_outcome_newer_rows_total, for a
// binary that reads it to deliver. Pending rows written before rows named their
// source (an empty value) resolve through the one source that sets
// [SourceConfig.LegacyKey] (the reservations source does), and are kept and
// logged without one. Delivery is at least once: a sink deduplicates by
// [Envelope.ID].
//
// # Traces
//
// [TypedSource.Append] keeps the trace context of its ctx's span with the
// pending row (a gen.OutcomePendingV2, at the store's mkit format 2; see
// package outbox). With a tracer provider that records
// ([DeliveryConfig].TracerProvider, or the global one), each sink call is
// a span, mkitfdb.outcome.deliver, of kind client, with the partition's
// kind, the attempt (the delivery timer's backoff attempt plus one), the
// outcome's id, source and sequence, an error when the call failed: a
// child of the writer's span when the row keeps one, the timer's fire
// linked, else a child of the fire's span. [WebhookSink] sends the call's
// span in the W3C traceparent and tracestate headers; [Receiver.Wrap]
// continues it for a verified request ([ReceiverConfig].TracerProvider):
// the handler runs in mkitfdb.outcome.receive, of kind server, with the
// request's id, its scheme and the status it answered. A retry, by this
// process or another after a crash, reads the context from the row again,
// so every attempt and the partner's handler are in the writer's trace.
// Without a provider that records, no span is started and nothing is
// allocated for one.
//
// # Envelopes and webhooks
//
// Each outcome reaches its sink as an [Envelope]: id, type, timestamp and
// the source's payload as data, the structure Standard Webhooks
// recommends; its JSON form is stable within [EnvelopeVersion].
// [WebhookSink] POSTs each envelope's JSON form to an https URL, each
// attempt signed afresh with HMAC-SHA256 ([HMACKey]) or Ed25519
// ([Ed25519Signer]), by several keys at once while they rotate
// ([WebhookSinkConfig.ExtraSigners]), in the library's own scheme, which binds
// the recipient ([WebhookSinkConfig.Endpoint]), and, with
// [WebhookSinkConfig.StandardWebhooks], in Standard Webhooks' as well
// (webhook-id, webhook-timestamp, webhook-signature; "whsec_" secrets of
// 24 bytes and more, [ParseWebhookSecret]). The doc of [HeaderSignature]
// and the other headers says exactly what each scheme signs.
//
// On the receiving side, [Receiver] verifies either scheme as http.Handler
// middleware: the signature, the validity window, the endpoint when
// configured, and that the request's key (its nonce, or its Standard
// Webhooks message id) was not accepted before; [Handle] turns verified
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
// The keys a Receiver accepted are held in a [NonceStore], under the
// name of the sender whose keys it holds ([ReceiverConfig.Sender]). The
// default, [MemoryNonceStore], serves one process; a receiver running as
// several replicas, or that must refuse a replay after a restart, uses a
// [PartitionNonceStore], kept in a partition of the receiving service's
// store, so that every replica refuses what any of them accepted (one
// commit per request). What is held, for how long, and when it is
// released:
//
// # What a receiver accepts once, and when
//
// A Receiver verifies a request under the library's own scheme when it
// carries HeaderSignature and the receiver has Verifiers, else under
// Standard Webhooks when it carries HeaderWebhookSignature and the
// receiver has StandardWebhooks keys ([HeaderSignature] says what each
// signs). It reads its clock once it has read the body, and checks
// the window against that time: a body that trickles in past the window
// is refused, and no key is ever recorded already expired. [Receiver.Wrap]
// bounds the time it reads a body ([ReceiverConfig.BodyTimeout]).
//
// Once the signature verified, the receiver claims the request's keys in
// its NonceStore, all or none, and refuses (401) a request one of whose
// keys is held. A key is the sender's: receivers of several senders may
// share a store, and a sender's keys may rotate under one name. What the
// keys are, and how long each is held:
//
//   - The library's scheme: the nonce, which names one attempt (a
//     sender's retry is a new attempt, with a new nonce), held until
//     expires-at plus MaxSkew whatever the handler answers. A request
//     bearing it again is a replay.
//   - Standard Webhooks: the message id, which the sender's retries of
//     one message share, each with a new timestamp and signature; the
//     specification advises receivers to process a message once by it.
//     It is held until the timestamp plus Tolerance, so neither a
//     captured request replayed nor a duplicate of the message reaches
//     the handler inside the window. When the handler behind Wrap does
//     not answer 2xx (it failed: 503; it panicked), Wrap releases the
//     claim, so that the sender's retry is accepted at once instead of
//     being refused until the window ends. After a 2xx the id stays held
//     until then; a retry after it (the sender lost the answer) is
//     accepted, and the handler deduplicates it by Envelope.ID, as it
//     deduplicates every at-least-once delivery. No retry is refused
//     beyond one window.
//   - A receiver of both schemes claims, beside the scheme's own key, the
//     attempt's: what both schemes sign of one attempt, its second
//     (created-at's, or the Standard Webhooks timestamp, which the sink
//     sets to the same second) and its body, in a SHA-256 digest. The
//     sink sends one attempt with both header sets; without the attempt
//     key, the request stripped of one set would be accepted again under
//     the other. It is held until the later of the two windows the
//     attempt may be accepted in: under the library's scheme, expires-at
//     plus MaxSkew (a Standard Webhooks request does not carry
//     expires-at: its attempt key is held until the end of its second
//     plus MaxValidity and MaxSkew, so set MaxValidity to the sender's
//     Validity to hold it no longer than needed); under Standard
//     Webhooks, the second plus Tolerance. So one attempt is accepted at most once,
//     whichever scheme each copy of it arrives under, while each scheme
//     takes the sender's retries as above: a new attempt of a message
//     under the library's scheme is accepted, a duplicate message id
//     under Standard Webhooks refused. Two attempts of one message in the
//     same second are one attempt to such a receiver.
//
// Replicas sharing a PartitionNonceStore may run clocks apart by up to
// [PartitionNonceStoreConfig.MaxReplicaSkew] either way: a sweep deletes a key
// only once its own clock is past the key's expiry by more, so no sweep
// lets through a replay that another replica's window still admits.
package outcome
