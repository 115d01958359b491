package outcome

import (
	"context"
	"fmt"
	"time"
)

// Sink takes delivered outcomes, each in its Envelope: a webhook
// (WebhookSink), a queue, a service's own table. Deliver returns nil once
// the sink holds e durably (it may then be acknowledged and deleted), or
// an error, preferably a *DeliveryError, which keeps the outcome queued
// for a later fire. Delivery is at least once: a sink deduplicates by
// e.ID.
//
// Deliver must return once ctx ends; Delivery ends it at its sink timeout
// and stops waiting then, whatever Deliver does. A Sink is called from
// one goroutine at a time per fire, and from several fires (of several
// partitions) at once: it must be safe for concurrent use.
type Sink interface {
	Deliver(ctx context.Context, e Envelope) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, e Envelope) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, e Envelope) error { return f(ctx, e) }

// DeliveryError is a sink's refusal of an outcome: Reason says why, in
// words safe to log (never the envelope's data or a key); RetryAfter,
// when positive, is the sink's hint of when to try again, which Delivery
// honours up to its longest backoff. It matches ErrDelivery.
type DeliveryError struct {
	Reason     string
	RetryAfter time.Duration
}

// Error returns "outcome: delivery failed: <reason>", with the hint.
func (e *DeliveryError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%v: %s (retry after %v)", ErrDelivery, e.Reason, e.RetryAfter)
	}
	return fmt.Sprintf("%v: %s", ErrDelivery, e.Reason)
}

// Is reports whether target is ErrDelivery.
func (e *DeliveryError) Is(target error) bool { return target == ErrDelivery }
