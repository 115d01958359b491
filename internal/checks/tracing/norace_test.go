//go:build !race

package tracing_test

// raceEnabled: see race_test.go.
const raceEnabled = false
