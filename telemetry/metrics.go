// Package telemetry is the library's small metrics interface: gauges and
// counters with labels, a no-op default, and an in-memory [Recorder] for
// tests. Package telemetry/prom adapts it to Prometheus, and package
// telemetry/otelmetric to the OpenTelemetry metrics API.
//
// Every metric the library emits is a [Desc] of this package's catalogue
// (catalogue.go, listed by [Catalogue]): its name, help text, type, unit
// and label names, so that a dashboard can be written against that file alone.
// Components emit by Desc, and no other package can make one, so a metric
// cannot be emitted without its entry. A sample whose label names are not
// exactly its Desc's (see [Check]) is dropped by adapters, which say so in
// their logs.
package telemetry

// Label is one label of a sample: a name and its value. Values never hold
// identity data (a partition's name, a reservation id): only kinds, so
// that series stay few.
type Label struct {
	Name  string
	Value string
}

// Metrics receives the library's samples. Implementations are safe for
// concurrent use, never block on I/O in these calls, and never panic: a
// sample they cannot record is dropped (and logged, where they can log).
// The labels slice is not retained past the call.
type Metrics interface {
	// Gauge sets the gauge d with labels to v.
	Gauge(d *Desc, labels []Label, v float64)
	// Add adds delta to the counter d with labels.
	Add(d *Desc, labels []Label, delta uint64)
}

// Noop is a Metrics that records nothing: the default wherever a Metrics is
// optional.
type Noop struct{}

// Gauge does nothing.
func (Noop) Gauge(*Desc, []Label, float64) {}

// Add does nothing.
func (Noop) Add(*Desc, []Label, uint64) {}

// OrNoop returns m, or [Noop] when m is nil.
func OrNoop(m Metrics) Metrics {
	if m == nil {
		return Noop{}
	}
	return m
}
