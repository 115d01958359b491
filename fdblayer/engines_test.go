package fdblayer_test

import (
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

// engineCase opens a fresh engine for one test, with the Layer options
// that make it look empty (the FoundationDB case gives each test its own
// root prefix on the shared cluster).
type engineCase struct {
	name string
	open func(t *testing.T) (kv.Engine, []Option)
}

// engineCases are the engines every shared test runs on. FoundationDB's
// engine is tested in its own module (fdblayer/fdbengine), which runs the
// store's conformance suite on a cluster.
var engineCases = []engineCase{
	{name: "memory", open: func(*testing.T) (kv.Engine, []Option) { return memengine.New(), nil }},
	{name: "mvcc", open: func(*testing.T) (kv.Engine, []Option) { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}), nil }},
	{name: "bbolt", open: func(t *testing.T) (kv.Engine, []Option) {
		e, err := boltengine.Open(filepath.Join(t.TempDir(), "store.bbolt"), boltengine.Config{})
		if err != nil {
			t.Fatalf("open bbolt: %v", err)
		}
		return e, nil
	}},
}

// openLayer opens a Layer over e, closed when t ends. It logs nowhere
// unless opts say otherwise.
func openLayer(t testing.TB, e kv.Engine, opts ...Option) *Layer {
	t.Helper()
	l, err := Open(e, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// forEachEngine runs fn as a subtest per engine, on a fresh Layer.
func forEachEngine(t *testing.T, fn func(t *testing.T, l *Layer), opts ...Option) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			e, base := ec.open(t)
			fn(t, openLayer(t, e, append(base, opts...)...))
		})
	}
}

// forEachDistributedEngine runs fn as a subtest per engine, on a fresh
// Layer over the engine made Distributed (fdbsim.AsDistributed), so that
// its due index has DueHashBuckets buckets on every engine.
func forEachDistributedEngine(t *testing.T, fn func(t *testing.T, l *Layer), opts ...Option) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			e, base := ec.open(t)
			fn(t, openLayer(t, fdbsim.AsDistributed(e), append(base, opts...)...))
		})
	}
}

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
