package spantest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestAttrReadsARecordedSpansAttribute(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("spantest").Start(context.Background(), "s")
	span.SetAttributes(attribute.Int64("a", 7), attribute.String("b", "x"))
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	if got := Attr(ended[0], "a").AsInt64(); got != 7 {
		t.Errorf("Attr a = %d, want 7", got)
	}
	if got := Attr(ended[0], "b").AsString(); got != "x" {
		t.Errorf("Attr b = %q, want x", got)
	}
	if got := Attr(ended[0], "c"); got.Type() != attribute.INVALID {
		t.Errorf("Attr of an absent key = %v, want the zero Value", got)
	}
}
