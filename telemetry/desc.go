package telemetry

import (
	"fmt"
	"slices"
)

// Type is a metric's type: how its samples combine.
type Type uint8

const (
	// Counter metrics add each sample to a total ([Metrics.Add]); their
	// names end in _total, as Prometheus expects.
	Counter Type = iota + 1
	// Gauge metrics take each sample as their value ([Metrics.Gauge]).
	Gauge
)

// String returns "counter" or "gauge".
func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Desc describes one metric of the catalogue. Its fields are fixed: a Desc
// is one of this package's Metric variables, and no other package can
// make one (a zero Desc is not in the catalogue, and [Check] rejects it).
// A Desc is safe for concurrent use.
type Desc struct {
	name   string
	help   string
	typ    Type
	unit   string
	labels []string
	index  int // position in catalogue, set by init
}

// Name returns the metric's name, as exported (mkitfdb_...).
func (d *Desc) Name() string { return d.name }

// Help returns the metric's one-line description.
func (d *Desc) Help() string { return d.help }

// Type returns the metric's type.
func (d *Desc) Type() Type { return d.typ }

// Unit returns the metric's unit, in the UCUM spelling of OpenTelemetry's
// semantic conventions: "By" for bytes, "s" for seconds, and a count of
// things the thing's name in braces ("{row}", "{timer}").
func (d *Desc) Unit() string { return d.unit }

// Labels returns the label names every sample of the metric carries, in
// the catalogue's order (samples may list them in any order). The caller
// may modify the returned slice.
func (d *Desc) Labels() []string { return slices.Clone(d.labels) }

// String returns the metric's name.
func (d *Desc) String() string { return d.name }

// Catalogue returns every metric the library emits, in the order of
// catalogue.go. The caller may modify the returned slice.
func Catalogue() []*Desc { return slices.Clone(catalogue) }

func init() {
	for i, d := range catalogue {
		d.index = i
	}
}

// Check reports whether a sample of d of type t with labels agrees with
// the catalogue: d is in it, is of type t, and labels name exactly d's
// label names, each once, in any order. Its errors wrap
// [ErrInvalidSample]. Adapters drop a sample Check rejects.
func Check(d *Desc, t Type, labels []Label) error {
	if d == nil || d.index >= len(catalogue) || catalogue[d.index] != d {
		name := "<nil>"
		if d != nil {
			name = fmt.Sprintf("%q", d.name)
		}
		return fmt.Errorf("%w: metric %s is not in the catalogue", ErrInvalidSample, name)
	}
	if d.typ != t {
		return fmt.Errorf("%w: %s is a %s, sampled as a %s", ErrInvalidSample, d.name, d.typ, t)
	}
	if !sameNames(d.labels, labels) {
		names := make([]string, len(labels))
		for i, l := range labels {
			names[i] = l.Name
		}
		return fmt.Errorf("%w: %s sampled with labels %q, its catalogue entry has %q", ErrInvalidSample, d.name, names, d.labels)
	}
	return nil
}

// sameNames reports whether labels name exactly names, each once.
func sameNames(names []string, labels []Label) bool {
	if len(names) != len(labels) {
		return false
	}
	for i, l := range labels {
		if !slices.Contains(names, l.Name) {
			return false
		}
		for _, earlier := range labels[:i] {
			if earlier.Name == l.Name {
				return false
			}
		}
	}
	return true
}
