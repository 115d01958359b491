package tracing_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/spantest"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/timers"
)

// recorder returns a tracer provider of the SDK that keeps every span,
// and what it keeps.
func recorder() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// named returns the spans of name, in the order they started.
func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// linked reports whether s links sc.
func linked(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// fireOf returns the timer fire span of kind, among fires, that s links
// or is a child of.
func fireOf(t *testing.T, s sdktrace.ReadOnlySpan, fires []sdktrace.ReadOnlySpan, kind timers.Kind) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, f := range fires {
		if spantest.Attr(f, "mkitfdb.timer.kind").AsInt64() != int64(kind) {
			continue
		}
		if linked(s, f.SpanContext()) || s.Parent().SpanID() == f.SpanContext().SpanID() {
			return f
		}
	}
	t.Fatalf("%s %s: no %v fire span is its parent or linked", s.Name(), s.SpanContext().SpanID(), kind)
	return nil
}

// TestOneTraceFromTheWritersBatchToThePartnersHandler: a writer's span
// queues a relay row and an outcome in one batch, at format 2 of the
// library's namespace. The relay delivers the row to its target; the
// outcome's first webhook delivery fails at the partner; the process
// crashes; another process, built afresh over the same file, delivers it
// again. The relay's delivery, both outcome deliveries and both of the
// partner's handler spans (its own tracer provider, over HTTP) are in the
// writer's trace, each delivery a child of the writer's span, the
// partner's of the delivery that called it; each fire of a timer is a span
// with its kind, its partition's kind and its attempt, linked from the
// deliveries it ran.
func TestOneTraceFromTheWritersBatchToThePartnersHandler(t *testing.T) {
	tp, ours := recorder()
	partnerTP, theirs := recorder()
	w := newWorld(t, 2, tp, partnerTP)
	w.partner.failures = 1

	a := w.start("process-a")
	pctx, producer := tp.Tracer("shop").Start(ctx, "place order")
	w.produce(pctx, a.s, 0)
	producer.End()
	relays, pending := rows(t, a.s)
	require.Len(t, relays, 1)
	require.Len(t, pending, 1)
	assert.Equal(t, byte(gen.VersionRelayV2), relays[0][0], "at format 2 a traced writer's relay row is a RelayV2")
	assert.Equal(t, byte(gen.VersionOutcomePendingV2), pending[0][0], "and its pending row an OutcomePendingV2")

	a.tick(t)
	assert.Equal(t, rid(0).String(), relayed(t, a.s), "the relay delivered the row")
	require.Len(t, w.partner.seen(), 1)
	assert.True(t, w.partner.seen()[0].failed)
	assert.Equal(t, uint64(1), backlog(t, a.s), "the failed outcome is still queued")
	a.crash(t)

	// Another process resumes from the store once the backoff is over.
	w.clock.Advance(outcome.MaxBackoff)
	b := w.start("process-b")
	b.tick(t)
	assert.Zero(t, backlog(t, b.s), "the retry delivered the outcome")
	calls := w.partner.seen()
	require.Len(t, calls, 2)
	assert.False(t, calls[1].failed)

	spans := ours.Ended()
	want := producer.SpanContext()
	fires := named(spans, "mkitfdb.timers.fire")
	require.Len(t, fires, 3, "the relay timer's fire, and the delivery timer's in each process")

	deliveries := named(spans, "mkitfdb.relay.deliver")
	require.Len(t, deliveries, 1)
	rd := deliveries[0]
	assert.Equal(t, want.TraceID(), rd.SpanContext().TraceID(), "the relay's delivery is in the writer's trace")
	assert.Equal(t, want.SpanID(), rd.Parent().SpanID(), "a child of the writer's span")
	assert.Equal(t, trace.SpanKindConsumer, rd.SpanKind())
	assert.Equal(t, int64(1), spantest.Attr(rd, "mkitfdb.attempt").AsInt64())
	assert.Equal(t, int64(1), spantest.Attr(rd, "mkitfdb.relay.applied").AsInt64())
	relayFire := fireOf(t, rd, fires, timers.KindRelay)
	assert.True(t, linked(rd, relayFire.SpanContext()), "linked to the relay timer's fire")

	sends := named(spans, "mkitfdb.outcome.deliver")
	require.Len(t, sends, 2, "the failed attempt and the retry")
	var deliveryFires []sdktrace.ReadOnlySpan
	for i, s := range sends {
		assert.Equal(t, want.TraceID(), s.SpanContext().TraceID(), "delivery %d is in the writer's trace", i+1)
		assert.Equal(t, want.SpanID(), s.Parent().SpanID(), "delivery %d: a child of the writer's span", i+1)
		assert.Equal(t, trace.SpanKindClient, s.SpanKind())
		assert.Equal(t, int64(i+1), spantest.Attr(s, "mkitfdb.attempt").AsInt64(), "delivery %d's attempt", i+1)
		assert.Equal(t, "namespace", spantest.Attr(s, "mkitfdb.partition.kind").AsString())
		assert.Equal(t, calls[i].id, spantest.Attr(s, "mkitfdb.outcome.id").AsString())
		deliveryFires = append(deliveryFires, fireOf(t, s, fires, timers.KindOutcomeDelivery))
	}
	assert.Equal(t, codes.Error, sends[0].Status().Code, "the failed attempt is an error")
	assert.Contains(t, sends[0].Status().Description, "503")
	assert.Equal(t, codes.Unset, sends[1].Status().Code)
	assert.NotEqual(t, deliveryFires[0].SpanContext().SpanID(), deliveryFires[1].SpanContext().SpanID(), "each attempt was a fire of its own")

	for _, f := range fires {
		assert.Equal(t, "namespace", spantest.Attr(f, "mkitfdb.partition.kind").AsString())
		assert.Equal(t, int64(1), spantest.Attr(f, "mkitfdb.attempt").AsInt64(), "no fire failed: delivery backs off by rescheduling")
		assert.NotEqual(t, want.TraceID(), f.SpanContext().TraceID(), "a fire starts its own trace: it serves many writers")
	}

	// The partner, with a tracer provider of its own, continues the trace.
	received := named(theirs.Ended(), "mkitfdb.outcome.receive")
	require.Len(t, received, 2)
	for i, r := range received {
		assert.Equal(t, want.TraceID(), r.SpanContext().TraceID(), "the partner's handler %d is in the writer's trace", i+1)
		assert.Equal(t, sends[i].SpanContext().SpanID(), r.Parent().SpanID(), "a child of the delivery that called it")
		assert.True(t, r.Parent().IsRemote())
		assert.Equal(t, trace.SpanKindServer, r.SpanKind())
		assert.Equal(t, r.SpanContext(), calls[i].span.WithRemote(false), "the handler's context holds the span")
		assert.Equal(t, fmt.Sprintf("00-%s-%s-01", want.TraceID(), sends[i].SpanContext().SpanID()), calls[i].traceparent)
	}
	assert.Equal(t, int64(503), spantest.Attr(received[0], "http.response.status_code").AsInt64())
	assert.Equal(t, codes.Error, received[0].Status().Code)
	assert.Equal(t, int64(204), spantest.Attr(received[1], "http.response.status_code").AsInt64())
	assert.Equal(t, codes.Unset, received[1].Status().Code)
}

// TestAtFormat1TheTraceStartsAnewAtDelivery: while the store's format of
// the library's namespace is 1, a traced writer's rows are written as
// RelayV1 and OutcomePendingV1, byte for byte what a writer without a span
// writes, so that a process of a binary that reads only those (an old
// reader: the V1 decoders) reads every row; their deliveries then start a
// trace of their own, under the timer's fire, and the partner's handler
// continues that one.
func TestAtFormat1TheTraceStartsAnewAtDelivery(t *testing.T) {
	tp, ours := recorder()
	partnerTP, theirs := recorder()
	w := newWorld(t, 1, tp, partnerTP)
	a := w.start("process-a")
	pctx, producer := tp.Tracer("shop").Start(ctx, "place order")
	w.produce(pctx, a.s, 0)
	producer.End()
	w.produce(ctx, a.s, 1) // a writer without a span
	relays, pending := rows(t, a.s)
	require.Len(t, relays, 2)
	require.Len(t, pending, 2)
	for i := range relays {
		_, err := gen.DecodeRelayV1(relays[i])
		require.NoError(t, err, "an old reader reads relay row %d", i)
		_, err = gen.DecodeOutcomePendingV1(pending[i])
		require.NoError(t, err, "an old reader reads pending row %d", i)
	}
	traced, untraced := relays[0][2:], relays[1][2:] // their targets' writes differ by the reservation's id only
	assert.Equal(t, len(untraced), len(traced), "the traced row carries nothing more")

	a.tick(t)
	assert.Zero(t, backlog(t, a.s))
	spans := ours.Ended()
	want := producer.SpanContext()
	fires := named(spans, "mkitfdb.timers.fire")
	for _, name := range []string{"mkitfdb.relay.deliver", "mkitfdb.outcome.deliver"} {
		for _, s := range named(spans, name) {
			assert.NotEqual(t, want.TraceID(), s.SpanContext().TraceID(), "%s: no trace context was kept", name)
			assert.Empty(t, s.Links(), "%s links no writer", name)
			var parent sdktrace.ReadOnlySpan
			for _, f := range fires {
				if f.SpanContext().SpanID() == s.Parent().SpanID() {
					parent = f
				}
			}
			require.NotNil(t, parent, "%s is a child of its timer's fire", name)
		}
	}
	sends := named(spans, "mkitfdb.outcome.deliver")
	received := named(theirs.Ended(), "mkitfdb.outcome.receive")
	require.Len(t, sends, 2)
	require.Len(t, received, 2)
	for i := range received {
		assert.Equal(t, sends[i].SpanContext().TraceID(), received[i].SpanContext().TraceID(), "the partner continues the delivery's trace")
		assert.Equal(t, sends[i].SpanContext().SpanID(), received[i].Parent().SpanID())
	}
}

// TestAnOldReaderMeetsARelayV2OnlyOnceTheFormatIsRaised: the V1 decoders,
// what a binary that predates the V2s reads, read every row written at
// format 1 and none of a traced writer's at format 2, which the format
// gate allows only once no such binary runs; a writer without a span
// writes V1s at either.
func TestAnOldReaderMeetsARelayV2OnlyOnceTheFormatIsRaised(t *testing.T) {
	tp, _ := recorder()
	for _, format := range []uint32{1, 2} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) {
			w := newWorld(t, format, nil, nil)
			a := w.start("writer")
			pctx, span := tp.Tracer("shop").Start(ctx, "place order")
			w.produce(pctx, a.s, 0)
			span.End()
			w.produce(ctx, a.s, 1)
			relays, pending := rows(t, a.s)
			require.Len(t, relays, 2)
			_, errRelay := gen.DecodeRelayV1(relays[0])
			_, errPending := gen.DecodeOutcomePendingV1(pending[0])
			if format == 1 {
				assert.NoError(t, errRelay)
				assert.NoError(t, errPending)
			} else {
				assert.Error(t, errRelay, "a RelayV2 is not for an old reader")
				assert.Error(t, errPending)
				r, err := outbox.DecodeRelay(relays[0])
				require.NoError(t, err)
				assert.Equal(t, span.SpanContext().TraceID(), trace.TraceID(r.Trace.TraceID))
			}
			_, err := gen.DecodeRelayV1(relays[1])
			assert.NoError(t, err, "a writer without a span writes a RelayV1")
			_, err = gen.DecodeOutcomePendingV1(pending[1])
			assert.NoError(t, err)
		})
	}
}

// TestNothingIsRecordedWithoutATracerProvider: the library configured
// with no tracer provider, and none installed globally, records no span
// and sends no trace context, even for rows a traced writer queued (at
// format 2, RelayV2 and OutcomePendingV2); the partner's Receiver, without
// one either, gives its handler no span. Everything is delivered.
func TestNothingIsRecordedWithoutATracerProvider(t *testing.T) {
	tp, rec := recorder()
	w := newWorld(t, 2, nil, nil)
	w.partner.failures = 1
	a := w.start("process-a")
	pctx, producer := tp.Tracer("shop").Start(ctx, "place order")
	w.produce(pctx, a.s, 0)
	producer.End()
	relays, _ := rows(t, a.s)
	require.Equal(t, byte(gen.VersionRelayV2), relays[0][0])
	a.tick(t)
	w.clock.Advance(outcome.MaxBackoff)
	a.tick(t)
	assert.Zero(t, backlog(t, a.s))
	assert.Equal(t, rid(0).String(), relayed(t, a.s))
	ended := rec.Ended()
	require.Len(t, ended, 1, "only the writer's own span")
	assert.Equal(t, "place order", ended[0].Name())
	calls := w.partner.seen()
	require.Len(t, calls, 2)
	for _, c := range calls {
		assert.Empty(t, c.traceparent, "no trace context is sent")
		assert.False(t, c.span.IsValid(), "the handler's context holds no span")
	}
}
