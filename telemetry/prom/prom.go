// Package prom adapts telemetry.Metrics to Prometheus
// (github.com/prometheus/client_golang). It is optional: only programs that
// import it depend on the Prometheus client.
//
// The Adapter registers one GaugeVec or CounterVec per metric name, lazily,
// on the name's first sample, with the label names of that sample. Every
// later sample of the name must carry the same label names (in any order)
// and be of the same type. A sample that does not, or whose name, label
// names or label values Prometheus rejects, is dropped and logged (once per
// name and label set, at Error): a metrics mistake never panics and never
// fails the caller.
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
	families map[string]*family
	warned   map[string]struct{}
}

// family is one registered (or failed) metric name.
type family struct {
	counter bool
	names   []string // label names, in the order of the first sample
	gauge   *prometheus.GaugeVec
	count   *prometheus.CounterVec
	err     error // registration failed: every sample of the name is dropped
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithLogger sets the logger dropped samples are reported to (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) {
		if l != nil {
			a.logger = l
		}
	}
}

// New returns an Adapter registering its metrics with reg
// (prometheus.DefaultRegisterer when nil). Metrics already registered with
// reg under the same name and type, by another Adapter say, are reused.
func New(reg prometheus.Registerer, opts ...Option) *Adapter {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	a := &Adapter{
		reg:      reg,
		logger:   slog.Default(),
		families: make(map[string]*family),
		warned:   make(map[string]struct{}),
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Gauge sets the gauge name with labels to v.
func (a *Adapter) Gauge(name string, labels []telemetry.Label, v float64) {
	var buf [maxLabels]string
	f, values := a.resolve(name, labels, false, buf[:0])
	if f == nil {
		return
	}
	g, err := f.gauge.GetMetricWithLabelValues(values...)
	if err != nil {
		a.drop(name, labels, err)
		return
	}
	g.Set(v)
}

// Add adds delta to the counter name with labels.
func (a *Adapter) Add(name string, labels []telemetry.Label, delta uint64) {
	var buf [maxLabels]string
	f, values := a.resolve(name, labels, true, buf[:0])
	if f == nil {
		return
	}
	c, err := f.count.GetMetricWithLabelValues(values...)
	if err != nil {
		a.drop(name, labels, err)
		return
	}
	c.Add(float64(delta))
}

// resolve finds (or registers) the family of name and orders labels'
// values as its label names into buf; a nil family means the sample was
// dropped (and logged).
func (a *Adapter) resolve(name string, labels []telemetry.Label, counter bool, buf []string) (*family, []string) {
	f := a.family(name, labels, counter)
	if f == nil {
		return nil, nil
	}
	values, ok := f.values(buf, labels)
	if !ok {
		a.drop(name, labels, errLabelMismatch(f.names, labels))
		return nil, nil
	}
	return f, values
}

// Dropped reports how many samples the Adapter has dropped.
func (a *Adapter) Dropped() uint64 { return a.dropped.Load() }

// family returns the registered family of name, registering it on first
// use; nil (after logging) when the sample cannot be recorded.
func (a *Adapter) family(name string, labels []telemetry.Label, counter bool) *family {
	a.mu.RLock()
	f := a.families[name]
	a.mu.RUnlock()
	if f == nil {
		f = a.register(name, labels, counter)
	}
	switch {
	case f.err != nil:
		a.drop(name, labels, f.err)
		return nil
	case f.counter != counter:
		a.drop(name, labels, fmt.Errorf("%s is registered as a %s", name, typeName(f.counter)))
		return nil
	}
	return f
}

func (a *Adapter) register(name string, labels []telemetry.Label, counter bool) *family {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.families[name]; f != nil {
		return f
	}
	f := &family{counter: counter, names: make([]string, len(labels))}
	for i, l := range labels {
		f.names[i] = l.Name
	}
	help := telemetry.Help(name)
	if help == "" {
		help = "mkitfdb metric " + name + "."
	}
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
	a.families[name] = f
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
// dst; ok is false when the label names differ from the family's.
func (f *family) values(dst []string, labels []telemetry.Label) ([]string, bool) {
	if len(labels) != len(f.names) {
		return nil, false
	}
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
		return dst, true
	}
	for _, name := range f.names {
		found := -1
		for i, l := range labels {
			if l.Name == name {
				if found >= 0 {
					return nil, false // a label named twice
				}
				found = i
			}
		}
		if found < 0 {
			return nil, false
		}
		dst = append(dst, labels[found].Value)
	}
	return dst, true
}

// drop counts a sample it cannot record and logs the reason once per name
// and label set.
func (a *Adapter) drop(name string, labels []telemetry.Label, reason error) {
	a.dropped.Add(1)
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

func errLabelMismatch(want []string, labels []telemetry.Label) error {
	return fmt.Errorf("label names %v, registered with %v", labelNames(labels), want)
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
		return "counter"
	}
	return "gauge"
}

var _ telemetry.Metrics = (*Adapter)(nil)
