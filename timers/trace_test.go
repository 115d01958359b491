package timers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/spantest"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// TestEachFireIsASpanWithItsKindPartitionAndAttempt: with a tracer
// provider, each fire of a timer is a span holding the timer's kind, its
// partition's kind and its attempt, in whose context the handler runs; a
// failed fire (an error, a Retry) is an error, and the next attempt a span
// of its own with the next number. Without one (the API's global provider
// with no SDK installed), no span is started: the handler's context holds
// none.
func TestEachFireIsASpanWithItsKindPartitionAndAttempt(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var inFire []trace.SpanContext
	fires := 0
	h := &handler{kind: kindA, fire: func(ctx context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
		inFire = append(inFire, trace.SpanContextFromContext(ctx))
		fires++
		switch fires {
		case 1:
			return nil, errors.New("boom")
		case 2:
			return timers.Retry{Err: errors.New("not yet")}, nil
		}
		return timers.Done{}, nil
	}}
	reg := registry(t, h)
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now})
	for range 3 {
		due, ok := e.refDue(t, kindA, "job")
		require.True(t, ok)
		e.clock.Set(due)
		e.run(t, reg, timers.RunConfig{TracerProvider: tp})
	}
	_, ok := e.refDue(t, kindA, "job")
	require.False(t, ok, "done on the third attempt")

	spans := rec.Ended()
	require.Len(t, spans, 3)
	for i, s := range spans {
		assert.Equal(t, "mkitfdb.timers.fire", s.Name())
		assert.Equal(t, int64(kindA), spantest.Attr(s, "mkitfdb.timer.kind").AsInt64())
		assert.Equal(t, "namespace", spantest.Attr(s, "mkitfdb.partition.kind").AsString())
		assert.Equal(t, int64(i+1), spantest.Attr(s, "mkitfdb.attempt").AsInt64(), "fire %d", i+1)
		assert.Equal(t, s.SpanContext(), inFire[i], "the handler's context holds fire %d's span", i+1)
	}
	assert.Equal(t, codes.Error, spans[0].Status().Code)
	assert.Equal(t, "boom", spans[0].Status().Description)
	assert.Equal(t, codes.Error, spans[1].Status().Code, "a Retry is a failed attempt")
	assert.Equal(t, "not yet", spans[1].Status().Description)
	assert.Equal(t, codes.Unset, spans[2].Status().Code)

	// No provider: nothing started.
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "again", DueAt: e.clock.Now()})
	e.run(t, reg, timers.RunConfig{})
	require.Len(t, inFire, 4)
	assert.False(t, inFire[3].IsValid())
	assert.Len(t, rec.Ended(), 3)
}

// TestTheSchedulerTracesItsRuns: SchedulerConfig.TracerProvider is each
// run's.
func TestTheSchedulerTracesItsRuns(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := &handler{kind: kindA, fire: done}
	e.schedule(t, timers.Timer{Kind: kindA, Reference: "job", DueAt: now})
	s, err := timers.NewScheduler(timers.SchedulerConfig{Store: e.inner, Registry: registry(t, h), Owner: "w", Workers: 1, Clock: e.clock,
		Logger: e.logger, TracerProvider: tp})
	require.NoError(t, err)
	e.clock.Advance(time.Millisecond)
	rep, err := s.Tick(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Timers.Fired)
	require.Len(t, rec.Ended(), 1)
	assert.Equal(t, "mkitfdb.timers.fire", rec.Ended()[0].Name())
	assert.Equal(t, store.IdentityKind, spantest.Attr(rec.Ended()[0], "mkitfdb.partition.kind").AsString(), "a partition the scheduler does not parse")
}
