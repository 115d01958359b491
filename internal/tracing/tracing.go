// Package tracing is the library's use of the OpenTelemetry trace API: a
// Tracer that starts spans only when a provider may record them, the W3C
// trace context a queued row keeps (gen.TraceContext) and its conversions,
// the start of a span that delivers queued rows, and the names of the
// spans' attributes. It links the API only (go.opentelemetry.io/otel,
// .../trace, .../attribute); the program picks the SDK.
//
// Design note: why a Tracer asks before it starts a span.
//
// The global tracer provider, before a program installs one
// (otel.SetTracerProvider), and the no-op providers record nothing, but
// their Start still allocates a context and a span for every call: a
// library that starts a span per timer fire and per delivery would then
// cost every program that never traces an allocation or two per row. So
// a Tracer resolves its provider at each use (Active) and reports, without
// allocating, whether a span could be recorded: not while the global
// provider is the API's default, with no SDK behind it, nor for a no-op
// provider. Spans are started only then, and their options built only
// then. The default is recognised by its type, which the API keeps
// unexported; TestTheGlobalDefaultIsRecognised fails if a new API version
// renames it.
package tracing

import (
	"context"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mkit-dev/mkitfdb/gen"
)

// Scope is the prefix of the library's instrumentation scopes: each
// package's tracer is named by its import path.
const Scope = "github.com/mkit-dev/mkitfdb/"

// The library's span names.
const (
	SpanTimerFire      = "mkitfdb.timers.fire"
	SpanRelayDeliver   = "mkitfdb.relay.deliver"
	SpanOutcomeDeliver = "mkitfdb.outcome.deliver"
	SpanOutcomeReceive = "mkitfdb.outcome.receive"
)

// The attributes of the library's spans.
const (
	// Attempt is the attempt a span is (1 for the first): a timer fire's
	// under its retry policy, a delivery's as its package documents.
	Attempt = attribute.Key("mkitfdb.attempt")
	// PartitionKind is the kind of the partition a timer fires in (a
	// relay's source, an outcome's partition).
	PartitionKind = attribute.Key("mkitfdb.partition.kind")
	// TimerKind is a timer's kind, its number.
	TimerKind = attribute.Key("mkitfdb.timer.kind")
	// RelayRows is how many queued rows a relay delivery offered the
	// target, RelayFirstSeq and RelayLastSeq their source sequences, and
	// RelayApplied how many the committed batch applied (rows the target
	// already had are not applied again).
	RelayRows     = attribute.Key("mkitfdb.relay.rows")
	RelayFirstSeq = attribute.Key("mkitfdb.relay.first_seq")
	RelayLastSeq  = attribute.Key("mkitfdb.relay.last_seq")
	RelayApplied  = attribute.Key("mkitfdb.relay.applied")
	// OutcomeID, OutcomeSource and OutcomeSeq name a delivered outcome:
	// its envelope's id, its source and its pending row's sequence.
	OutcomeID     = attribute.Key("mkitfdb.outcome.id")
	OutcomeSource = attribute.Key("mkitfdb.outcome.source")
	OutcomeSeq    = attribute.Key("mkitfdb.outcome.seq")
	// WebhookID is a received request's id (its message id, or its
	// nonce), WebhookScheme the scheme it was verified under.
	WebhookID     = attribute.Key("mkitfdb.webhook.id")
	WebhookScheme = attribute.Key("mkitfdb.webhook.scheme")
	// HTTPStatus is a received request's answer, under OpenTelemetry's
	// semantic conventions' name.
	HTTPStatus = attribute.Key("http.response.status_code")
)

// Tracer starts one package's spans. The zero Tracer uses the global
// provider under the empty scope name. It is safe for concurrent use.
type Tracer struct {
	scope string
	// tp is the configured provider, nil for the global one (read at
	// each use); t is its tracer, nil when tp records nothing.
	tp trace.TracerProvider
	t  trace.Tracer
}

// New returns the tracer of scope over tp; a nil tp, or the API's global
// provider itself, means the global provider at each use (whatever
// otel.SetTracerProvider installs later).
func New(tp trace.TracerProvider, scope string) Tracer {
	if tp == nil || isGlobalDefault(tp) {
		return Tracer{scope: scope}
	}
	t := Tracer{scope: scope, tp: tp}
	if !isNoop(tp) {
		t.t = tp.Tracer(scope)
	}
	return t
}

// Active returns the tracer to start a span with, and false, allocating
// nothing, when no span would be recorded: the provider is the global one
// and no SDK is installed, or a no-op one. Start nothing then.
func (t Tracer) Active() (trace.Tracer, bool) {
	if t.t != nil {
		return t.t, true
	}
	if t.tp != nil {
		return nil, false
	}
	p := otel.GetTracerProvider()
	if isGlobalDefault(p) || isNoop(p) {
		return nil, false
	}
	return p.Tracer(t.scope), true
}

// globalPackage and globalName name the API's global provider's type.
const (
	globalPackage = "go.opentelemetry.io/otel/internal/global"
	globalName    = "tracerProvider"
)

// globalType is the type of the global provider while the API's default
// holds, found at start (nil if a provider was installed even earlier).
var globalType = func() reflect.Type {
	if rt := reflect.TypeOf(otel.GetTracerProvider()); isGlobalType(rt) {
		return rt
	}
	return nil
}()

func isGlobalType(rt reflect.Type) bool {
	return rt != nil && rt.Kind() == reflect.Pointer && rt.Elem().Name() == globalName && rt.Elem().PkgPath() == globalPackage
}

// isGlobalDefault reports whether tp is the API's global provider, which
// forwards to whatever otel.SetTracerProvider installs.
func isGlobalDefault(tp trace.TracerProvider) bool {
	rt := reflect.TypeOf(tp)
	if globalType != nil {
		return rt == globalType
	}
	return isGlobalType(rt)
}

// isNoop reports whether tp is a provider of the API's no-op package.
func isNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	return false
}

// MaxLinks bounds the links of one delivery span: the other distinct
// contexts beyond it are left out (OpenTelemetry's SDK keeps 128 by
// default).
const MaxLinks = 128

// StartDelivery starts, with tr, the span of a delivery of queued rows
// whose writers' contexts are rows (an invalid one for a row queued
// without one), in the trace they belong to:
//
//   - when every row that carries a context belongs to one trace, the
//     span is a child of the first such context (a remote parent), and
//     links the others and the span of ctx (the timer's fire), so that the
//     writer's trace holds the delivery;
//   - when they belong to several traces, the span is a child of ctx's
//     span and links each distinct context, the convention of
//     OpenTelemetry for a consumer of a batch (a span has one parent);
//   - when no row carries one, it is a child of ctx's span.
//
// opts are added to the span's options.
func StartDelivery(ctx context.Context, tr trace.Tracer, name string, rows []trace.SpanContext, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	var parent trace.SpanContext
	single := true
	for _, sc := range rows {
		switch {
		case !sc.IsValid():
		case !parent.IsValid():
			parent = sc
		case sc.TraceID() != parent.TraceID():
			single = false
		}
	}
	var links []trace.Link
	link := func(sc trace.SpanContext) {
		if !sc.IsValid() || len(links) >= MaxLinks {
			return
		}
		for _, l := range links {
			if l.SpanContext.Equal(sc) {
				return
			}
		}
		links = append(links, trace.Link{SpanContext: sc})
	}
	switch {
	case !parent.IsValid():
	case single:
		link(trace.SpanContextFromContext(ctx))
		for _, sc := range rows {
			if sc.IsValid() && !sc.Equal(parent) {
				link(sc)
			}
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	default:
		for _, sc := range rows {
			link(sc)
		}
	}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	return tr.Start(ctx, name, opts...)
}

// MaxStateBytes bounds the tracestate a row keeps (gen.TraceContext.State):
// the length W3C asks every participant to propagate.
const MaxStateBytes = gen.MaxTraceContextState

// maxEntryBytes is the length of a tracestate entry W3C says to drop
// first when a tracestate must be cut.
const maxEntryBytes = 128

// Encode returns sc as a row keeps it; the zero TraceContext for an
// invalid sc. A tracestate over MaxStateBytes is cut as W3C says: entries
// over 128 bytes go first, then entries from the end, until it fits.
func Encode(sc trace.SpanContext) gen.TraceContext {
	if !sc.IsValid() {
		return gen.TraceContext{}
	}
	tc := gen.TraceContext{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: uint8(sc.TraceFlags())}
	if ts := sc.TraceState(); ts.Len() > 0 {
		tc.State = appendState(nil, ts)
	}
	return tc
}

// appendState appends ts's header form to dst, cut to MaxStateBytes.
func appendState(dst []byte, ts trace.TraceState) []byte {
	type entry struct{ key, value string }
	entries := make([]entry, 0, ts.Len())
	size := -1 // the first entry has no comma before it
	ts.Walk(func(k, v string) bool {
		entries = append(entries, entry{k, v})
		size += 1 + len(k) + 1 + len(v)
		return true
	})
	if size > MaxStateBytes {
		kept, n := entries[:0], -1
		for _, e := range entries {
			if l := len(e.key) + 1 + len(e.value); l <= maxEntryBytes {
				kept = append(kept, e)
				n += 1 + l
			}
		}
		for n > MaxStateBytes {
			last := kept[len(kept)-1]
			n -= 1 + len(last.key) + 1 + len(last.value)
			kept = kept[:len(kept)-1]
		}
		entries = kept
	}
	for i, e := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e.key...)
		dst = append(dst, '=')
		dst = append(dst, e.value...)
	}
	return dst
}

// Decode returns the span context a row keeps, remote; an invalid one
// when it keeps none (a zero trace or span id). A tracestate that does not
// parse is dropped, and the ids kept.
func Decode(tc gen.TraceContext) trace.SpanContext {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tc.TraceID,
		SpanID:     tc.SpanID,
		TraceFlags: trace.TraceFlags(tc.Flags),
		Remote:     true,
	})
	if !sc.IsValid() {
		return trace.SpanContext{}
	}
	if len(tc.State) > 0 {
		if ts, err := trace.ParseTraceState(string(tc.State)); err == nil {
			sc = sc.WithTraceState(ts)
		}
	}
	return sc
}

// Traced reports whether tc holds a trace context.
func Traced(tc *gen.TraceContext) bool {
	return tc.TraceID != [16]byte{}
}
