// Package prom adapts telemetry.Metrics to Prometheus
// (github.com/prometheus/client_golang). It is optional: only programs that
// import it depend on the Prometheus client.
//
// The Adapter registers one GaugeVec or CounterVec per metric of the
// catalogue, lazily, on its first sample, with the [telemetry.Desc]'s name,
// help text (exported as HELP, beside its TYPE) and label names. A sample
// that [telemetry.Check] rejects, or whose label values Prometheus rejects,
// is dropped and logged (once per metric and label set, at Error): a
// metrics mistake never panics and never fails the caller.
package prom

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mkit-dev/mkitfdb/telemetry"
)

// maxLabels bounds the labels of one sample that are reordered without
// allocating; longer label sets still work.
const maxLabels = 8

// Adapter is a telemetry.Metrics that records into a Prometheus registry.
// It is safe for concurrent use.
type Adapter struct {
	reg     prometheus.Registerer
	logger  *slog.Logger
	dropped atomic.Uint64

	mu       sync.RWMutex
	families map[*telemetry.Desc]*family
	warned   map[string]struct{}
}

// family is one registered (or failed) metric.
type family struct {
	names []string // label names, in the catalogue's order
	gauge *prometheus.GaugeVec
	count *prometheus.CounterVec
	err   error // registration failed: every sample of the metric is dropped
}

// Config configures an Adapter. A zero field takes its default.
type Config struct {
	// Logger is where dropped samples are reported (default
	// slog.Default()).
	Logger *slog.Logger
}

// New returns an Adapter, configured by c, registering its metrics with
// reg (prometheus.DefaultRegisterer when nil). Metrics already registered
// with reg under the same name and type, by another Adapter say, are
// reused.
func New(reg prometheus.Registerer, c Config) *Adapter {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	a := &Adapter{
		reg:      reg,
		logger:   c.Logger,
		families: make(map[*telemetry.Desc]*family),
		warned:   make(map[string]struct{}),
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	return a
}

// Gauge sets the gauge d with labels to v.
func (a *Adapter) Gauge(d *telemetry.Desc, labels []telemetry.Label, v float64) {
	var buf [maxLabels]string
	f, values := a.resolve(d, telemetry.Gauge, labels, buf[:0])
	if f == nil {
		return
	}
	g, err := f.gauge.GetMetricWithLabelValues(values...)
	if err != nil {
		a.drop(d, labels, err)
		return
	}
	g.Set(v)
}

// Add adds delta to the counter d with labels.
func (a *Adapter) Add(d *telemetry.Desc, labels []telemetry.Label, delta uint64) {
	var buf [maxLabels]string
	f, values := a.resolve(d, telemetry.Counter, labels, buf[:0])
	if f == nil {
		return
	}
	c, err := f.count.GetMetricWithLabelValues(values...)
	if err != nil {
		a.drop(d, labels, err)
		return
	}
	c.Add(float64(delta))
}

// resolve checks a sample of d, finds (or registers) its family and orders
// labels' values as its label names into buf; a nil family means the
// sample was dropped (and logged).
func (a *Adapter) resolve(d *telemetry.Desc, t telemetry.Type, labels []telemetry.Label, buf []string) (*family, []string) {
	if err := telemetry.Check(d, t, labels); err != nil {
		a.drop(d, labels, err)
		return nil, nil
	}
	a.mu.RLock()
	f := a.families[d]
	a.mu.RUnlock()
	if f == nil {
		f = a.register(d)
	}
	if f.err != nil {
		a.drop(d, labels, f.err)
		return nil, nil
	}
	return f, f.values(buf, labels)
}

// Dropped reports how many samples the Adapter has dropped.
func (a *Adapter) Dropped() uint64 { return a.dropped.Load() }

// register registers the family of d (a metric of the catalogue).
func (a *Adapter) register(d *telemetry.Desc) *family {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.families[d]; f != nil {
		return f
	}
	f := &family{names: d.Labels()}
	name, help, counter := d.Name(), d.Help(), d.Type() == telemetry.Counter
	if counter {
		f.count = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, f.names)
		f.err = a.registerVec(f.count, func(existing prometheus.Collector) bool {
			v, ok := existing.(*prometheus.CounterVec)
			if ok {
				f.count = v
			}
			return ok
		})
	} else {
		f.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, f.names)
		f.err = a.registerVec(f.gauge, func(existing prometheus.Collector) bool {
			v, ok := existing.(*prometheus.GaugeVec)
			if ok {
				f.gauge = v
			}
			return ok
		})
	}
	if f.err != nil {
		f.err = fmt.Errorf("register %s %s: %w", typeName(counter), name, f.err)
	}
	a.families[d] = f
	return f
}

// registerVec registers c, adopting an identical collector already
// registered (reuse reports whether it could).
func (a *Adapter) registerVec(c prometheus.Collector, reuse func(prometheus.Collector) bool) error {
	err := a.reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) && reuse(already.ExistingCollector) {
		return nil
	}
	return err
}

// values puts the label values of labels in the family's label order into
// dst. The label names are the family's (telemetry.Check said so).
func (f *family) values(dst []string, labels []telemetry.Label) []string {
	inOrder := true
	for i, l := range labels {
		if l.Name != f.names[i] {
			inOrder = false
			break
		}
	}
	if inOrder {
		for _, l := range labels {
			dst = append(dst, l.Value)
		}
		return dst
	}
	for _, name := range f.names {
		for _, l := range labels {
			if l.Name == name {
				dst = append(dst, l.Value)
				break
			}
		}
	}
	return dst
}

// drop counts a sample it cannot record and logs the reason once per
// metric and label set.
func (a *Adapter) drop(d *telemetry.Desc, labels []telemetry.Label, reason error) {
	a.dropped.Add(1)
	name := "<nil>"
	if d != nil {
		name = d.Name()
	}
	key := name + "\x00" + strings.Join(labelNames(labels), "\x00")
	a.mu.Lock()
	_, seen := a.warned[key]
	if !seen {
		a.warned[key] = struct{}{}
	}
	a.mu.Unlock()
	if !seen {
		a.logger.Error("prom: metric sample dropped", "metric", name, "labels", labelNames(labels), "error", reason)
	}
}

func labelNames(labels []telemetry.Label) []string {
	names := make([]string, len(labels))
	for i, l := range labels {
		names[i] = l.Name
	}
	slices.Sort(names)
	return names
}

func typeName(counter bool) string {
	if counter {
		return telemetry.Counter.String()
	}
	return telemetry.Gauge.String()
}

var _ telemetry.Metrics = (*Adapter)(nil)
