package fdblayer_test

import (
	"github.com/mkit-dev/mkitfdb/evolve"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// engineCase opens a fresh, empty engine for one test.
type engineCase struct {
	name string
	open func(t *testing.T) kv.Engine
}

// engineCases are the engines every shared test runs on. FoundationDB's
// engine is tested in its own module (fdblayer/fdbengine), which runs the
// store's conformance suite on a cluster.
var engineCases = []engineCase{
	{name: "memory", open: func(*testing.T) kv.Engine { return memengine.New() }},
	{name: "mvcc", open: func(*testing.T) kv.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}) }},
	{name: "bbolt", open: func(t *testing.T) kv.Engine {
		e, err := boltengine.Open(filepath.Join(t.TempDir(), "store.bbolt"), boltengine.Config{})
		if err != nil {
			t.Fatalf("open bbolt: %v", err)
		}
		return e
	}},
}

// quiet is cfg (the first of cfgs, or the zero Config) logging nowhere
// unless it names a logger.
func quiet(cfgs []Config) Config {
	var cfg Config
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// noGateRows is the gate of a Layer whose test counts the engine's
// commits: it writes no row of its own (no process row, no new store's
// formats), so that every commit is the test's.
var noGateRows = evolve.GateConfig{ReadOnly: true}

// openLayer opens a Layer over e configured by cfg (at most one; none is
// the zero Config), closed when t ends. It logs nowhere unless cfg names a
// logger.
func openLayer(t testing.TB, e kv.Engine, cfg ...Config) *Layer {
	t.Helper()
	l, err := Open(e, quiet(cfg))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// forEachEngine runs fn as a subtest per engine, on a fresh Layer
// configured by cfg (at most one).
func forEachEngine(t *testing.T, fn func(t *testing.T, l *Layer), cfg ...Config) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			fn(t, openLayer(t, ec.open(t), cfg...))
		})
	}
}

// forEachDistributedEngine runs fn as a subtest per engine, on a fresh
// Layer over the engine made Distributed (fdbsim.AsDistributed), so that
// its due index has DueHashBuckets buckets on every engine.
func forEachDistributedEngine(t *testing.T, fn func(t *testing.T, l *Layer), cfg ...Config) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			fn(t, openLayer(t, fdbsim.AsDistributed(ec.open(t)), cfg...))
		})
	}
}

// t0 is the time the tests' wake times count from: the Unix epoch, so
// that t0 plus n milliseconds is stored as n.
var t0 = time.Unix(0, 0)

// testPartition is a partition encoded as one tuple string element, like
// generated identities.
type testPartition string

func (p testPartition) AppendTuple(dst []byte) ([]byte, error) {
	if p == "" {
		return dst, store.ErrInvalid
	}
	dst = append(dst, 0x02)
	for i := 0; i < len(p); i++ {
		dst = append(dst, p[i])
		if p[i] == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, 0x00), nil
}

func (testPartition) Kind() string     { return "test" }
func (p testPartition) String() string { return "test:" + string(p) }
