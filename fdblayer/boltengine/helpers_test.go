package boltengine_test

import (
	"log/slog"
	"testing"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// The tests run a Layer over the engine (package fdblayer imports no
// engine, so this package's tests may import it).

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

func k(s string) store.Key   { return store.Key(s) }
func v(s string) store.Value { return store.Value(s) }

// openLayer opens a Layer over e that logs nowhere, closed when t ends.
func openLayer(t testing.TB, e kv.Engine) *fdblayer.Layer {
	t.Helper()
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// mustApply applies b to p and fails t unless it commits.
func mustApply(t testing.TB, l *fdblayer.Layer, p store.Partition, b *store.Batch) {
	t.Helper()
	out, err := l.Apply(t.Context(), p, b)
	if err != nil || out.Outcome != store.Committed {
		t.Fatalf("Apply: %+v, %v", out, err)
	}
}

// scanAll returns every row of p, read in pages of limit.
func scanAll(t testing.TB, l *fdblayer.Layer, p store.Partition, limit int) []store.KeyValue {
	t.Helper()
	var (
		rows  []store.KeyValue
		after store.Cursor
	)
	for range 10_000 {
		page, err := l.Scan(t.Context(), p, nil, nil, after, limit)
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		rows = append(rows, page.Entries...)
		if page.Next == nil {
			return rows
		}
		after = page.Next
	}
	t.Fatal("scan did not end")
	return nil
}
