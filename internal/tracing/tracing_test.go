package tracing

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mkit-dev/mkitfdb/gen"
)

// No test of this package but TestActiveFollowsTheGlobalProvider's
// subprocess installs a global provider: the others rely on the API's
// default.

func recorder() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

func TestTheGlobalDefaultIsRecognised(t *testing.T) {
	require.NotNil(t, globalType, "the API's default global provider is not a *%s.%s: the check that keeps the library from allocating without an SDK misses it", globalPackage, globalName)
	assert.True(t, isGlobalDefault(otel.GetTracerProvider()))
	tp, _ := recorder()
	assert.False(t, isGlobalDefault(tp))
	assert.False(t, isGlobalDefault(noop.NewTracerProvider()))
}

func TestActiveWithoutAProviderRecordsNothingAndAllocatesNothing(t *testing.T) {
	for name, tp := range map[string]trace.TracerProvider{
		"nil":             nil,
		"the global":      otel.GetTracerProvider(),
		"noop":            noop.NewTracerProvider(),
		"noop (pointer)":  &noop.TracerProvider{},
		"zero Tracer too": nil,
	} {
		tr := New(tp, Scope+"test")
		if name == "zero Tracer too" {
			tr = Tracer{}
		}
		_, ok := tr.Active()
		assert.False(t, ok, name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = tr.Active() }), name)
	}
	tp, rec := recorder()
	tr, ok := New(tp, Scope+"test").Active()
	require.True(t, ok, "an SDK provider records")
	_, span := tr.Start(context.Background(), "x")
	span.End()
	assert.Len(t, rec.Ended(), 1)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = New(tp, Scope+"test").Active() }), "New of a configured provider resolves its tracer once")
}

// TestActiveFollowsTheGlobalProvider: a Tracer of the global provider, made
// before the program installs one, records nothing until then and records
// through it after. It runs in a subprocess: a provider, once installed,
// cannot be removed.
func TestActiveFollowsTheGlobalProvider(t *testing.T) {
	if os.Getenv("MKITFDB_TRACING_GLOBAL") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestActiveFollowsTheGlobalProvider$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "MKITFDB_TRACING_GLOBAL=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestActiveFollowsTheGlobalProvider", "%s", out)
		return
	}
	byNil, byValue := New(nil, Scope+"test"), New(otel.GetTracerProvider(), Scope+"test")
	for _, tr := range []Tracer{byNil, byValue} {
		_, ok := tr.Active()
		require.False(t, ok)
	}
	tp, rec := recorder()
	otel.SetTracerProvider(tp)
	for i, tr := range []Tracer{byNil, byValue} {
		tracer, ok := tr.Active()
		require.True(t, ok, "tracer %d records once a provider is installed", i)
		_, span := tracer.Start(context.Background(), "after")
		span.End()
	}
	assert.Len(t, rec.Ended(), 2)
	otel.SetTracerProvider(noop.NewTracerProvider())
	_, ok := byNil.Active()
	assert.False(t, ok, "a no-op provider installed globally records nothing")
}

func spanContext(trace1, span1 byte, state string) trace.SpanContext {
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		panic(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{trace1, 1}, SpanID: trace.SpanID{span1, 2}, TraceFlags: trace.FlagsSampled, TraceState: ts,
	})
}

func TestEncodeAndDecodeKeepTheContext(t *testing.T) {
	for _, state := range []string{"", "vendor=opaque", "a=1,b@tenant=2,c=x y"} {
		sc := spanContext(9, 8, state)
		tc := Encode(sc)
		assert.Equal(t, [16]byte(sc.TraceID()), tc.TraceID)
		assert.Equal(t, [8]byte(sc.SpanID()), tc.SpanID)
		assert.Equal(t, uint8(trace.FlagsSampled), tc.Flags)
		assert.Equal(t, state, string(tc.State))
		got := Decode(tc)
		assert.True(t, got.IsRemote())
		assert.True(t, got.Equal(sc.WithRemote(true)), "%v != %v", got, sc)
		b, err := gen.EncodeRelayV2(gen.RelayV2{Target: []byte{0x02, 'x', 0}, Puts: []gen.RelayPut{{Key: []byte("k")}}, Trace: tc})
		require.NoError(t, err)
		r, err := gen.DecodeRelayV2(b)
		require.NoError(t, err)
		assert.True(t, Decode(r.Trace).Equal(got), "through a stored row")
	}
	assert.Equal(t, gen.TraceContext{}, Encode(trace.SpanContext{}), "no span, no context")
	assert.False(t, Decode(gen.TraceContext{}).IsValid())
	assert.False(t, Decode(gen.TraceContext{TraceID: [16]byte{1}}).IsValid(), "a zero span id is no context")
	assert.False(t, Traced(&gen.TraceContext{}))
	bad := Encode(spanContext(1, 1, ""))
	bad.State = []byte("not a tracestate")
	got := Decode(bad)
	assert.True(t, got.IsValid(), "a tracestate that does not parse is dropped, the ids kept")
	assert.Zero(t, got.TraceState().Len())
}

// TestEncodeCutsTheTracestateAsW3CSays: a tracestate over 512 bytes
// loses its entries over 128 bytes first, then entries from its end,
// until it fits; what is kept parses, in its order.
func TestEncodeCutsTheTracestateAsW3CSays(t *testing.T) {
	entry := func(k string, n int) string { return k + "=" + strings.Repeat("v", n-len(k)-1) }
	var small []string
	for i := range 10 {
		small = append(small, entry(fmt.Sprintf("k%d", i), 60))
	}
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"fits", small[:8], small[:8]}, // 8*60+7 = 487
		{"from the end", small, small[:8]},
		{"long entries first", []string{small[0], entry("big", 200), small[1], entry("huge", 250), small[2]}, []string{small[0], small[1], small[2]}},
		{"both", append([]string{entry("big", 129)}, small...), small[:8]},
		{"exactly 512", []string{entry("a", 128), entry("b", 128), entry("c", 128), entry("d", 125)}, []string{entry("a", 128), entry("b", 128), entry("c", 128), entry("d", 125)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Encode(spanContext(1, 1, strings.Join(tc.in, ",")))
			assert.Equal(t, strings.Join(tc.want, ","), string(got.State))
			assert.LessOrEqual(t, len(got.State), MaxStateBytes)
			_, err := trace.ParseTraceState(string(got.State))
			assert.NoError(t, err)
		})
	}
}

// TestStartDeliveryContinuesTheRowsTrace: a delivery is a child of its
// rows' context when they belong to one trace, linking the others and the
// fire's span; it links each when they belong to several, as a child of
// the fire's span; without any, it is a child of the fire's span.
func TestStartDeliveryContinuesTheRowsTrace(t *testing.T) {
	tp, rec := recorder()
	tr := tp.Tracer("test")
	fctx, fire := tr.Start(context.Background(), "fire")
	fire.End()
	a1, a2, b := spanContext(1, 1, ""), spanContext(1, 2, ""), spanContext(2, 3, "")
	none := trace.SpanContext{}
	for _, tc := range []struct {
		name   string
		rows   []trace.SpanContext
		parent trace.SpanContext
		links  []trace.SpanContext
	}{
		{"one row", []trace.SpanContext{a1}, a1, []trace.SpanContext{fire.SpanContext()}},
		{"one writer", []trace.SpanContext{a1, none, a1}, a1, []trace.SpanContext{fire.SpanContext()}},
		{"one trace", []trace.SpanContext{none, a1, a2}, a1, []trace.SpanContext{fire.SpanContext(), a2}},
		{"two traces", []trace.SpanContext{a1, b, a2, b}, fire.SpanContext(), []trace.SpanContext{a1, b, a2}},
		{"no context", []trace.SpanContext{none, none}, fire.SpanContext(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, span := StartDelivery(fctx, tr, "deliver", tc.rows)
			span.End()
			ended := rec.Ended()
			got := ended[len(ended)-1]
			assert.Equal(t, tc.parent.TraceID(), got.SpanContext().TraceID())
			assert.Equal(t, tc.parent.SpanID(), got.Parent().SpanID())
			var links []trace.SpanContext
			for _, l := range got.Links() {
				links = append(links, l.SpanContext)
			}
			assert.Equal(t, len(tc.links), len(links), "%v", links)
			for _, want := range tc.links {
				found := false
				for _, l := range links {
					found = found || l.TraceID() == want.TraceID() && l.SpanID() == want.SpanID()
				}
				assert.True(t, found, "links %v", want)
			}
		})
	}
	var many []trace.SpanContext
	for i := range MaxLinks + 10 {
		many = append(many, trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{byte(i), 9}, SpanID: trace.SpanID{1}}))
	}
	_, span := StartDelivery(fctx, tr, "deliver", many)
	span.End()
	ended := rec.Ended()
	assert.Len(t, ended[len(ended)-1].Links(), MaxLinks)
}

// BenchmarkActive is what each span site (a timer fire, a relay attempt,
// a sink call, a received request) costs a program without a tracer
// provider: the check that starts nothing, through the global provider.
func BenchmarkActive(b *testing.B) {
	tr := New(nil, Scope+"bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := tr.Active(); ok {
			b.Fatal("a span would be started without a provider")
		}
	}
}
