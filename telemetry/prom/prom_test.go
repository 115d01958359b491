package prom_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	return prom.New(reg, prom.WithLogger(logger)), reg, &logs
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

	a.Gauge(telemetry.MetricOutboxBacklog, labels("shard_kind", "ref", "unit", "rows"), 3)
	a.Gauge(telemetry.MetricOutboxBacklog, labels("shard_kind", "ref", "unit", "bytes"), 120)
	a.Gauge(telemetry.MetricOutboxBacklog, labels("shard_kind", "ref", "unit", "rows"), 2)

	want := `
# HELP mkitfdb_outbox_backlog Undelivered terminal outcomes of a partition, in rows or bytes.
# TYPE mkitfdb_outbox_backlog gauge
mkitfdb_outbox_backlog{shard_kind="ref",unit="bytes"} 120
mkitfdb_outbox_backlog{shard_kind="ref",unit="rows"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.MetricOutboxBacklog))
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
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), telemetry.MetricTimersFired))
	assert.Zero(t, a.Dropped())
}

func TestUnknownNameGetsAGenericHelp(t *testing.T) {
	a, reg, _ := newAdapter(t)
	a.Add("app_requests_total", nil, 4)
	want := `
# HELP app_requests_total mkitfdb metric app_requests_total.
# TYPE app_requests_total counter
app_requests_total 4
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "app_requests_total"))
}

func TestMismatchedSamplesAreDroppedAndLoggedOnceNeverPanicking(t *testing.T) {
	cases := []struct {
		name   string
		sample func(a *prom.Adapter)
		logs   string
	}{
		{
			name:   "other label names",
			sample: func(a *prom.Adapter) { a.Add("c_total", labels("other", "x"), 1) },
			logs:   "registered with [kind]",
		},
		{
			name:   "an extra label",
			sample: func(a *prom.Adapter) { a.Add("c_total", labels("kind", "a", "more", "b"), 1) },
			logs:   "registered with [kind]",
		},
		{
			name:   "a gauge under a counter's name",
			sample: func(a *prom.Adapter) { a.Gauge("c_total", labels("kind", "a"), 1) },
			logs:   "registered as a counter",
		},
		{
			name:   "a label value that is not UTF-8",
			sample: func(a *prom.Adapter) { a.Add("c_total", labels("kind", "\xff"), 1) },
			logs:   "metric sample dropped",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, reg, logs := newAdapter(t)
			a.Add("c_total", labels("kind", "a"), 1)
			require.NotPanics(t, func() {
				tc.sample(a)
				tc.sample(a)
			})
			assert.Equal(t, uint64(2), a.Dropped())
			assert.Equal(t, 1, strings.Count(logs.String(), "metric sample dropped"), logs.String())
			assert.Contains(t, logs.String(), tc.logs)
			want := `
# HELP c_total mkitfdb metric c_total.
# TYPE c_total counter
c_total{kind="a"} 1
`
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "c_total"))
		})
	}
}

func TestALabelNamedTwiceIsDropped(t *testing.T) {
	a, _, logs := newAdapter(t)
	a.Add("c_total", labels("kind", "a", "zone", "z"), 1)
	require.NotPanics(t, func() { a.Add("c_total", labels("zone", "z", "zone", "y"), 1) })
	assert.Equal(t, uint64(1), a.Dropped())
	assert.Contains(t, logs.String(), "registered with [kind zone]")
}

func TestInvalidNamesAreDroppedNotPanicking(t *testing.T) {
	a, reg, logs := newAdapter(t)
	require.NotPanics(t, func() {
		// Prometheus accepts any UTF-8 name; it rejects empty and
		// non-UTF-8 names.
		a.Gauge("", nil, 1)
		a.Gauge("", nil, 2)
		a.Add("ok_total", labels("bad\xff", "x"), 1)
	})
	assert.Equal(t, uint64(3), a.Dropped())
	assert.Equal(t, 2, strings.Count(logs.String(), "metric sample dropped"), logs.String())
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestTwoAdaptersShareOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := prom.New(reg), prom.New(reg)
	a.Add("shared_total", labels("k", "v"), 1)
	b.Add("shared_total", labels("k", "v"), 2)
	a.Gauge("shared_gauge", nil, 1)
	b.Gauge("shared_gauge", nil, 7)
	assert.Zero(t, a.Dropped()+b.Dropped())
	want := `
# HELP shared_gauge mkitfdb metric shared_gauge.
# TYPE shared_gauge gauge
shared_gauge 7
# HELP shared_total mkitfdb metric shared_total.
# TYPE shared_total counter
shared_total{k="v"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "shared_total", "shared_gauge"))
}

func TestAdapterIsSafeForConcurrentUse(t *testing.T) {
	a, reg, _ := newAdapter(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				a.Add("conc_total", labels("k", "v"), 1)
				a.Gauge("conc_gauge", labels("k", "v"), 1)
			}
		}()
	}
	wg.Wait()
	want := `
# HELP conc_total mkitfdb metric conc_total.
# TYPE conc_total counter
conc_total{k="v"} 1600
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "conc_total"))
}
