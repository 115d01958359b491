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

func TestRecorderGaugeKeepsTheLastValuePerLabelSet(t *testing.T) {
	r := telemetry.NewRecorder()
	g := telemetry.MetricOutboxBacklogRows
	ref := []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "ref"}}
	ns := []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "namespace"}}
	r.Gauge(g, ref, 3)
	r.Gauge(g, ref, 5)
	r.Gauge(g, ns, 70)

	v, ok := r.GaugeValue(g, ref...)
	require.True(t, ok)
	assert.Equal(t, 5.0, v)
	v, ok = r.GaugeValue(g, ns...)
	require.True(t, ok)
	assert.Equal(t, 70.0, v)
	_, ok = r.GaugeValue(g)
	assert.False(t, ok, "the label-less series was never set")
	assert.NoError(t, r.Err())
}

func TestRecorderLabelOrderNamesOneSeries(t *testing.T) {
	r := telemetry.NewRecorder()
	c := telemetry.MetricTimersFired
	a := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"}
	b := telemetry.Label{Name: telemetry.LabelTimerKind, Value: "2"}
	r.Add(c, []telemetry.Label{a, b}, 2)
	r.Add(c, []telemetry.Label{b, a}, 3)
	assert.Equal(t, uint64(5), r.Counter(c, a, b))
	assert.Equal(t, uint64(5), r.Counter(c, b, a))
	assert.NoError(t, r.Err())
}

func TestRecorderCounterSumAddsEveryLabelSet(t *testing.T) {
	r := telemetry.NewRecorder()
	c := telemetry.MetricSchedulerClaimed
	r.Add(c, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "x"}}, 2)
	r.Add(c, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "y"}}, 3)
	r.Add(telemetry.MetricSchedulerTicks, nil, 100)
	assert.Equal(t, uint64(2), r.Counter(c, telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "x"}))
	assert.Equal(t, uint64(5), r.CounterSum(c))
	assert.Equal(t, uint64(0), r.Counter(c), "no label-less series was added to")
}

func TestRecorderDoesNotRetainTheLabelsSlice(t *testing.T) {
	var r telemetry.Recorder // the zero value is ready
	c := telemetry.MetricSchedulerClaimed
	labels := []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: "x"}}
	r.Add(c, labels, 1)
	labels[0].Value = "y"
	assert.Equal(t, uint64(1), r.Counter(c, telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "x"}))
	assert.Equal(t, uint64(0), r.Counter(c, telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "y"}))
}

func TestRecorderIsSafeForConcurrentUse(t *testing.T) {
	r := telemetry.NewRecorder()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				r.Add(telemetry.MetricSchedulerTicks, nil, 1)
				r.Gauge(telemetry.MetricRelayBacklogRows, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: fmt.Sprint(g)}}, 1)
				r.Add(telemetry.MetricSchedulerTicks, []telemetry.Label{{Name: "w", Value: fmt.Sprint(g)}}, 0)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, uint64(800), r.Counter(telemetry.MetricSchedulerTicks))
	assert.ErrorIs(t, r.Err(), telemetry.ErrInvalidSample)
}

func TestNoopAndOrNoop(t *testing.T) {
	var m telemetry.Metrics = telemetry.Noop{}
	m.Gauge(telemetry.MetricRelayBacklogRows, nil, 1)
	m.Add(telemetry.MetricSchedulerTicks, nil, 1)
	assert.Equal(t, telemetry.Noop{}, telemetry.OrNoop(nil))
	r := telemetry.NewRecorder()
	assert.Same(t, r, telemetry.OrNoop(r))
}

// The Recorder keeps what Check rejects, once per distinct error, and
// records the sample all the same.
func TestRecorderErrNamesEverySampleTheCatalogueRejects(t *testing.T) {
	r := telemetry.NewRecorder()
	require.NoError(t, r.Err())
	pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"}
	r.Add(telemetry.MetricSchedulerClaimed, []telemetry.Label{pk}, 1)
	require.NoError(t, r.Err())

	r.Add(telemetry.MetricSchedulerTicks, []telemetry.Label{pk}, 1)
	r.Add(telemetry.MetricSchedulerTicks, []telemetry.Label{pk}, 1)
	r.Gauge(telemetry.MetricSchedulerClaimed, []telemetry.Label{pk}, 1)
	r.Add(new(telemetry.Desc), nil, 1)
	err := r.Err()
	require.ErrorIs(t, err, telemetry.ErrInvalidSample)
	msg := err.Error()
	assert.Equal(t, 3, strings.Count(msg, "telemetry: invalid sample"), msg)
	assert.Contains(t, msg, `mkitfdb_scheduler_ticks_total sampled with labels ["partition_kind"], its catalogue entry has []`)
	assert.Contains(t, msg, "mkitfdb_scheduler_partitions_claimed_total is a counter, sampled as a gauge")
	assert.Contains(t, msg, `metric "" is not in the catalogue`)
	assert.Equal(t, uint64(2), r.Counter(telemetry.MetricSchedulerTicks, pk), "recorded all the same")
}

// A test records what a component emits and asserts on it.
func ExampleRecorder() {
	r := telemetry.NewRecorder()
	kind := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"}
	r.Add(telemetry.MetricSchedulerClaimed, []telemetry.Label{kind}, 1)
	r.Add(telemetry.MetricSchedulerClaimed, []telemetry.Label{kind}, 2)
	fmt.Println(r.Counter(telemetry.MetricSchedulerClaimed, kind), r.Err())
	// Output: 3 <nil>
}
