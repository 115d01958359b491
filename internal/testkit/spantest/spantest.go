// Package spantest holds what this module's tests share to read the spans
// an OpenTelemetry SDK recorder kept (tracetest.SpanRecorder).
package spantest

import (
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Attr returns the value of s's attribute k, the zero Value when s has
// none.
func Attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}
