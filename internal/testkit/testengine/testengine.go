// Package testengine lists the engines the handler packages' tests run
// on, so that outbox, timers and relay tests cover the same ones.
package testengine

import (
	"path/filepath"
	"testing"

	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
)

// Engine is one engine the tests run on: its name (a subtest's name) and
// a function that opens a fresh, empty one for test t. file names a bbolt
// engine's file in t's temporary directory, so that a test can open
// several.
type Engine struct {
	Name string
	Open func(t testing.TB, file string) kv.Engine
}

var (
	// Memory is the memory engine.
	Memory = Engine{"memory", func(testing.TB, string) kv.Engine { return memengine.New() }}
	// Bolt is the bbolt engine with NoSync.
	Bolt = Engine{"bbolt", func(t testing.TB, file string) kv.Engine {
		t.Helper()
		e, err := boltengine.Open(filepath.Join(t.TempDir(), file), boltengine.Config{NoSync: true})
		if err != nil {
			t.Fatalf("open bbolt engine: %v", err)
		}
		return e
	}}
	// MVCC is the engine with FoundationDB's transaction semantics
	// (snapshots, optimistic commits that conflict), on the wall clock,
	// without faults.
	MVCC = Engine{"mvcc", func(testing.TB, string) kv.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}) }}
	// All are the engines every handler test runs on.
	All = []Engine{Memory, Bolt, MVCC}
	// MemoryDistributed and BoltDistributed are the memory and bbolt
	// engines made Distributed (see Distributed).
	MemoryDistributed = Distributed(Memory)
	BoltDistributed   = Distributed(Bolt)
)

// Distributed returns e made Distributed (fdbsim.AsDistributed), named
// "<name>-distributed": a Layer over it keeps the due buckets a cluster
// has and reports calls made side by side as overlapping
// (store.OverlapsCalls), so that handlers make them so (the relay's
// lanes, its first checkpoint batch's read ahead, outcome delivery's
// reads) while the memory and bbolt engines still run one write
// transaction at a time: a handler that held one while it waited for
// another call would hang there.
func Distributed(e Engine) Engine {
	return Engine{e.Name + "-distributed", func(t testing.TB, file string) kv.Engine {
		return fdbsim.AsDistributed(e.Open(t, file))
	}}
}
