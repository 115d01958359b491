package telemetry

import "errors"

// ErrInvalidSample is wrapped by [Check]'s errors: a sample of a metric not
// in the catalogue, of the wrong kind, or with other label names than its
// [Desc]'s.
var ErrInvalidSample = errors.New("telemetry: invalid sample")
