package prom_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/telemetry/prom"
)

func newAdapter(t *testing.T) (*prom.Adapter, *prometheus.Registry, *bytes.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	return prom.New(reg, prom.Config{Logger: logger}), reg, &logs
}

func labels(kv ...string) []telemetry.Label {
	out := make([]telemetry.Label, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, telemetry.Label{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestGaugeIsRegisteredLazilyWithHelp(t *testing.T) {
	a, reg, _ := newAdapter(t)
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing registered before the first sample")

	a.Gauge(telemetry.MetricOutboxBacklogBytes, labels("partition_kind", "ref"), 3)
	a.Gauge(telemetry.MetricOutboxBacklogBytes, labels("partition_kind", "namespace"), 120)
	a.Gauge(telemetry.MetricOutboxBacklogBytes, labels("partition_kind", "ref"), 2)

	want := `
# HELP mkitfdb_outbox_backlog_bytes Bytes of the terminal records of a partition's undelivered outcomes.
# TYPE mkitfdb_outbox_backlog_bytes gauge
mkitfdb_outbox_backlog_bytes{partition_kind="namespace"} 120
mkitfdb_outbox_backlog_bytes{partition_kind="ref"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.MetricOutboxBacklogBytes.Name()))
	assert.Zero(t, a.Dropped())
}

func TestCounterAccumulatesAndAcceptsLabelsInAnyOrder(t *testing.T) {
	a, reg, _ := newAdapter(t)
	a.Add(telemetry.MetricTimersFired, labels("partition_kind", "ref", "timer_kind", "7"), 2)
	a.Add(telemetry.MetricTimersFired, labels("timer_kind", "7", "partition_kind", "ref"), 3)
	a.Add(telemetry.MetricTimersFired, labels("partition_kind", "ref", "timer_kind", "8"), 1)

	want := `
# HELP mkitfdb_timers_fired_total Timers whose handler ran and whose Done or Reschedule committed.
# TYPE mkitfdb_timers_fired_total counter
mkitfdb_timers_fired_total{partition_kind="ref",timer_kind="7"} 5
mkitfdb_timers_fired_total{partition_kind="ref",timer_kind="8"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.MetricTimersFired.Name()))
	assert.Zero(t, a.Dropped())
}

// Every metric of the catalogue is exported with its HELP, its TYPE and
// its label names.
func TestEveryCatalogueMetricIsExportedWithHelpAndType(t *testing.T) {
	a, reg, _ := newAdapter(t)
	for _, d := range telemetry.Catalogue() {
		var ls []telemetry.Label
		for _, n := range d.Labels() {
			ls = append(ls, telemetry.Label{Name: n, Value: "v"})
		}
		if d.Type() == telemetry.Counter {
			a.Add(d, ls, 1)
		} else {
			a.Gauge(d, ls, 1)
		}
	}
	require.Zero(t, a.Dropped())
	families, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	require.Len(t, byName, len(telemetry.Catalogue()))
	for _, d := range telemetry.Catalogue() {
		f := byName[d.Name()]
		require.NotNil(t, f, d.Name())
		assert.Equal(t, d.Help(), f.GetHelp(), d.Name())
		want := dto.MetricType_GAUGE
		if d.Type() == telemetry.Counter {
			want = dto.MetricType_COUNTER
		}
		assert.Equal(t, want, f.GetType(), d.Name())
		require.Len(t, f.GetMetric(), 1, d.Name())
		var names []string
		for _, lp := range f.GetMetric()[0].GetLabel() {
			names = append(names, lp.GetName())
		}
		assert.ElementsMatch(t, d.Labels(), names, d.Name())
	}
}

func TestMismatchedSamplesAreDroppedAndLoggedOnceNeverPanicking(t *testing.T) {
	cases := []struct {
		name   string
		sample func(a *prom.Adapter)
		logs   string
	}{
		{
			name:   "other label names",
			sample: func(a *prom.Adapter) { a.Add(telemetry.MetricSchedulerClaimed, labels("other", "x"), 1) },
			logs:   `its catalogue entry has [\"partition_kind\"]`,
		},
		{
			name: "an extra label",
			sample: func(a *prom.Adapter) {
				a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a", "more", "b"), 1)
			},
			logs: `its catalogue entry has [\"partition_kind\"]`,
		},
		{
			name: "a label named twice",
			sample: func(a *prom.Adapter) {
				a.Add(telemetry.MetricTimersFired, labels("partition_kind", "a", "partition_kind", "b"), 1)
			},
			logs: "its catalogue entry has",
		},
		{
			name:   "a gauge sample of a counter",
			sample: func(a *prom.Adapter) { a.Gauge(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a"), 1) },
			logs:   "is a counter, sampled as a gauge",
		},
		{
			name:   "a Desc not in the catalogue",
			sample: func(a *prom.Adapter) { a.Add(new(telemetry.Desc), nil, 1) },
			logs:   "not in the catalogue",
		},
		{
			name:   "a nil Desc",
			sample: func(a *prom.Adapter) { a.Add(nil, nil, 1) },
			logs:   "not in the catalogue",
		},
		{
			name:   "a label value that is not UTF-8",
			sample: func(a *prom.Adapter) { a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "\xff"), 1) },
			logs:   "metric sample dropped",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, reg, logs := newAdapter(t)
			a.Add(telemetry.MetricSchedulerClaimed, labels("partition_kind", "a"), 1)
			require.NotPanics(t, func() {
				tc.sample(a)
				tc.sample(a)
			})
			assert.Equal(t, uint64(2), a.Dropped())
			assert.Equal(t, 1, strings.Count(logs.String(), "metric sample dropped"), logs.String())
			assert.Contains(t, logs.String(), tc.logs)
			want := `
# HELP mkitfdb_scheduler_partitions_claimed_total Partitions the scheduler claimed and ran.
# TYPE mkitfdb_scheduler_partitions_claimed_total counter
mkitfdb_scheduler_partitions_claimed_total{partition_kind="a"} 1
`
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.MetricSchedulerClaimed.Name()))
		})
	}
}

// A registry holding another collector of the metric's name refuses the
// registration: the metric's samples are dropped and logged once.
func TestARefusedRegistrationDropsTheMetric(t *testing.T) {
	a, reg, logs := newAdapter(t)
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: telemetry.MetricSchedulerTicks.Name(), Help: "another"}))
	require.NotPanics(t, func() {
		a.Add(telemetry.MetricSchedulerTicks, nil, 1)
		a.Add(telemetry.MetricSchedulerTicks, nil, 1)
	})
	assert.Equal(t, uint64(2), a.Dropped())
	assert.Equal(t, 1, strings.Count(logs.String(), "metric sample dropped"), logs.String())
	assert.Contains(t, logs.String(), "register counter mkitfdb_scheduler_ticks_total")
}

func TestTwoAdaptersShareOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := prom.New(reg, prom.Config{}), prom.New(reg, prom.Config{})
	a.Add(telemetry.MetricSchedulerTicks, nil, 1)
	b.Add(telemetry.MetricSchedulerTicks, nil, 2)
	a.Gauge(telemetry.MetricRelayBacklogRows, labels("partition_kind", "ref"), 1)
	b.Gauge(telemetry.MetricRelayBacklogRows, labels("partition_kind", "ref"), 7)
	assert.Zero(t, a.Dropped()+b.Dropped())
	want := `
# HELP mkitfdb_relay_backlog_rows Upper bound on the relay rows queued in a source partition.
# TYPE mkitfdb_relay_backlog_rows gauge
mkitfdb_relay_backlog_rows{partition_kind="ref"} 7
# HELP mkitfdb_scheduler_ticks_total Scheduler ticks.
# TYPE mkitfdb_scheduler_ticks_total counter
mkitfdb_scheduler_ticks_total 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		telemetry.MetricSchedulerTicks.Name(), telemetry.MetricRelayBacklogRows.Name()))
}

func TestAdapterIsSafeForConcurrentUse(t *testing.T) {
	a, reg, _ := newAdapter(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				a.Add(telemetry.MetricSchedulerTicks, nil, 1)
				a.Gauge(telemetry.MetricRelayBacklogRows, labels("partition_kind", "ref"), 1)
			}
		}()
	}
	wg.Wait()
	want := `
# HELP mkitfdb_scheduler_ticks_total Scheduler ticks.
# TYPE mkitfdb_scheduler_ticks_total counter
mkitfdb_scheduler_ticks_total 1600
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.MetricSchedulerTicks.Name()))
}

// Label sets of the benchmark, made once: the Adapter's cost is what is
// measured, not the caller's slice.
var (
	refKind  = []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "ref"}}
	refTimer = []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "ref"}, {Name: telemetry.LabelTimerKind, Value: "7"}}
	timerRef = []telemetry.Label{{Name: telemetry.LabelTimerKind, Value: "7"}, {Name: telemetry.LabelPartitionKind, Value: "ref"}}
)

// BenchmarkSample is one sample through the Adapter, of each shape the
// library emits (the shapes of telemetry/otelmetric's BenchmarkSample).
func BenchmarkSample(b *testing.B) {
	for _, s := range []struct {
		name   string
		sample func(m telemetry.Metrics)
	}{
		{"counter", func(m telemetry.Metrics) { m.Add(telemetry.MetricSchedulerTicks, nil, 1) }},
		{"counter_2_labels", func(m telemetry.Metrics) { m.Add(telemetry.MetricTimersFired, refTimer, 1) }},
		{"counter_2_labels_reordered", func(m telemetry.Metrics) { m.Add(telemetry.MetricTimersFired, timerRef, 1) }},
		{"gauge_1_label", func(m telemetry.Metrics) { m.Gauge(telemetry.MetricRelayBacklogRows, refKind, 3) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			a := prom.New(prometheus.NewRegistry(), prom.Config{})
			s.sample(a)
			b.ReportAllocs()
			for b.Loop() {
				s.sample(a)
			}
			require.Zero(b, a.Dropped())
		})
	}
}
