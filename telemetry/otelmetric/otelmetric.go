// Package otelmetric adapts telemetry.Metrics to the OpenTelemetry metrics
// API (go.opentelemetry.io/otel/metric). It is optional, and it depends on
// the API only: the program that imports it chooses the SDK and exporters.
//
// [New] makes one instrument per metric of the catalogue, with the
// [telemetry.Desc]'s name (the name telemetry/prom exports), help text as
// description, and unit. A counter is an Int64Counter, exported as a
// monotonic sum; a gauge is a Float64Gauge, the synchronous gauge, whose
// series holds each sample until the next, as [telemetry.Metrics.Gauge]
// sets it. A sample's labels are its attributes, under the same names.
//
// A sample that [telemetry.Check] rejects, whose label values are not
// UTF-8 (exporters refuse a whole batch over one such string), or whose
// counter delta exceeds an int64, is dropped and logged (once per metric
// and label set, at Error): a metrics mistake never panics and never fails
// the caller.
//
// Each series' attribute set is made on its first sample and kept (up to
// [MaxCachedSeries] a metric), so a sample allocates nothing in the
// Adapter: what it costs beyond a map lookup is the SDK's.
package otelmetric

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mkit-dev/mkitfdb/telemetry"
)

// ScopeName is the instrumentation scope of the Adapter's meter: this
// package's import path, as OpenTelemetry asks of instrumentation. A view
// of the SDK selects the library's instruments by it.
const ScopeName = "github.com/mkit-dev/mkitfdb/telemetry/otelmetric"

// MaxCachedSeries bounds the series of one metric whose attribute sets the
// Adapter keeps: the SDK's default cardinality limit, past which the SDK
// folds new series into one overflow series anyway. A sample of a further
// series is still recorded, its attribute set made for it.
const MaxCachedSeries = 2000

// maxLabels bounds the labels of a metric whose series are cached; a
// metric with more still works, its attribute set made at each sample.
const maxLabels = 4

// Adapter is a telemetry.Metrics that records through an OpenTelemetry
// meter. It is safe for concurrent use. Make one with [New]: the zero
// Adapter has no instruments, and drops (and logs) every sample.
type Adapter struct {
	logger      *slog.Logger
	dropped     atomic.Uint64
	instruments map[*telemetry.Desc]*instrument // one per catalogue entry, fixed by New

	mu     sync.Mutex
	warned map[string]struct{}
}

// instrument is the instrument of one metric of the catalogue, and the
// attribute sets of its series.
type instrument struct {
	names   []string // label names, in the catalogue's order
	counter metric.Int64Counter
	gauge   metric.Float64Gauge

	mu     sync.RWMutex
	series map[seriesKey]*series
}

// seriesKey is a series' label values, in the catalogue's order.
type seriesKey [maxLabels]string

// series holds the options that carry a series' attribute set, ready to
// pass: a counter's or a gauge's.
type series struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// Config configures an Adapter. A zero field takes its default.
type Config struct {
	// Logger is where dropped samples are reported (default
	// slog.Default()).
	Logger *slog.Logger
}

// New returns an Adapter, configured by c, recording through the meter
// named [ScopeName] of mp (otel.GetMeterProvider() when nil: the global
// provider, which records nothing until a program sets one, and then
// records into it). It makes every instrument of the catalogue at once; a
// sync instrument exports nothing before its first sample. On the SDK,
// Adapters of one provider share its instruments, so their samples add up.
//
// New fails, with an error wrapping [ErrInstrument] that names each
// metric, when the meter refuses any of the instruments.
func New(mp metric.MeterProvider, c Config) (*Adapter, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	if meter == nil {
		return nil, fmt.Errorf("%w: the meter provider returned no meter", ErrInstrument)
	}
	a := &Adapter{
		logger:      c.Logger,
		instruments: make(map[*telemetry.Desc]*instrument),
		warned:      make(map[string]struct{}),
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	var errs []error
	for _, d := range telemetry.Catalogue() {
		in, err := newInstrument(meter, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s %s: %w", ErrInstrument, d.Type(), d.Name(), err))
			continue
		}
		a.instruments[d] = in
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return a, nil
}

// newInstrument makes the instrument of d.
func newInstrument(meter metric.Meter, d *telemetry.Desc) (*instrument, error) {
	in := &instrument{names: d.Labels(), series: make(map[seriesKey]*series)}
	var err error
	switch d.Type() {
	case telemetry.Counter:
		in.counter, err = meter.Int64Counter(d.Name(), metric.WithDescription(d.Help()), metric.WithUnit(d.Unit()))
		if err == nil && in.counter == nil {
			err = errors.New("the meter returned no instrument")
		}
	case telemetry.Gauge:
		in.gauge, err = meter.Float64Gauge(d.Name(), metric.WithDescription(d.Help()), metric.WithUnit(d.Unit()))
		if err == nil && in.gauge == nil {
			err = errors.New("the meter returned no instrument")
		}
	default:
		err = fmt.Errorf("no instrument for a metric of type %s", d.Type())
	}
	return in, err
}

// Gauge sets the gauge d with labels to v.
func (a *Adapter) Gauge(d *telemetry.Desc, labels []telemetry.Label, v float64) {
	in, s := a.resolve(d, telemetry.Gauge, labels)
	if s == nil {
		return
	}
	in.gauge.Record(context.Background(), v, s.record...)
}

// Add adds delta to the counter d with labels. A delta over
// math.MaxInt64, which an Int64Counter cannot take, is dropped.
func (a *Adapter) Add(d *telemetry.Desc, labels []telemetry.Label, delta uint64) {
	in, s := a.resolve(d, telemetry.Counter, labels)
	if s == nil {
		return
	}
	if delta > math.MaxInt64 {
		a.drop(d, labels, fmt.Errorf("delta %d exceeds the largest an Int64Counter takes", delta))
		return
	}
	in.counter.Add(context.Background(), int64(delta), s.add...)
}

// Dropped reports how many samples the Adapter has dropped.
func (a *Adapter) Dropped() uint64 { return a.dropped.Load() }

// resolve checks a sample of d and finds its instrument and series; a nil
// series means the sample was dropped (and logged).
func (a *Adapter) resolve(d *telemetry.Desc, t telemetry.Type, labels []telemetry.Label) (*instrument, *series) {
	if err := telemetry.Check(d, t, labels); err != nil {
		a.drop(d, labels, err)
		return nil, nil
	}
	in := a.instruments[d]
	if in == nil { // New made every entry's; a catalogue grown since cannot be
		a.drop(d, labels, errors.New("the adapter has no instrument for it"))
		return nil, nil
	}
	s, err := in.lookup(labels)
	if err != nil {
		a.drop(d, labels, err)
		return nil, nil
	}
	return in, s
}

// lookup returns the series of labels (whose names telemetry.Check found
// to be the instrument's), making it on its first sample.
func (in *instrument) lookup(labels []telemetry.Label) (*series, error) {
	if len(in.names) > maxLabels {
		return in.newSeries(labels)
	}
	k := in.key(labels)
	in.mu.RLock()
	s := in.series[k]
	in.mu.RUnlock()
	if s != nil {
		return s, nil
	}
	s, err := in.newSeries(labels)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if kept := in.series[k]; kept != nil {
		return kept, nil
	}
	if len(in.series) < MaxCachedSeries {
		in.series[k] = s
	}
	return s, nil
}

// key returns the series key of labels: their values in the instrument's
// label order.
func (in *instrument) key(labels []telemetry.Label) seriesKey {
	var k seriesKey
	for i, name := range in.names {
		if labels[i].Name == name { // in order, as the library emits them
			k[i] = labels[i].Value
			continue
		}
		for _, l := range labels {
			if l.Name == name {
				k[i] = l.Value
				break
			}
		}
	}
	return k
}

// newSeries makes the options carrying the attribute set of labels.
func (in *instrument) newSeries(labels []telemetry.Label) (*series, error) {
	kvs := make([]attribute.KeyValue, len(labels))
	for i, l := range labels {
		if !utf8.ValidString(l.Value) {
			return nil, fmt.Errorf("label %s: value %q is not UTF-8", l.Name, l.Value)
		}
		kvs[i] = attribute.String(l.Name, l.Value)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	if in.counter != nil {
		return &series{add: []metric.AddOption{opt}}, nil
	}
	return &series{record: []metric.RecordOption{opt}}, nil
}

// drop counts a sample it cannot record and logs the reason once per
// metric and label set.
func (a *Adapter) drop(d *telemetry.Desc, labels []telemetry.Label, reason error) {
	a.dropped.Add(1)
	name := "<nil>"
	if d != nil {
		name = d.Name()
	}
	names := labelNames(labels)
	key := name + "\x00" + strings.Join(names, "\x00")
	a.mu.Lock()
	_, seen := a.warned[key]
	if !seen {
		if a.warned == nil {
			a.warned = make(map[string]struct{})
		}
		a.warned[key] = struct{}{}
	}
	a.mu.Unlock()
	if !seen {
		logger := a.logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Error("otelmetric: metric sample dropped", "metric", name, "labels", names, "error", reason)
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

var _ telemetry.Metrics = (*Adapter)(nil)
