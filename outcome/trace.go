package outcome

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/outbox"
)

// Design note: one trace from the writer to the receiver's handler.
//
// An outcome queued by a writer with an active span keeps the writer's
// trace context in its pending row (an OutcomePendingV2, see package
// outbox). Each sink call is a span, mkitfdb.outcome.deliver, of kind
// client: a child of the writer's span, since a call delivers one outcome
// (tracing.StartDelivery; the fire's span, the timer's, is linked), or of
// the fire's span for a row queued without one. A WebhookSink sends the
// call's span in the W3C traceparent and tracestate headers, and a
// Receiver continues it: Wrap starts mkitfdb.outcome.receive, of kind
// server, a child of the sender's span, and passes it to the handler in
// the request's context. So a partner that runs OpenTelemetry sees one
// trace from the writer's batch to its own handler, each failed attempt
// and each retry a span of its own.
//
// The headers are not signed: they say where a span belongs, nothing a
// receiver acts on, and Wrap reads them only for a request it verified,
// so an unsigned request adds nothing to any trace.

// traceContext is the W3C propagator the sink and the Receiver use: the
// traceparent and tracestate headers, whatever the program's global
// propagator is.
var traceContext = propagation.TraceContext{}

// send makes c's sink call, in a span of its own when the Delivery's
// tracer records (see the design note).
func (f *fire) send(ctx context.Context, c *candidate) error {
	tr, ok := f.d.tracer.Active()
	if !ok {
		return f.d.call(ctx, c.e)
	}
	ctx, span := tracing.StartDelivery(ctx, tr, tracing.SpanOutcomeDeliver, []trace.SpanContext{f.writerOf(c)},
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			tracing.PartitionKind.String(f.p.Kind()),
			tracing.Attempt.Int64(int64(f.attempt)+1),
			tracing.OutcomeID.String(c.e.ID),
			tracing.OutcomeSource.String(c.src.name.String()),
			tracing.OutcomeSeq.Int64(int64(c.seq)),
		))
	err := f.d.call(ctx, c.e)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// writerOf returns the trace context c's pending row keeps (an invalid
// one for a row that keeps none). The row decoded when c was made, so it
// decodes again; only a traced delivery reads it, so that a candidate
// carries nothing for it.
func (f *fire) writerOf(c *candidate) trace.SpanContext {
	if c.index >= len(f.pending) || len(f.pending[c.index].Value) == 0 {
		return trace.SpanContext{}
	}
	pv, err := outbox.DecodePending(f.pending[c.index].Value)
	if err != nil {
		return trace.SpanContext{}
	}
	return tracing.Decode(pv.Trace)
}

// injectTrace sets the traceparent and tracestate headers of ctx's span,
// when it has one.
func injectTrace(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// startReceive starts the span of a verified request v's handler, a
// child of the span the request's headers h name (none: a root span).
func startReceive(ctx context.Context, tr trace.Tracer, h http.Header, v *Verified) (context.Context, trace.Span) {
	ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(h))
	scheme := "mkitfdb"
	if v.Standard {
		scheme = "standard-webhooks"
	}
	return tr.Start(ctx, tracing.SpanOutcomeReceive,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.WebhookID.String(v.ID), tracing.WebhookScheme.String(scheme)))
}

// endReceive ends a handler's span: the status it answered, an error for
// a 5xx answer or, when it did not return, a panic.
func endReceive(span trace.Span, status int, returned bool) {
	switch {
	case !returned:
		span.RecordError(errHandlerPanicked)
		span.SetStatus(codes.Error, errHandlerPanicked.Error())
	default:
		span.SetAttributes(tracing.HTTPStatus.Int(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// errHandlerPanicked is the error of a handler's span whose handler
// panicked.
var errHandlerPanicked = errors.New("the handler panicked")
