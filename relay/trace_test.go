package relay_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/spantest"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

func links(s sdktrace.ReadOnlySpan) []trace.SpanID {
	var out []trace.SpanID
	for _, l := range s.Links() {
		out = append(out, l.SpanContext.SpanID())
	}
	return out
}

// TestEachTargetBatchIsASpanInItsWritersTrace: with a tracer provider,
// each attempt at a target batch is a span. A batch whose rows were
// queued by one writer's span is its child, linking the fire's span, so
// the writer's trace holds the delivery: its failed attempt (an error,
// the target blocked) and the next cycle's retry (a span of its own). A
// batch of rows of two writers' traces is a child of the fire's span and
// links both; a batch of rows queued without a span is a child of the
// fire's span and links nothing.
func TestEachTargetBatchIsASpanInItsWritersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, func(testing.TB, string) kv.Engine { return memengine.New() })
	e.configure(t, func(c *relay.HandlerConfig) { c.TracerProvider = tp })
	e.tp = tp
	// A new store is at the format this binary knows, where a traced
	// writer's relay rows keep its trace context.
	require.Equal(t, uint32(2), store.FormatOf(e.inner, gen.SchemaNamespace))
	writer := tp.Tracer("shop")
	queue := func(ctx context.Context, rows ...row) trace.SpanContext {
		ctx, span := writer.Start(ctx, "write")
		defer span.End()
		o, err := outbox.Read(ctx, store.ReaderOf(e.inner, source))
		require.NoError(t, err)
		ob, err := outbox.NewBuilder(e.inner, e.now(), o)
		require.NoError(t, err)
		for _, r := range rows {
			_, err := ob.Relay(ctx, r.target, r.puts, r.deletes)
			require.NoError(t, err)
		}
		b := store.NewBatch()
		require.NoError(t, ob.Finish(b))
		out, err := e.inner.Apply(ctx, source, b)
		require.NoError(t, err)
		require.True(t, out.Committed())
		return span.SpanContext()
	}
	a := queue(e.ctx, put(ta, "a1", "1"), put(ta, "a2", "2"))
	b := queue(e.ctx, put(tb, "b", "1"))
	c := queue(e.ctx, put(tb, "c", "1"))
	queueInto(t, e.ctx, e.inner, e.now(), []row{put(tc, "plain", "1")})

	failed := false
	want, err := ta.AppendTuple(nil)
	require.NoError(t, err)
	e.target.FailWhen(storetest.MethodTransact, func(call storetest.Call) bool {
		if failed || call.Partition == nil {
			return false
		}
		if id, err := call.Partition.AppendTuple(nil); err != nil || !bytes.Equal(id, want) {
			return false
		}
		failed = true
		return true
	}, errors.New("the target's cluster is down"))
	e.run(t)
	e.drain(t, 10)
	assert.Equal(t, "2", e.get(t, ta, "a2"), "delivered once the target recovered")

	var fires, deliveries []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "mkitfdb.timers.fire":
			fires = append(fires, s)
		case "mkitfdb.relay.deliver":
			deliveries = append(deliveries, s)
		}
	}
	isFire := func(id trace.SpanID) bool {
		for _, f := range fires {
			if f.SpanContext().SpanID() == id {
				return true
			}
		}
		return false
	}
	var ofA []sdktrace.ReadOnlySpan
	for _, d := range deliveries {
		assert.Equal(t, trace.SpanKindConsumer, d.SpanKind())
		assert.Equal(t, int64(1), spantest.Attr(d, "mkitfdb.attempt").AsInt64())
		switch first := spantest.Attr(d, "mkitfdb.relay.first_seq").AsInt64(); first {
		case 1: // ta: a's two rows
			assert.Equal(t, a.TraceID(), d.SpanContext().TraceID())
			assert.Equal(t, a.SpanID(), d.Parent().SpanID(), "a child of the writer's span")
			require.Len(t, d.Links(), 1)
			assert.True(t, isFire(d.Links()[0].SpanContext.SpanID()), "linking the fire's")
			assert.Equal(t, int64(2), spantest.Attr(d, "mkitfdb.relay.rows").AsInt64())
			ofA = append(ofA, d)
		case 3: // tb: b's row and c's
			assert.True(t, isFire(d.Parent().SpanID()), "a child of the fire's span")
			assert.ElementsMatch(t, []trace.SpanID{b.SpanID(), c.SpanID()}, links(d))
			assert.Equal(t, int64(2), spantest.Attr(d, "mkitfdb.relay.applied").AsInt64())
		case 5: // tc: no writer's span
			assert.True(t, isFire(d.Parent().SpanID()))
			assert.Empty(t, d.Links())
		default:
			t.Errorf("a delivery of rows from %d", first)
		}
	}
	require.Len(t, ofA, 2, "the failed attempt and the next cycle's")
	assert.Equal(t, codes.Error, ofA[0].Status().Code)
	assert.Contains(t, ofA[0].Status().Description, "the target's cluster is down")
	assert.Equal(t, int64(0), spantest.Attr(ofA[0], "mkitfdb.relay.applied").AsInt64())
	assert.Equal(t, codes.Unset, ofA[1].Status().Code)
	assert.Equal(t, int64(2), spantest.Attr(ofA[1], "mkitfdb.relay.applied").AsInt64())
	assert.NotEqual(t, ofA[0].Links()[0].SpanContext.SpanID(), ofA[1].Links()[0].SpanContext.SpanID(), "two fires")
	assert.Len(t, deliveries, 4)
}
