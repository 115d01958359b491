package kv

import "errors"

// ErrClosed is returned, wrapped or not, by an engine's Begin, BeginRead,
// EstimateRangeSize and Probe once the engine is closed: no transaction
// can begin. The Layer reports it wrapped together with
// store.ErrUnavailable.
var ErrClosed = errors.New("kv: engine closed")
