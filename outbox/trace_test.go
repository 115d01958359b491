package outbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// noFormats is a store that keeps no format (it does not implement
// store.Formats, as a store of its own a service may pass): format 1.
type noFormats struct{ store.Store }

// traced returns ctx with an active span of a writer: a valid span
// context with a tracestate.
func traced(ctx context.Context) (context.Context, trace.SpanContext) {
	ts, err := trace.ParseTraceState("shop=p1,vendor=opaque")
	if err != nil {
		panic(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	return trace.ContextWithSpanContext(ctx, sc), sc
}

// appendBoth appends, in ctx, a relay row and the outcome of reservation
// "r" to a builder over s, and returns the batch it finishes into.
func (e *env) appendBoth(t *testing.T, ctx context.Context, s store.Store) *store.Batch {
	t.Helper()
	o, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
	require.NoError(t, err)
	ob, err := outbox.NewBuilder(s, now, o)
	require.NoError(t, err)
	_, err = ob.Relay(ctx, target, []gen.RelayPut{put("k", "v")}, [][]byte{[]byte("gone")})
	require.NoError(t, err)
	_, err = reservationSource.Append(ctx, ob, refdomain.ReservationKey{ID: refdomain.MustReservationID("r")}, ticket, committed(refdomain.MustRepoName("repo")))
	require.NoError(t, err)
	b := store.NewBatch()
	require.NoError(t, ob.Finish(b))
	return b
}

// rowsOf returns the relay row and the pending row b puts.
func rowsOf(t *testing.T, b *store.Batch) (relayRow, pendingRow store.Value) {
	t.Helper()
	for _, w := range b.Writes {
		if _, err := gen.ParseRelayKey(w.Key); err == nil {
			relayRow = w.Value
		}
		if _, err := gen.ParseOutcomePendingKey(w.Key); err == nil {
			pendingRow = w.Value
		}
	}
	require.NotNil(t, relayRow)
	require.NotNil(t, pendingRow)
	return relayRow, pendingRow
}

// TestAppendsKeepTheWritersTraceContextAtFormat2: at format 2 of the
// library's namespace, a writer with an active span queues a RelayV2 and
// an OutcomePendingV2 holding its trace context, which DecodeRelay and
// DecodePending read back; a writer without one queues exactly the V1
// rows it always did.
func TestAppendsKeepTheWritersTraceContextAtFormat2(t *testing.T) {
	e := newEnvAt(t, memengine.New(), 2)
	e.seedTicketed(t, refdomain.MustReservationID("r"))
	s := e.inner
	tctx, sc := traced(e.ctx)

	relayRow, pendingRow := rowsOf(t, e.appendBoth(t, tctx, s))
	assert.Equal(t, byte(gen.VersionRelayV2), relayRow[0])
	assert.Equal(t, byte(gen.VersionOutcomePendingV2), pendingRow[0])
	r, err := outbox.DecodeRelay(relayRow)
	require.NoError(t, err)
	assert.Equal(t, [16]byte(sc.TraceID()), r.Trace.TraceID)
	assert.Equal(t, [8]byte(sc.SpanID()), r.Trace.SpanID)
	assert.Equal(t, uint8(sc.TraceFlags()), r.Trace.Flags)
	assert.Equal(t, "shop=p1,vendor=opaque", string(r.Trace.State))
	assert.Equal(t, []gen.RelayPut{put("k", "v")}, r.Puts)
	assert.Equal(t, [][]byte{[]byte("gone")}, r.Deletes)
	assert.Equal(t, uint64(now.UnixMilli()), r.AtMs)
	p, err := outbox.DecodePending(pendingRow)
	require.NoError(t, err)
	assert.Equal(t, r.Trace, p.Trace)
	assert.Equal(t, "refdomain.reservations", p.Source.String())

	plainRelay, plainPending := rowsOf(t, e.appendBoth(t, e.ctx, s))
	v1Relay, v1Pending := rowsOf(t, e.appendBoth(t, e.ctx, noFormats{e.inner}))
	assert.Equal(t, v1Relay, plainRelay, "no span: the RelayV1 of a store without formats")
	assert.Equal(t, v1Pending, plainPending)
	assert.Equal(t, byte(gen.VersionRelayV1), plainRelay[0])
	r, err = outbox.DecodeRelay(plainRelay)
	require.NoError(t, err)
	assert.Equal(t, gen.TraceContext{}, r.Trace, "a RelayV1 reads as a RelayV2 without a trace context")
}

// TestAtFormat1AppendsWriteTheV1sWhateverTheSpan: while the store's format
// is 1 (or it keeps none), a traced writer's rows are byte for byte an
// untraced writer's, which a binary that reads only the V1s reads.
func TestAtFormat1AppendsWriteTheV1sWhateverTheSpan(t *testing.T) {
	e := newEnvAt(t, memengine.New(), 1)
	e.seedTicketed(t, refdomain.MustReservationID("r"))
	tctx, _ := traced(e.ctx)
	wantRelay, wantPending := rowsOf(t, e.appendBoth(t, e.ctx, e.inner))
	for name, s := range map[string]store.Store{"no formats": noFormats{e.inner}, "format 1": e.inner} {
		relayRow, pendingRow := rowsOf(t, e.appendBoth(t, tctx, s))
		assert.Equal(t, wantRelay, relayRow, name)
		assert.Equal(t, wantPending, pendingRow, name)
		_, err := gen.DecodeRelayV1(relayRow)
		assert.NoError(t, err, "%s: an old reader reads it", name)
		_, err = gen.DecodeOutcomePendingV1(pendingRow)
		assert.NoError(t, err, name)
	}
}

// TestATraceContextNeverMakesAnAppendFail: a row that fits the store's
// limits without a trace context is queued without one when it would not
// fit with it (the value limit, the batch's bytes), never refused.
func TestATraceContextNeverMakesAnAppendFail(t *testing.T) {
	e := newEnvAt(t, memengine.New(), 2)
	s := e.inner
	tctx, _ := traced(e.ctx)
	caps := e.caps
	o, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
	require.NoError(t, err)

	// A relay row whose RelayV1 is exactly the value limit.
	probe, err := gen.EncodeRelayV1(gen.RelayV1{Target: mustTuple(t, target), Puts: []gen.RelayPut{put("k", "")}, AtMs: uint64(now.UnixMilli())})
	require.NoError(t, err)
	fill := caps.MaxValueBytes - len(probe)
	for range 4 { // the value's length prefix grows with it
		v1, err := gen.EncodeRelayV1(gen.RelayV1{Target: mustTuple(t, target), Puts: []gen.RelayPut{put("k", strings.Repeat("v", fill))}, AtMs: uint64(now.UnixMilli())})
		require.NoError(t, err)
		fill -= len(v1) - caps.MaxValueBytes
	}
	ob, err := outbox.NewBuilder(s, now, o)
	require.NoError(t, err)
	_, err = ob.Relay(tctx, target, []gen.RelayPut{put("k", strings.Repeat("v", fill))}, nil)
	require.NoError(t, err, "a row at the value limit with a span")
	b := store.NewBatch()
	require.NoError(t, ob.Finish(b))
	for _, w := range b.Writes {
		if _, err := gen.ParseRelayKey(w.Key); err == nil {
			assert.Len(t, w.Value, caps.MaxValueBytes)
			assert.Equal(t, byte(gen.VersionRelayV1), w.Value[0], "queued without its trace context")
		}
	}

	// A small row still carries it.
	ob, err = outbox.NewBuilder(s, now, o)
	require.NoError(t, err)
	_, err = ob.Relay(tctx, target, []gen.RelayPut{put("k", "v")}, nil)
	require.NoError(t, err)
	b = store.NewBatch()
	require.NoError(t, ob.Finish(b))
	found := false
	for _, w := range b.Writes {
		if _, err := gen.ParseRelayKey(w.Key); err == nil {
			found = w.Value[0] == gen.VersionRelayV2
		}
	}
	assert.True(t, found)
}

func mustTuple(t *testing.T, p store.Partition) []byte {
	t.Helper()
	id, err := p.AppendTuple(nil)
	require.NoError(t, err)
	return id
}

// TestAnAppendWithoutASpanCostsWhatItDid: without an active span, a
// builder allocates as much at format 2 as at format 1, and a span costs
// nothing at format 1, where it cannot be kept.
func TestAnAppendWithoutASpanCostsWhatItDid(t *testing.T) {
	at1, at2 := newEnvAt(t, memengine.New(), 1), newEnvAt(t, memengine.New(), 2)
	tctx, _ := traced(context.Background())
	allocs := func(ctx context.Context, e *env) float64 {
		o, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
		require.NoError(t, err)
		return testing.AllocsPerRun(100, func() {
			ob, err := outbox.NewBuilder(e.inner, now, o)
			if err != nil {
				panic(err)
			}
			if _, err := ob.Relay(ctx, target, []gen.RelayPut{put("k", "v")}, nil); err != nil {
				panic(err)
			}
			if _, err := ob.Outcome(ctx, outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Key: store.Key("k"), Prior: ticket, Terminal: ticket}); err != nil {
				panic(err)
			}
		})
	}
	base := allocs(context.Background(), at1)
	assert.Equal(t, base, allocs(context.Background(), at2), "no span at format 2")
	assert.Equal(t, base, allocs(tctx, at1), "a span at format 1")
	assert.Less(t, base, allocs(tctx, at2), "a span at format 2 is kept: its tracestate is copied")
}

// TestDecodeRelayAndDecodePendingReadEveryVersion: a version newer than
// the library's is store.ErrNewerVersion, to hold; bytes that do not
// decode are corrupt.
func TestDecodeRelayAndDecodePendingReadEveryVersion(t *testing.T) {
	v2, err := gen.EncodeRelayV2(gen.RelayV2{Target: []byte{0x02, 't', 0}, Puts: []gen.RelayPut{put("k", "v")}, AtMs: 3, Trace: gen.TraceContext{TraceID: [16]byte{1}, SpanID: [8]byte{2}, Flags: 1}})
	require.NoError(t, err)
	r, err := outbox.DecodeRelay(v2)
	require.NoError(t, err)
	assert.Equal(t, [16]byte{1}, r.Trace.TraceID)
	newer := append([]byte{gen.VersionRelayV2 + 1}, v2[1:]...)
	_, err = outbox.DecodeRelay(newer)
	require.ErrorIs(t, err, store.ErrNewerVersion)
	require.NotErrorIs(t, err, store.ErrCorrupt)
	_, err = outbox.DecodeRelay(v2[:len(v2)-1])
	require.ErrorIs(t, err, store.ErrCorrupt)

	p2, err := gen.EncodeOutcomePendingV2(gen.OutcomePendingV2{Source: gen.MustOutcomeSource("s"), Key: []byte("k"), Trace: gen.TraceContext{TraceID: [16]byte{1}, SpanID: [8]byte{2}}})
	require.NoError(t, err)
	_, err = outbox.DecodePending(append([]byte{gen.VersionOutcomePendingV2 + 1}, p2[1:]...))
	require.ErrorIs(t, err, store.ErrNewerVersion)
	_, err = outbox.DecodePending(nil)
	require.ErrorIs(t, err, store.ErrCorrupt, "an empty value is the caller's to tell apart")
	p1, err := gen.EncodeOutcomePendingV1(gen.OutcomePendingV1{Source: gen.MustOutcomeSource("s"), Key: []byte("k"), AtMs: 9})
	require.NoError(t, err)
	p, err := outbox.DecodePending(p1)
	require.NoError(t, err)
	assert.Equal(t, gen.OutcomePendingV2{Source: gen.MustOutcomeSource("s"), Key: []byte("k"), AtMs: 9}, p)
}

// capsStore is a store with capabilities of its own, at the store's
// formats.
type capsStore struct {
	store.Store
	caps store.Capabilities
}

func (s capsStore) Capabilities() store.Capabilities { return s.caps }

func (s capsStore) Format(namespace string) uint32 { return store.FormatOf(s.Store, namespace) }

// TestATraceContextNeverMakesAnOutcomeFail: an outcome that fits the
// batch's bytes only without a trace context is queued without one.
func TestATraceContextNeverMakesAnOutcomeFail(t *testing.T) {
	e := newEnvAt(t, memengine.New(), 2)
	o, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
	require.NoError(t, err)
	tctx, _ := traced(e.ctx)
	outcome := func(ctx context.Context, maxBatchBytes int) (store.Value, error) {
		caps := e.caps
		caps.MaxBatchBytes = maxBatchBytes
		ob, err := outbox.NewBuilder(capsStore{e.inner, caps}, now, o)
		require.NoError(t, err)
		if _, err := ob.Outcome(ctx, outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Key: store.Key("k"), Prior: ticket, Terminal: ticket}); err != nil {
			return nil, err
		}
		b := store.NewBatch()
		if err := ob.Finish(b); err != nil {
			return nil, err
		}
		_, pending := rowsOf(t, store.NewBatch().Put(outbox.RelayKey(1), store.Value("x")).Add(b.Writes...))
		return pending, nil
	}
	// The least batch bytes the untraced outcome needs.
	lo, hi := 0, e.caps.MaxBatchBytes
	for lo < hi {
		mid := (lo + hi) / 2
		if _, err := outcome(e.ctx, mid); err != nil {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	_, err = outcome(e.ctx, lo-1)
	require.ErrorIs(t, err, store.ErrInvalid, "the bound is tight")
	pending, err := outcome(tctx, lo)
	require.NoError(t, err, "with a span, at the least bytes an untraced outcome needs")
	assert.Equal(t, byte(gen.VersionOutcomePendingV1), pending[0], "queued without its trace context")
	pending, err = outcome(tctx, lo+200)
	require.NoError(t, err)
	assert.Equal(t, byte(gen.VersionOutcomePendingV2), pending[0], "with room, it keeps it")
}
