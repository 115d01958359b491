package telemetry_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/telemetry"
)

var libraryMetrics = []string{
	telemetry.MetricRelayBacklogRows,
	telemetry.MetricRelayLagExceeded,
	telemetry.MetricOutboxBacklog,
	telemetry.MetricSyntheticOutcomesAcked,
	telemetry.MetricTimersFired,
	telemetry.MetricTimersRetried,
	telemetry.MetricTimersRaced,
	telemetry.MetricTimersFailed,
	telemetry.MetricTimersUnknownKind,
	telemetry.MetricTimersCorrupt,
	telemetry.MetricTimersDeadLettered,
}

func TestRecorderGaugeKeepsTheLastValuePerLabelSet(t *testing.T) {
	r := telemetry.NewRecorder()
	rows := []telemetry.Label{{Name: "shard_kind", Value: "ref"}, {Name: "unit", Value: "rows"}}
	bytes := []telemetry.Label{{Name: "shard_kind", Value: "ref"}, {Name: "unit", Value: "bytes"}}
	r.Gauge("g", rows, 3)
	r.Gauge("g", rows, 5)
	r.Gauge("g", bytes, 70)

	v, ok := r.GaugeValue("g", rows...)
	require.True(t, ok)
	assert.Equal(t, 5.0, v)
	v, ok = r.GaugeValue("g", bytes...)
	require.True(t, ok)
	assert.Equal(t, 70.0, v)
	_, ok = r.GaugeValue("g")
	assert.False(t, ok, "the label-less series was never set")
}

func TestRecorderLabelOrderNamesOneSeries(t *testing.T) {
	r := telemetry.NewRecorder()
	a := telemetry.Label{Name: "a", Value: "1"}
	b := telemetry.Label{Name: "b", Value: "2"}
	r.Add("c", []telemetry.Label{a, b}, 2)
	r.Add("c", []telemetry.Label{b, a}, 3)
	assert.Equal(t, uint64(5), r.Counter("c", a, b))
	assert.Equal(t, uint64(5), r.Counter("c", b, a))
}

func TestRecorderCounterSumAddsEveryLabelSet(t *testing.T) {
	r := telemetry.NewRecorder()
	r.Add("c", []telemetry.Label{{Name: "k", Value: "x"}}, 2)
	r.Add("c", []telemetry.Label{{Name: "k", Value: "y"}}, 3)
	r.Add("other", nil, 100)
	assert.Equal(t, uint64(2), r.Counter("c", telemetry.Label{Name: "k", Value: "x"}))
	assert.Equal(t, uint64(5), r.CounterSum("c"))
	assert.Equal(t, uint64(0), r.Counter("c"), "no label-less series was added to")
}

func TestRecorderDoesNotRetainTheLabelsSlice(t *testing.T) {
	var r telemetry.Recorder // the zero value is ready
	labels := []telemetry.Label{{Name: "k", Value: "x"}}
	r.Add("c", labels, 1)
	labels[0].Value = "y"
	assert.Equal(t, uint64(1), r.Counter("c", telemetry.Label{Name: "k", Value: "x"}))
	assert.Equal(t, uint64(0), r.Counter("c", telemetry.Label{Name: "k", Value: "y"}))
}

func TestRecorderIsSafeForConcurrentUse(t *testing.T) {
	r := telemetry.NewRecorder()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				r.Add("c", nil, 1)
				r.Gauge("g", []telemetry.Label{{Name: "w", Value: fmt.Sprint(g)}}, 1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, uint64(800), r.Counter("c"))
}

func TestNoopAndOrNoop(t *testing.T) {
	var m telemetry.Metrics = telemetry.Noop{}
	m.Gauge("g", nil, 1)
	m.Add("c", nil, 1)
	assert.Equal(t, telemetry.Noop{}, telemetry.OrNoop(nil))
	r := telemetry.NewRecorder()
	assert.Same(t, r, telemetry.OrNoop(r))
}

func TestEveryLibraryMetricHasHelpAndAPrometheusName(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range libraryMetrics {
		assert.NotEmpty(t, telemetry.Help(name), name)
		assert.True(t, strings.HasPrefix(name, "mkitfdb_"), name)
		assert.False(t, seen[name], "duplicate name %s", name)
		seen[name] = true
	}
	assert.Empty(t, telemetry.Help("not_a_library_metric"))
}

// A test records what a component emits and asserts on it.
func ExampleRecorder() {
	r := telemetry.NewRecorder()
	kind := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"}
	r.Add(telemetry.MetricTimersFired, []telemetry.Label{kind}, 1)
	r.Add(telemetry.MetricTimersFired, []telemetry.Label{kind}, 2)
	fmt.Println(r.Counter(telemetry.MetricTimersFired, kind))
	// Output: 3
}
