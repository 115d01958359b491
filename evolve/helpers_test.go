package evolve_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/internal/testkit/ledger/ledgergen"
	"github.com/mkit-dev/mkitfdb/store"
)

// t0 is the tests' "now".
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// quiet logs nowhere.
var quiet = slog.New(slog.DiscardHandler)

// engines are the engines the migration tests run on.
var engines = []struct {
	name string
	open func(t *testing.T) kv.Engine
}{
	{"memory", func(*testing.T) kv.Engine { return memengine.New() }},
	{"bbolt", func(t *testing.T) kv.Engine {
		e, err := boltengine.Open(filepath.Join(t.TempDir(), "store.bbolt"), boltengine.Config{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}},
	{"mvcc", func(*testing.T) kv.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}) }},
}

func openLayer(t *testing.T, e kv.Engine) *fdblayer.Layer {
	t.Helper()
	l, err := fdblayer.Open(e, fdblayer.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// entryVersions is the ledger's upgrade and downgrade of an entry: a note
// cannot be written at format 1.
type entryVersions struct{}

func (entryVersions) UpgradeEntryV1(v ledgergen.EntryV1) (ledgergen.EntryV2, error) {
	return ledgergen.EntryV2{Amount: v.Amount}, nil
}

func (entryVersions) DowngradeEntryV2(v ledgergen.EntryV2) (ledgergen.EntryV1, error) {
	if v.Note != "" {
		return ledgergen.EntryV1{}, fmt.Errorf("%w: a note needs format 2", wire.ErrFormatTooOld)
	}
	return ledgergen.EntryV1{Amount: v.Amount}, nil
}

var entries = ledgergen.NewEntryKeyValues(entryVersions{})

func book(n uint32) store.Partition { return ledgergen.BookPartition{Book: n} }

func entryKey(n uint64) store.Key { return ledgergen.AppendEntryKey(nil, n) }

func v1(amount uint64) store.Value {
	b, err := ledgergen.EncodeEntryV1(ledgergen.EntryV1{Amount: amount})
	if err != nil {
		panic(err)
	}
	return b
}

func v2(amount uint64, note string) store.Value {
	b, err := ledgergen.EncodeEntryV2(ledgergen.EntryV2{Amount: amount, Note: note})
	if err != nil {
		panic(err)
	}
	return b
}

// upgraded is value as the migration leaves it at format 2: decoded and
// encoded newest; a value that does not decode is kept.
func upgraded(value store.Value) store.Value {
	v, err := entries.Decode(value)
	if err != nil {
		return value
	}
	b, err := entries.Encode(v, 2)
	if err != nil {
		panic(err)
	}
	return b
}

// Values that decode for no binary of today: a corrupt one and one of a
// newer version (3).
var (
	corruptEntry = store.Value{0x01, 0xde}
	newerEntry   = store.Value{0x03, 0x01, 0x02}
)

func mustApply(t testing.TB, s store.Store, p store.Partition, b *store.Batch) {
	t.Helper()
	out, err := s.Apply(context.Background(), p, b)
	if err != nil || !out.Committed() {
		t.Fatalf("apply to %s: %v %v", store.PartitionName(p), out, err)
	}
}

// rows reads every row of [start, end) of p.
func rows(t testing.TB, s store.Store, p store.Partition, start, end store.Key) map[string]string {
	t.Helper()
	got := map[string]string{}
	var after store.Cursor
	for {
		page, err := s.Scan(context.Background(), p, start, end, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Entries {
			got[string(r.Key)] = string(r.Value)
		}
		if page.Next == nil {
			return got
		}
		after = page.Next
	}
}

// counter is a toy migration: page n (from 0) of pages, its cursor the
// next page's number; it records the cursors it was stepped from, and
// fails the page fail (when >= 0) while failing is set.
type counter struct {
	name  string
	pages uint32
	mu    sync.Mutex
	from  []uint32
	fail  int
	block chan struct{} // when non-nil, each Step waits for it
}

func newCounter(name string, pages uint32) *counter {
	return &counter{name: name, pages: pages, fail: -1}
}

func (c *counter) Name() string { return c.name }

var errPage = errors.New("the page failed")

func (c *counter) Step(ctx context.Context, cursor []byte) ([]byte, evolve.Page, error) {
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return nil, evolve.Page{}, ctx.Err()
		}
	}
	n := uint32(0)
	if len(cursor) == 4 {
		n = binary.BigEndian.Uint32(cursor)
	}
	c.mu.Lock()
	c.from = append(c.from, n)
	fail := c.fail
	c.mu.Unlock()
	if int(n) == fail {
		return nil, evolve.Page{}, errPage
	}
	page := evolve.Page{Rows: 10, Rewritten: 7, Left: 1, Conflicts: 2, Partitions: 1, Partition: []byte{0x02, 'p', 0x00}}
	if n+1 >= c.pages {
		return nil, page, nil
	}
	return binary.BigEndian.AppendUint32(nil, n+1), page, nil
}

func (c *counter) steps() []uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint32(nil), c.from...)
}

func newRunner(t testing.TB, s store.Store, owner string, clk clock.Clock, m ...func(*evolve.RunnerConfig)) *evolve.Runner {
	t.Helper()
	cfg := evolve.RunnerConfig{Owner: owner, Clock: clk, Logger: quiet}
	for _, f := range m {
		f(&cfg)
	}
	r, err := evolve.NewRunner(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
