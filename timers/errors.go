package timers

import "errors"

// ErrDuplicateKind: a handler was registered for a kind that already has
// one. Invalid input and corrupt stored data are reported with the store's
// sentinels (store.ErrInvalid, store.ErrCorrupt).
var ErrDuplicateKind = errors.New("timers: kind already registered")

// ErrNoTimer: no timer has the (kind, reference) an operation names.
var ErrNoTimer = errors.New("timers: no such timer")
