package telemetry

import (
	"errors"
	"slices"
	"strings"
	"sync"
)

// Recorder is a Metrics that keeps every sample in memory, for tests: the
// last value of each gauge and the sum of each counter, per metric and
// label set. Label order does not matter: {a, b} and {b, a} are one series.
// It also checks every sample against the catalogue ([Check]) and keeps
// what it rejects for [Recorder.Err], so that a test using it fails on a
// metric or label set the catalogue does not list.
// The zero value is ready to use; it is safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	gauges   map[string]float64
	counters map[string]uint64
	sums     map[*Desc]uint64 // per metric, over every label set
	invalid  []error
	seen     map[string]struct{} // invalid messages already kept
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// Gauge records v as the gauge's current value.
func (r *Recorder) Gauge(d *Desc, labels []Label, v float64) {
	key := seriesKey(d, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check(d, Gauge, labels)
	if r.gauges == nil {
		r.gauges = make(map[string]float64)
	}
	r.gauges[key] = v
}

// Add adds delta to the counter.
func (r *Recorder) Add(d *Desc, labels []Label, delta uint64) {
	key := seriesKey(d, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check(d, Counter, labels)
	if r.counters == nil {
		r.counters = make(map[string]uint64)
		r.sums = make(map[*Desc]uint64)
	}
	r.counters[key] += delta
	r.sums[d] += delta
}

// check keeps Check's error for a sample, once per distinct error.
func (r *Recorder) check(d *Desc, t Type, labels []Label) {
	err := Check(d, t, labels)
	if err == nil {
		return
	}
	if _, dup := r.seen[err.Error()]; dup {
		return
	}
	if r.seen == nil {
		r.seen = make(map[string]struct{})
	}
	r.seen[err.Error()] = struct{}{}
	r.invalid = append(r.invalid, err)
}

// Err returns nil when every sample recorded so far agreed with the
// catalogue, and otherwise each distinct [Check] error, joined. The
// samples were recorded all the same.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.invalid...)
}

// GaugeValue reports the gauge's last value; ok is false when it was never
// set.
func (r *Recorder) GaugeValue(d *Desc, labels ...Label) (v float64, ok bool) {
	key := seriesKey(d, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok = r.gauges[key]
	return v, ok
}

// Counter reports the counter's total for exactly this label set (0 when
// never added to).
func (r *Recorder) Counter(d *Desc, labels ...Label) uint64 {
	key := seriesKey(d, labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counters[key]
}

// CounterSum reports the total of counter d over every label set.
func (r *Recorder) CounterSum(d *Desc) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sums[d]
}

// seriesKey names one series: the metric name and its labels sorted by
// name, separated by bytes that valid names and values never hold. Labels
// already in order (as the library emits them) are not copied.
func seriesKey(d *Desc, labels []Label) string {
	name := "<nil>"
	if d != nil {
		name = d.name
	}
	byName := func(a, b Label) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(labels, byName) {
		labels = slices.Clone(labels)
		slices.SortFunc(labels, byName)
	}
	n := len(name)
	for _, l := range labels {
		n += 2 + len(l.Name) + len(l.Value)
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteString(name)
	for _, l := range labels {
		sb.WriteByte(0)
		sb.WriteString(l.Name)
		sb.WriteByte(1)
		sb.WriteString(l.Value)
	}
	return sb.String()
}
