package relay

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/internal/tracing"
)

// Design note: a delivery's span, and the trace it belongs to.
//
// Each attempt to deliver a target batch (a lane's transaction: its
// snapshot read and its commit) is a span, mkitfdb.relay.deliver, of kind
// consumer, started only when the handler's tracer records. A row queued
// by a writer with an active span (a RelayV2) names the writer's span; a
// batch's span is a child of it when every traced row of the batch
// belongs to one trace, so that the writer's trace holds its delivery,
// and otherwise links each, as OpenTelemetry's convention for a consumer
// of a batch has it (tracing.StartDelivery). The fire's span, the
// timer's, is its parent or a link. A failed batch blocks its target
// until the next cycle, whose fire tries it again in a span of its own,
// in the same trace.

// startDelivery starts the span of an attempt to deliver g's rows [from,
// to): see the design note.
func (f *fire) startDelivery(ctx context.Context, tr trace.Tracer, g *group, from, to, try int) (context.Context, trace.Span) {
	rows := make([]trace.SpanContext, 0, to-from)
	for i := from; i < to; i++ {
		rows = append(rows, tracing.Decode(f.trace(g.costs[i].win)))
	}
	return tracing.StartDelivery(ctx, tr, tracing.SpanRelayDeliver, rows,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			tracing.PartitionKind.String(f.src.Kind()),
			tracing.Attempt.Int(try),
			tracing.RelayRows.Int(to-from),
			tracing.RelayFirstSeq.Int64(int64(g.rows[from].Seq)),
			tracing.RelayLastSeq.Int64(int64(g.rows[to-1].Seq)),
		))
}

// endDelivery ends an attempt's span: the rows it applied (from the
// result before it, from, to run), and an error status when the target
// is to be blocked, with cause.
func endDelivery(span trace.Span, from, run targetResult, next attemptNext, cause error) {
	applied := 0
	if next == attemptCommitted {
		applied = run.completed - from.completed
	}
	span.SetAttributes(tracing.RelayApplied.Int(applied))
	if run.failed {
		if cause == nil {
			cause = errors.New("the target batch was not applied")
		}
		span.RecordError(cause)
		span.SetStatus(codes.Error, cause.Error())
	}
	span.End()
}
