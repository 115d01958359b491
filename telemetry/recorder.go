package telemetry

import (
	"slices"
	"strings"
	"sync"
)

// Recorder is a Metrics that keeps every sample in memory, for tests: the
// last value of each gauge and the sum of each counter, per name and label
// set. Label order does not matter: {a, b} and {b, a} are one series.
// The zero value is ready to use; it is safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	gauges   map[string]float64
	counters map[string]uint64
	sums     map[string]uint64 // per name, over every label set
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// Gauge records v as the gauge's current value.
func (r *Recorder) Gauge(name string, labels []Label, v float64) {
	key := seriesKey(name, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gauges == nil {
		r.gauges = make(map[string]float64)
	}
	r.gauges[key] = v
}

// Add adds delta to the counter.
func (r *Recorder) Add(name string, labels []Label, delta uint64) {
	key := seriesKey(name, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counters == nil {
		r.counters = make(map[string]uint64)
		r.sums = make(map[string]uint64)
	}
	r.counters[key] += delta
	r.sums[name] += delta
}

// GaugeValue reports the gauge's last value; ok is false when it was never
// set.
func (r *Recorder) GaugeValue(name string, labels ...Label) (v float64, ok bool) {
	key := seriesKey(name, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok = r.gauges[key]
	return v, ok
}

// Counter reports the counter's total for exactly this label set (0 when
// never added to).
func (r *Recorder) Counter(name string, labels ...Label) uint64 {
	key := seriesKey(name, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counters[key]
}

// CounterSum reports the total of counter name over every label set.
func (r *Recorder) CounterSum(name string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sums[name]
}

// seriesKey names one series: the metric name and its labels sorted by
// name, separated by bytes that valid names and values never hold.
func seriesKey(name string, labels []Label) string {
	sorted := slices.Clone(labels)
	slices.SortFunc(sorted, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	var sb strings.Builder
	sb.WriteString(name)
	for _, l := range sorted {
		sb.WriteByte(0)
		sb.WriteString(l.Name)
		sb.WriteByte(1)
		sb.WriteString(l.Value)
	}
	return sb.String()
}
