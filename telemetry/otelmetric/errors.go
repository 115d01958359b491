package otelmetric

import "errors"

// ErrInstrument is wrapped by [New]'s errors: the meter refused one of the
// catalogue's instruments (a view of the SDK that does not fit it, say).
// The error names the metric and wraps the meter's error too.
var ErrInstrument = errors.New("otelmetric: instrument refused")
