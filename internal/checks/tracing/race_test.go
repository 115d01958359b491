//go:build race

package tracing_test

// raceEnabled: the race detector's instrumentation allocates, and
// allocation counts mean nothing under it.
const raceEnabled = true
