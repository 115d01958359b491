package otelmetric_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/telemetry/otelmetric"
)

// sdk is an SDK meter provider whose metrics a test reads back.
type sdk struct {
	provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

func newSDK(t *testing.T, opts ...sdkmetric.Option) sdk {
	t.Helper()
	r := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithReader(r))...)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return sdk{provider: p, reader: r}
}

// collect reads every metric the provider holds, by name; each is of the
// Adapter's scope.
func (s sdk) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			require.Equal(t, otelmetric.ScopeName, sm.Scope.Name, m.Name)
			require.NotContains(t, out, m.Name, "exported twice")
			out[m.Name] = m
		}
	}
	return out
}

func newAdapter(t *testing.T) (*otelmetric.Adapter, sdk, *bytes.Buffer) {
	t.Helper()
	s := newSDK(t)
	var logs bytes.Buffer
	a, err := otelmetric.New(s.provider, otelmetric.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	return a, s, &logs
}

func labels(kv ...string) []telemetry.Label {
	out := make([]telemetry.Label, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, telemetry.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// attrs is the attribute set of labels.
func attrs(ls []telemetry.Label) attribute.Set {
	kvs := make([]attribute.KeyValue, len(ls))
	for i, l := range ls {
		kvs[i] = attribute.String(l.Name, l.Value)
	}
	return attribute.NewSet(kvs...)
}

// series identifies the series of labels among data points.
func series(ls []telemetry.Label) attribute.Distinct {
	set := attrs(ls)
	return set.Equivalent()
}

// counterPoints returns a counter's data points by attribute set, checking
// that it is a cumulative monotonic sum.
func counterPoints(t *testing.T, m metricdata.Metrics) map[attribute.Distinct]int64 {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", m.Name, m.Data)
	assert.True(t, sum.IsMonotonic, "%s: monotonic", m.Name)
	assert.Equal(t, metricdata.CumulativeTemporality, sum.Temporality, m.Name)
	out := map[attribute.Distinct]int64{}
	for _, p := range sum.DataPoints {
		out[p.Attributes.Equivalent()] = p.Value
	}
	return out
}

// gaugePoints returns a gauge's data points by attribute set.
func gaugePoints(t *testing.T, m metricdata.Metrics) map[attribute.Distinct]float64 {
	t.Helper()
	g, ok := m.Data.(metricdata.Gauge[float64])
	require.True(t, ok, "%s is a %T, not a float64 gauge", m.Name, m.Data)
	out := map[attribute.Distinct]float64{}
	for _, p := range g.DataPoints {
		out[p.Attributes.Equivalent()] = p.Value
	}
	return out
}

// Every metric of the catalogue is exported, read back through the SDK's
// manual reader, with its name, help text as description, unit, kind
// (counters a cumulative monotonic sum, gauges a gauge), labels as
// attributes, and value: each metric its own labels and values, so that
// no two could be confused.
func TestEveryCatalogueMetricIsExported(t *testing.T) {
	a, s, logs := newAdapter(t)
	type want struct {
		labels  []telemetry.Label
		counter int64
		gauge   float64
	}
	wants := map[string]want{}
	for i, d := range telemetry.Catalogue() {
		var ls []telemetry.Label
		for j, n := range d.Labels() {
			ls = append(ls, telemetry.Label{Name: n, Value: fmt.Sprintf("%s-%d-%d", n, i, j)})
		}
		switch d.Type() {
		case telemetry.Counter:
			a.Add(d, ls, uint64(i+1))
			a.Add(d, ls, uint64(100*i))
			wants[d.Name()] = want{labels: ls, counter: int64(101*i + 1)}
		case telemetry.Gauge:
			a.Gauge(d, ls, float64(i)+0.25)
			a.Gauge(d, ls, -float64(i)-0.5)
			wants[d.Name()] = want{labels: ls, gauge: -float64(i) - 0.5}
		default:
			t.Fatalf("%s: type %v", d.Name(), d.Type())
		}
	}
	require.Zero(t, a.Dropped(), logs.String())

	got := s.collect(t)
	require.Len(t, got, len(telemetry.Catalogue()))
	for _, d := range telemetry.Catalogue() {
		m, ok := got[d.Name()]
		require.True(t, ok, "%s not exported", d.Name())
		assert.Equal(t, d.Help(), m.Description, d.Name())
		assert.Equal(t, d.Unit(), m.Unit, d.Name())
		w := wants[d.Name()]
		set := attrs(w.labels)
		assert.Equal(t, len(d.Labels()), set.Len(), d.Name())
		if d.Type() == telemetry.Counter {
			assert.Equal(t, map[attribute.Distinct]int64{series(w.labels): w.counter}, counterPoints(t, m), d.Name())
		} else {
			assert.Equal(t, map[attribute.Distinct]float64{series(w.labels): w.gauge}, gaugePoints(t, m), d.Name())
		}
	}
}

// Instruments are made at New, but a sync instrument exports nothing
// before its first sample: a program exports only what it emits.
func TestNothingIsExportedBeforeTheFirstSample(t *testing.T) {
	a, s, _ := newAdapter(t)
	assert.Empty(t, s.collect(t))
	a.Add(telemetry.MetricSchedulerTicks, nil, 1)
	got := s.collect(t)
	assert.Len(t, got, 1)
	assert.Contains(t, got, telemetry.MetricSchedulerTicks.Name())
}

func TestCounterAccumulatesAndAcceptsLabelsInAnyOrder(t *testing.T) {
	a, s, _ := newAdapter(t)
	a.Add(telemetry.MetricTimersFired, labels("partition_kind", "ref", "timer_kind", "7"), 2)
	a.Add(telemetry.MetricTimersFired, labels("timer_kind", "7", "partition_kind", "ref"), 3)
	a.Add(telemetry.MetricTimersFired, labels("partition_kind", "ref", "timer_kind", "8"), 1)
	a.Add(telemetry.MetricTimersFired, labels("partition_kind", "ref", "timer_kind", "8"), 0)
	assert.Zero(t, a.Dropped())
	assert.Equal(t, map[attribute.Distinct]int64{
		series(labels("partition_kind", "ref", "timer_kind", "7")): 5,
		series(labels("partition_kind", "ref", "timer_kind", "8")): 1,
	}, counterPoints(t, s.collect(t)[telemetry.MetricTimersFired.Name()]))
}

// A gauge's sample is its series' value until the next one, across
// collections, as telemetry.Metrics.Gauge sets it.
func TestGaugeHoldsTheLastSampleAcrossCollections(t *testing.T) {
	a, s, _ := newAdapter(t)
	ref, ns := labels("partition_kind", "ref"), labels("partition_kind", "namespace")
	d := telemetry.MetricRelayBacklogRows
	a.Gauge(d, ref, 3)
	a.Gauge(d, ns, 120)
	a.Gauge(d, ref, 2)
	want := map[attribute.Distinct]float64{series(ref): 2, series(ns): 120}
	assert.Equal(t, want, gaugePoints(t, s.collect(t)[d.Name()]))
	assert.Equal(t, want, gaugePoints(t, s.collect(t)[d.Name()]), "a collection clears nothing")
	a.Gauge(d, ns, 0)
	want[series(ns)] = 0
	assert.Equal(t, want, gaugePoints(t, s.collect(t)[d.Name()]))
}

func TestMismatchedSamplesAreDroppedAndLoggedOnceNeverPanicking(t *testing.T) {
	cases := []struct {
		name   string
		sample func(a *otelmetric.Adapter)
		logs   string
	}{
		{
			name:   "other label names",
			sample: func(a *otelmetric.Adapter) { a.Add(telemetry.MetricSchedulerClaimed, labels("other", "x"), 1) },
			logs:   `its catalogue entry has [\"partition_kind\"]`,
		},
		{
			name: "an extra label",
			sample: func(a *otelmetric.Adapter) {
				a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a", "more", "b"), 1)
			},
			logs: `its catalogue entry has [\"partition_kind\"]`,
		},
		{
			name: "a label missing",
			sample: func(a *otelmetric.Adapter) {
				a.Add(telemetry.MetricTimersFired, labels("partition_kind", "a"), 1)
			},
			logs: "its catalogue entry has",
		},
		{
			name: "a label named twice",
			sample: func(a *otelmetric.Adapter) {
				a.Add(telemetry.MetricTimersFired, labels("partition_kind", "a", "partition_kind", "b"), 1)
			},
			logs: "its catalogue entry has",
		},
		{
			name: "a gauge sample of a counter",
			sample: func(a *otelmetric.Adapter) {
				a.Gauge(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a"), 1)
			},
			logs: "is a counter, sampled as a gauge",
		},
		{
			name:   "a counter sample of a gauge",
			sample: func(a *otelmetric.Adapter) { a.Add(telemetry.MetricRelayBacklogRows, labels("partition_kind", "a"), 1) },
			logs:   "is a gauge, sampled as a counter",
		},
		{
			name:   "a Desc not in the catalogue",
			sample: func(a *otelmetric.Adapter) { a.Add(new(telemetry.Desc), nil, 1) },
			logs:   "not in the catalogue",
		},
		{
			name: "a copy of a catalogue Desc",
			sample: func(a *otelmetric.Adapter) {
				c := *telemetry.MetricSchedulerClaimed
				a.Add(&c, labels("partition_kind", "a"), 1)
			},
			logs: "not in the catalogue",
		},
		{
			name:   "a nil Desc",
			sample: func(a *otelmetric.Adapter) { a.Add(nil, nil, 1) },
			logs:   "not in the catalogue",
		},
		{
			name: "a label value that is not UTF-8",
			sample: func(a *otelmetric.Adapter) {
				a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "\xff"), 1)
			},
			logs: "is not UTF-8",
		},
		{
			name: "a counter delta no int64 holds",
			sample: func(a *otelmetric.Adapter) {
				a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a"), math.MaxInt64+1)
			},
			logs: "delta 9223372036854775808 exceeds",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, s, logs := newAdapter(t)
			a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a"), 1)
			require.NotPanics(t, func() {
				tc.sample(a)
				tc.sample(a)
			})
			assert.Equal(t, uint64(2), a.Dropped())
			assert.Equal(t, 1, strings.Count(logs.String(), "otelmetric: metric sample dropped"), logs.String())
			assert.Contains(t, logs.String(), tc.logs)
			assert.Contains(t, logs.String(), "level=ERROR")
			got := s.collect(t)
			assert.Len(t, got, 1, "only the valid sample's metric")
			assert.Equal(t, map[attribute.Distinct]int64{series(labels("partition_kind", "a")): 1},
				counterPoints(t, got[telemetry.MetricSchedulerClaimed.Name()]))
		})
	}
}

// Dropped samples are logged once per metric and set of label names:
// another metric, or other names, are logged again.
func TestDropsAreLoggedOncePerMetricAndLabelNames(t *testing.T) {
	a, _, logs := newAdapter(t)
	a.Add(telemetry.MetricSchedulerClaimed, labels("x", "1"), 1)
	a.Add(telemetry.MetricSchedulerClaimed, labels("x", "2"), 1)
	a.Add(telemetry.MetricSchedulerClaimed, labels("y", "1"), 1)
	a.Add(telemetry.MetricSchedulerErrors, labels("x", "1"), 1)
	assert.Equal(t, uint64(4), a.Dropped())
	assert.Equal(t, 3, strings.Count(logs.String(), "otelmetric: metric sample dropped"), logs.String())
}

func TestTwoAdaptersShareOneProvider(t *testing.T) {
	s := newSDK(t)
	a, err := otelmetric.New(s.provider, otelmetric.Config{})
	require.NoError(t, err)
	b, err := otelmetric.New(s.provider, otelmetric.Config{})
	require.NoError(t, err)
	ref := labels("partition_kind", "ref")
	a.Add(telemetry.MetricSchedulerTicks, nil, 1)
	b.Add(telemetry.MetricSchedulerTicks, nil, 2)
	a.Gauge(telemetry.MetricRelayBacklogRows, ref, 1)
	b.Gauge(telemetry.MetricRelayBacklogRows, ref, 7)
	assert.Zero(t, a.Dropped()+b.Dropped())
	got := s.collect(t)
	assert.Equal(t, map[attribute.Distinct]int64{series(nil): 3}, counterPoints(t, got[telemetry.MetricSchedulerTicks.Name()]))
	assert.Equal(t, map[attribute.Distinct]float64{series(ref): 7}, gaugePoints(t, got[telemetry.MetricRelayBacklogRows.Name()]))
}

func TestAdapterIsSafeForConcurrentUse(t *testing.T) {
	a, s, _ := newAdapter(t)
	kinds := []string{"ref", "namespace", "shard"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				a.Add(telemetry.MetricSchedulerTicks, nil, 1)
				// Series made concurrently: each kind's first sample races.
				a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", kinds[(g+i)%len(kinds)]), 1)
				a.Gauge(telemetry.MetricRelayBacklogRows, labels("partition_kind", "ref"), 1)
			}
		}()
	}
	wg.Wait()
	got := s.collect(t)
	assert.Equal(t, map[attribute.Distinct]int64{series(nil): 1600}, counterPoints(t, got[telemetry.MetricSchedulerTicks.Name()]))
	var claimed int64
	points := counterPoints(t, got[telemetry.MetricSchedulerClaimed.Name()])
	assert.Len(t, points, len(kinds))
	for _, v := range points {
		claimed += v
	}
	assert.Equal(t, int64(1600), claimed)
}

// Series past MaxCachedSeries of one metric are recorded all the same.
func TestSeriesPastTheCacheAreRecorded(t *testing.T) {
	s := newSDK(t, sdkmetric.WithCardinalityLimit(2*otelmetric.MaxCachedSeries))
	a, err := otelmetric.New(s.provider, otelmetric.Config{})
	require.NoError(t, err)
	n := otelmetric.MaxCachedSeries + 100
	d := telemetry.MetricRelayBacklogRows
	for round := range 2 {
		for i := range n {
			a.Gauge(d, labels("partition_kind", strconv.Itoa(i)), float64(10*i+round))
		}
	}
	assert.Zero(t, a.Dropped())
	points := gaugePoints(t, s.collect(t)[d.Name()])
	require.Len(t, points, n)
	for i := range n {
		assert.Equal(t, float64(10*i+1), points[series(labels("partition_kind", strconv.Itoa(i)))], i)
	}
}

// With no provider given, the Adapter records through the global one: into
// nothing before the program sets its provider, into that provider after.
// (The only test of the package that touches the global provider.)
func TestANilProviderIsTheGlobalOne(t *testing.T) {
	a, err := otelmetric.New(nil, otelmetric.Config{})
	require.NoError(t, err)
	a.Add(telemetry.MetricSchedulerTicks, nil, 5) // the global provider's default records nothing
	s := newSDK(t)
	otel.SetMeterProvider(s.provider)
	a.Add(telemetry.MetricSchedulerTicks, nil, 2)
	assert.Zero(t, a.Dropped())
	assert.Equal(t, map[attribute.Distinct]int64{series(nil): 2},
		counterPoints(t, s.collect(t)[telemetry.MetricSchedulerTicks.Name()]))
}

// The zero Adapter, made without New, has no instruments: it drops every
// sample, and logs it, never panicking.
func TestTheZeroAdapterDropsEverySample(t *testing.T) {
	var logs bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	var a otelmetric.Adapter
	require.NotPanics(t, func() {
		a.Add(telemetry.MetricSchedulerTicks, nil, 1)
		a.Add(telemetry.MetricSchedulerTicks, nil, 1)
		a.Gauge(telemetry.MetricRelayBacklogRows, labels("partition_kind", "ref"), 1)
	})
	assert.Equal(t, uint64(3), a.Dropped())
	assert.Equal(t, 2, strings.Count(logs.String(), "otelmetric: metric sample dropped"), logs.String())
	assert.Contains(t, logs.String(), "no instrument")
}

// refusingMeter refuses the instruments named in refuse (with err, or with
// no instrument when err is nil).
type refusingMeter struct {
	noop.Meter
	refuse map[string]bool
	err    error
}

func (m refusingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if m.refuse[name] {
		if m.err == nil {
			return nil, nil
		}
		return noop.Int64Counter{}, m.err
	}
	return m.Meter.Int64Counter(name, opts...)
}

func (m refusingMeter) Float64Gauge(name string, opts ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	if m.refuse[name] {
		if m.err == nil {
			return nil, nil
		}
		return noop.Float64Gauge{}, m.err
	}
	return m.Meter.Float64Gauge(name, opts...)
}

type providerOf struct {
	noop.MeterProvider
	meter metric.Meter
	scope *string
}

func (p providerOf) Meter(name string, _ ...metric.MeterOption) metric.Meter {
	*p.scope = name
	return p.meter
}

func TestNewFailsWhenTheMeterRefusesAnInstrument(t *testing.T) {
	refusal := errors.New("a view that does not fit")
	counter, gauge := telemetry.MetricSchedulerTicks.Name(), telemetry.MetricOutboxBacklogBytes.Name()
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"with an error", refusal, []string{"counter " + counter + ": a view that does not fit", "gauge " + gauge + ": a view that does not fit"}},
		{"with no instrument", nil, []string{"counter " + counter + ": the meter returned no instrument", "gauge " + gauge + ": the meter returned no instrument"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var scope string
			p := providerOf{meter: refusingMeter{refuse: map[string]bool{counter: true, gauge: true}, err: tc.err}, scope: &scope}
			a, err := otelmetric.New(p, otelmetric.Config{})
			require.ErrorIs(t, err, otelmetric.ErrInstrument)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			}
			assert.Nil(t, a)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Equal(t, otelmetric.ScopeName, scope)
		})
	}
	t.Run("no meter", func(t *testing.T) {
		var scope string
		_, err := otelmetric.New(providerOf{scope: &scope}, otelmetric.Config{})
		require.ErrorIs(t, err, otelmetric.ErrInstrument)
		assert.Contains(t, err.Error(), "no meter")
	})
}

// After a series' first sample, a sample allocates nothing, in the Adapter
// (on the API's no-op provider) or in the SDK: for every metric of the
// catalogue, its labels in the catalogue's order or reversed.
func TestASampleAllocatesNothing(t *testing.T) {
	for name, mp := range map[string]metric.MeterProvider{"noop": noop.NewMeterProvider(), "sdk": newSDK(t).provider} {
		a, err := otelmetric.New(mp, otelmetric.Config{})
		require.NoError(t, err)
		for _, d := range telemetry.Catalogue() {
			var inOrder, reversed []telemetry.Label
			for _, n := range d.Labels() {
				l := telemetry.Label{Name: n, Value: "v"}
				inOrder = append(inOrder, l)
				reversed = append([]telemetry.Label{l}, reversed...)
			}
			for _, ls := range [][]telemetry.Label{inOrder, reversed} {
				sample := func() { a.Add(d, ls, 1) }
				if d.Type() == telemetry.Gauge {
					sample = func() { a.Gauge(d, ls, 1) }
				}
				sample()
				assert.Zero(t, testing.AllocsPerRun(100, sample), "%s: %s %v", name, d.Name(), ls)
			}
		}
		assert.Zero(t, a.Dropped())
	}
}

// Label sets of the benchmarks, made once: the Adapter's cost is what is
// measured, not the caller's slice.
var (
	refKind    = []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "ref"}}
	refTimer   = []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "ref"}, {Name: telemetry.LabelTimerKind, Value: "7"}}
	timerRef   = []telemetry.Label{{Name: telemetry.LabelTimerKind, Value: "7"}, {Name: telemetry.LabelPartitionKind, Value: "ref"}}
	benchShape = []struct {
		name   string
		sample func(m telemetry.Metrics)
	}{
		{"counter", func(m telemetry.Metrics) { m.Add(telemetry.MetricSchedulerTicks, nil, 1) }},
		{"counter_2_labels", func(m telemetry.Metrics) { m.Add(telemetry.MetricTimersFired, refTimer, 1) }},
		{"counter_2_labels_reordered", func(m telemetry.Metrics) { m.Add(telemetry.MetricTimersFired, timerRef, 1) }},
		{"gauge_1_label", func(m telemetry.Metrics) { m.Gauge(telemetry.MetricRelayBacklogRows, refKind, 3) }},
	}
)

// BenchmarkSample is one sample through the Adapter: on the SDK (with a
// manual reader, as an exporter's periodic reader would hold it), and on
// the API's no-op provider, which leaves the Adapter's own cost.
func BenchmarkSample(b *testing.B) {
	for _, provider := range []struct {
		name string
		mp   func(b *testing.B) metric.MeterProvider
	}{
		{"sdk", func(b *testing.B) metric.MeterProvider {
			p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			return p
		}},
		{"noop", func(*testing.B) metric.MeterProvider { return noop.NewMeterProvider() }},
	} {
		for _, s := range benchShape {
			b.Run(provider.name+"/"+s.name, func(b *testing.B) {
				a, err := otelmetric.New(provider.mp(b), otelmetric.Config{})
				require.NoError(b, err)
				s.sample(a)
				b.ReportAllocs()
				for b.Loop() {
					s.sample(a)
				}
				require.Zero(b, a.Dropped())
			})
		}
	}
}
