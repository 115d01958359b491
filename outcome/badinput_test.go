package outcome_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// setTimerValue replaces the delivery timer's value, keeping its row and
// reference entry.
func (e *env) setTimerValue(v store.Value) {
	key, _, _, ok := e.timer()
	require.True(e.t, ok)
	out, err := e.s.Apply(ctx, partition, store.NewBatch().Put(key, v))
	require.NoError(e.t, err)
	require.True(e.t, out.Committed())
}

// A malformed timer value, a cursor over 4,096 bytes among them, is
// corrupt data: the fire fails with a clear error, RunDue keeps the timer
// (value unchanged) for a later run, and no row is touched.
func TestCorruptTimerValueKeepsEveryRow(t *testing.T) {
	overlong := wire.AppendBytes(wire.AppendU32([]byte{gen.VersionOutcomeTimer}, 0), make([]byte, outcome.MaxCursorBytes+1))
	for name, v := range map[string]store.Value{
		"cursor over 4096 bytes": overlong,
		"malformed":              store.Value("\x01\x02"),
		"unknown version":        store.Value("\x09\x00\x00\x00\x00\x00"),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, t0)
			e.seed("a", "b")
			e.setTimerValue(v)
			sink := &capture{}
			rep := e.fire(sink, t0)
			assert.Equal(t, 1, rep.Corrupt)
			assert.Equal(t, 1, rep.Held)
			assert.Empty(t, sink.outcomes())
			assert.Equal(t, uint64(2), e.backlogRows())
			assert.Len(t, e.pending(), 2)
			_, value, tk, ok := e.timer()
			require.True(t, ok, "the timer is never dropped")
			assert.Equal(t, v, value, "nor its value changed")
			assert.True(t, store.DecodeTime(tk.DueAtMs).After(t0))
			assert.Contains(t, e.logs.String(), "outcome-delivery timer value")
		})
	}
}

func TestCorruptBacklogKeepsEveryRow(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a")
	out, err := e.s.Apply(ctx, partition, store.NewBatch().Put(outbox.BacklogKey(), store.Value("junk")))
	require.NoError(t, err)
	require.True(t, out.Committed())
	sink := &capture{}
	rep := e.fire(sink, t0)
	assert.Equal(t, 1, rep.Corrupt)
	assert.Empty(t, sink.outcomes())
	assert.Len(t, e.pending(), 1)
	_, _, _, ok := e.timer()
	assert.True(t, ok)
	assert.Contains(t, e.logs.String(), "outcome backlog")
}

// A cursor the store does not recognise (the store changed under the
// timer) is dropped with a warning, and the scan starts at the head:
// nothing is skipped.
func TestForeignCursorRestartsAtTheHead(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b")
	v, err := gen.EncodeOutcomeTimer(gen.OutcomeTimer{Attempt: 2, Cursor: []byte("not a cursor of this store")})
	require.NoError(t, err)
	e.setTimerValue(v)
	sink := &capture{}
	assert.Equal(t, 1, e.fire(sink, t0).Fired)
	assert.Equal(t, []string{"a", "b"}, sink.ids())
	assert.Equal(t, uint64(0), e.backlogRows())
	assert.Contains(t, e.logs.String(), "rejects the timer's scan cursor")
}

func TestCanonicalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.test":           "https://example.test",
		"https://example.test/":          "https://example.test",
		"HTTPS://Example.TEST:443":       "https://example.test",
		"https://example.test:8443":      "https://example.test:8443",
		"http://localhost:8080":          "http://localhost:8080",
		"http://127.0.0.1":               "http://127.0.0.1",
		"http://[::1]:80":                "http://[::1]",
		"https://[2001:db8::1]:443/":     "https://[2001:db8::1]",
		"https://xn--bcher-kva.example/": "https://xn--bcher-kva.example",
	} {
		got, err := outcome.CanonicalOrigin(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{
		"", "example.test", "//example.test", "/path", "mailto:ops@example.test",
		"http://example.test", "http://10.0.0.1", "ftp://example.test",
		"https://example.test/path", "https://example.test?q=1", "https://example.test/?",
		"https://example.test#frag", "https://user@example.test", "https://user:pw@example.test",
		"https://", "https://:443", "https://example.test:0", "https://example.test:65536", "https://example.test:x",
	} {
		_, err := outcome.CanonicalOrigin(in)
		assert.ErrorIs(t, err, store.ErrInvalid, "%q", in)
	}
}

func TestNewDeliveryRejectsBadConfig(t *testing.T) {
	other := newWithdrawalSource(t, "bank.withdrawals", outcome.KeepRecord)
	legacy, err := outcome.NewSource(outcome.SourceConfig[bankgen.WithdrawalKey, bankgen.WithdrawalV1]{
		Name: "bank.legacy", Namespace: bankgen.SchemaNamespace, ParseKey: bankgen.ParseWithdrawalKey, Decode: bankgen.DecodeWithdrawalV1, Encode: outcome.OneVersion(bankgen.EncodeWithdrawalV1),
		Terminal: func(w bankgen.WithdrawalV1) bool { return settledOrFailed(w.State) }, ID: withdrawalID, Event: withdrawalEvent, OnAck: outcome.KeepRecord,
		LegacyKey: func(string) (bankgen.WithdrawalKey, error) { return bankgen.WithdrawalKey{}, nil },
	})
	require.NoError(t, err)
	srcs := []outcome.Source{resSource}
	for _, tc := range []struct {
		name string
		cfg  outcome.DeliveryConfig
		says string
	}{
		{"no sink", outcome.DeliveryConfig{Sources: srcs}, "without a sink"},
		{"no source", outcome.DeliveryConfig{Sink: &capture{}}, "without a source"},
		{"nil source", outcome.DeliveryConfig{Sink: &capture{}, Sources: []outcome.Source{resSource, nil}}, "source 1 is nil"},
		{"typed nil source", outcome.DeliveryConfig{Sink: &capture{}, Sources: []outcome.Source{(*reservations.Source)(nil)}}, "source 0 is nil"},
		{"two sources of one name", outcome.DeliveryConfig{Sink: &capture{}, Sources: []outcome.Source{other, resSource, newWithdrawalSource(t, "bank.withdrawals", outcome.DeleteRecord)}}, `two delivery sources named "bank.withdrawals"`},
		{"two legacy sources", outcome.DeliveryConfig{Sink: &capture{}, Sources: []outcome.Source{resSource, legacy}}, "both resolve legacy pending rows"},
		{"negative timeout", outcome.DeliveryConfig{Sink: &capture{}, Sources: srcs, SinkTimeout: -time.Second}, "negative"},
		{"negative rows", outcome.DeliveryConfig{Sink: &capture{}, Sources: srcs, MaxRows: -1}, "negative"},
		{"negative budget", outcome.DeliveryConfig{Sink: &capture{}, Sources: srcs, FireBudget: -time.Second}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := outcome.NewDelivery(tc.cfg)
			assert.ErrorIs(t, err, store.ErrInvalid)
			assert.ErrorContains(t, err, tc.says)
		})
	}
	_, err = outcome.NewDelivery(outcome.DeliveryConfig{Sink: &capture{}, Sources: []outcome.Source{resSource, other}})
	require.NoError(t, err)
}

// A store failure fails the fire: nothing it planned lands, and the next
// fire delivers again (at least once).
func TestStoreFailureLandsNothing(t *testing.T) {
	for _, m := range []storetest.Method{storetest.MethodGetMany, storetest.MethodScan, storetest.MethodGet} {
		t.Run(m.String(), func(t *testing.T) {
			e := newEnv(t, t0)
			e.seed("a", "b")
			faults := storetest.NewFaults(e.s)
			// RunDue's own reads come first: fail the handler's.
			faults.FailWhen(m, func(c storetest.Call) bool {
				switch m {
				case storetest.MethodScan:
					start, _ := gen.ClassRange(gen.TagOutcomePendingKey)
					return string(c.Start) == string(start)
				case storetest.MethodGetMany:
					return !isTimerKey(c.Keys[0])
				}
				return true
			}, nil)
			inner := e.s
			e.s = faults
			sink := &capture{}
			rep := e.fire(sink, t0)
			assert.Equal(t, 1, rep.Failed)
			e.s = inner
			assert.Equal(t, uint64(2), e.backlogRows())
			assert.Len(t, e.pending(), 2)
			due := e.timerDue()
			e.clock.Set(due)
			e.fire(sink, due)
			assert.Equal(t, uint64(0), e.backlogRows())
		})
	}
}

// isTimerKey reports whether k is a timer row or a timer's reference
// entry: RunDue reads those (the rows, or only their reference entries
// when its page is one snapshot).
func isTimerKey(k store.Key) bool {
	_, err := gen.ParseTimerKey(k)
	_, refErr := gen.ParseTimerRefKey(k)
	return err == nil || refErr == nil
}

// A run whose context ends during a sink call fails with it; nothing is
// acknowledged.
func TestCancelledRunAcknowledgesNothing(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b")
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := true
	sink := outcome.SinkFunc(func(c context.Context, _ outcome.Envelope) error {
		if first {
			first = false
			return nil // a delivered, but not acknowledged yet
		}
		cancel()
		<-c.Done()
		return c.Err()
	})
	reg, err := timers.NewRegistry(delivery(t, sink))
	require.NoError(t, err)
	_, err = timers.RunDue(runCtx, e.s, partition, reg, t0, timers.RunConfig{Clock: e.clock, Logger: e.log})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, uint64(2), e.backlogRows())
	assert.Len(t, e.pending(), 2)
}

// A sink that panics fails its call like any failure: the row stays and
// the fire backs off.
func TestPanickingSinkKeepsTheRow(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a")
	rep := e.fire(outcome.SinkFunc(func(context.Context, outcome.Envelope) error { panic("sink bug") }), t0)
	assert.Equal(t, 1, rep.Fired)
	assert.Equal(t, uint64(1), e.backlogRows())
	assert.False(t, e.timerDue().Before(t0.Add(time.Second)), "backed off")
	assert.Contains(t, e.logs.String(), "the sink panicked")
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "s:one", "s:two")
	m := telemetry.NewRecorder()
	e.fireWith(delivery(t, &capture{}, func(c *outcome.DeliveryConfig) { c.Metrics = m }), t0)
	kind := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: partition.Kind()}
	rows, ok := m.GaugeValue(telemetry.MetricOutboxBacklogRows, kind)
	require.True(t, ok)
	assert.Equal(t, 3.0, rows, "the backlog as the fire found it")
	bytes, ok := m.GaugeValue(telemetry.MetricOutboxBacklogBytes, kind)
	require.True(t, ok)
	assert.Positive(t, bytes)
	assert.Equal(t, uint64(2), m.Counter(telemetry.MetricSyntheticOutcomesAcked))
	assert.NoError(t, m.Err(), "every sample as the catalogue lists it")
}

// An empty backlog completes the timer, guarded by the backlog as read.
func TestEmptyBacklogCompletesTheTimer(t *testing.T) {
	e := newEnv(t, t0)
	b := store.NewBatch()
	require.NoError(t, timers.Schedule(b, e.s.Capabilities(), nil, timers.Timer{Kind: timers.KindOutcomeDelivery, DueAt: t0}))
	out, err := e.s.Apply(ctx, partition, b)
	require.NoError(t, err)
	require.True(t, out.Committed())
	_, _, fired := e.plan(&capture{})
	done, ok := fired.(timers.Done)
	require.True(t, ok, "%#v", fired)
	assert.Equal(t, []store.Precondition{store.Absent(outbox.BacklogKey())}, done.Batch.Preconditions)
	assert.Equal(t, 1, e.fire(&capture{}, t0).Fired)
	_, _, _, ok = e.timer()
	assert.False(t, ok, "the timer is done")
}
