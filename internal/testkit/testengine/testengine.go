// Package testengine lists the engines the handler packages' tests run
// on, so that outbox, timers and relay tests cover the same ones.
package testengine

import (
	"path/filepath"
	"testing"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
)

// Engine is one engine the tests run on: its name (a subtest's name) and
// a function that opens a fresh, empty one for test t. file names a bbolt
// engine's file in t's temporary directory, so that a test can open
// several.
type Engine struct {
	Name string
	Open func(t testing.TB, file string) fdblayer.Engine
}

var (
	// Memory is the memory engine.
	Memory = Engine{"memory", func(testing.TB, string) fdblayer.Engine { return fdblayer.NewMemoryEngine() }}
	// Bolt is the bbolt engine with NoSync.
	Bolt = Engine{"bbolt", func(t testing.TB, file string) fdblayer.Engine {
		t.Helper()
		e, err := fdblayer.OpenBoltEngine(filepath.Join(t.TempDir(), file), fdblayer.BoltOptions{NoSync: true})
		if err != nil {
			t.Fatalf("open bbolt engine: %v", err)
		}
		return e
	}}
	// MVCC is the engine with FoundationDB's transaction semantics
	// (snapshots, optimistic commits that conflict), on the wall clock,
	// without faults.
	MVCC = Engine{"mvcc", func(testing.TB, string) fdblayer.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCOptions{}) }}
	// All are the engines every handler test runs on.
	All = []Engine{Memory, Bolt, MVCC}
)
