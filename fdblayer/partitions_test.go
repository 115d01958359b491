package fdblayer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// pairPartition is a two-element identity (namespace, name), as generated
// identities are: (namespace, variant, fields...).
type pairPartition struct{ ns, name string }

func (p pairPartition) AppendTuple(dst []byte) ([]byte, error) {
	return tuple.AppendString(tuple.AppendString(dst, p.ns), p.name), nil
}
func (pairPartition) Kind() string { return "pair" }

// pairSplitter knows namespace "ns" (identities of two strings); it
// reports any other namespace as a region under its first element.
func pairSplitter(b []byte) (int, bool) {
	r := tuple.NewReader(b)
	ns, err := r.ReadString()
	if err != nil {
		return 1, false
	}
	first := r.Offset()
	if ns != "ns" {
		return first, false
	}
	if _, err := r.ReadString(); err != nil {
		return first, false
	}
	return r.Offset(), true
}

func listAll(t *testing.T, l *Layer, after []byte) []string {
	t.Helper()
	var got []string
	err := l.ListPartitions(context.Background(), after, pairSplitter, func(p ListedPartition) error {
		if p.Unsplit {
			got = append(got, fmt.Sprintf("unsplit %x first %x", p.Prefix, p.FirstKey))
		} else {
			got = append(got, p.Identity.String())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ListPartitions: %v", err)
	}
	return got
}

// ListPartitions finds every partition holding a key, once, in identity
// order: one whose identity another's encoding extends (tuple escaping),
// one holding only a wake time, and a region its splitter cannot split
// (the evolution partition, first, among them); never the due index.
func TestListPartitionsFindsEveryPartition(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		ctx := context.Background()
		put := func(p store.Partition, b *store.Batch) {
			t.Helper()
			if out, err := l.Apply(ctx, p, b); err != nil || !out.Committed() {
				t.Fatalf("Apply %v: %v %v", p, out, err)
			}
		}
		iso, isoNul := pairPartition{"ns", "iso"}, pairPartition{"ns", "iso\x00"}
		put(iso, store.NewBatch().Put(store.Key{0x15, 1}, []byte("a")).Put(store.Key{0x15, 2}, []byte("b")))
		put(isoNul, store.NewBatch().Put(store.Key{0x15, 1}, []byte("c")))
		put(pairPartition{"ns", "wake"}, store.NewBatch().WakeAt(t0.Add(100*time.Millisecond)))
		put(pairPartition{"zz", "x"}, store.NewBatch().Put(store.Key{0x15, 1}, []byte("d")))
		put(pairPartition{"zz", "y"}, store.NewBatch().Put(store.Key{0x15, 1}, []byte("e")))
		put(pairPartition{"ns", "z"}, store.NewBatch().Put(store.Key{0x15, 9}, nil).WakeAt(t0.Add(50*time.Millisecond)))

		got := listAll(t, l, nil)
		want := []string{
			evolveListed(t),
			`identity("ns", "iso")`,
			`identity("ns", "iso\x00")`,
			`identity("ns", "wake")`,
			`identity("ns", "z")`,
			"unsplit 027a7a00 first 027a7a00027800150" + "1",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed\n%q\nwant\n%q", got, want)
		}
		// Resuming after a partition lists what follows it.
		id, _ := store.IdentityOf(iso)
		sub, _ := id.AppendTuple(nil)
		if got := listAll(t, l, sub); !slices.Equal(got, want[2:]) {
			t.Fatalf("after %x listed %q, want %q", sub, got, want[2:])
		}
		// fn's error stops the listing and is returned.
		stop := errors.New("stop")
		n := 0
		err := l.ListPartitions(ctx, nil, pairSplitter, func(ListedPartition) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("ListPartitions stopped after %d with %v, want 1 and stop", n, err)
		}
	})
}

// A splitter that claims more bytes than the key has is refused, and a
// nil one is invalid.
func TestListPartitionsRefusesABadSplitter(t *testing.T) {
	l := openLayer(t, memengine.New())
	ctx := context.Background()
	if _, err := l.Apply(ctx, pairPartition{"ns", "a"}, store.NewBatch().Put(store.Key{0x15, 1}, nil)); err != nil {
		t.Fatal(err)
	}
	long := func(b []byte) (int, bool) { return len(b) + 1, true }
	if err := l.ListPartitions(ctx, nil, long, func(ListedPartition) error { return nil }); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("overlong split: %v, want ErrCorrupt", err)
	}
	if err := l.ListPartitions(ctx, nil, nil, func(ListedPartition) error { return nil }); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("nil splitter: %v, want ErrInvalid", err)
	}
}

// Each partition costs one read of one row, however many rows it holds.
func TestListPartitionsReadsOneRowPerPartition(t *testing.T) {
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{})
	l := openLayer(t, e)
	ctx := context.Background()
	for i := range 5 {
		b := store.NewBatch()
		for j := range 50 {
			b.Put(store.Key{0x15, byte(j + 1)}, []byte("v"))
		}
		if _, err := l.Apply(ctx, pairPartition{"ns", fmt.Sprint(i)}, b); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Stats()
	n := 0
	if err := l.ListPartitions(ctx, nil, pairSplitter, func(ListedPartition) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	d := e.Stats()
	// The five, and the evolution partition of the Layer's gate.
	if reads, keys := d.Reads-before.Reads, d.KeysRead-before.KeysRead; n != 6 || reads != 7 || keys != 6 {
		t.Fatalf("listed %d partitions in %d reads of %d keys, want 6 in 7 reads (the last finds none) of 6", n, reads, keys)
	}
}

// The splitter and fn get bytes of their own, valid after the engine's
// read transaction ended: on bbolt a key read is bbolt's memory map, which
// a writer growing the file maps anew once the read has ended. Here the
// splitter lets such a writer grow the file by megabytes before it reads
// the key it was given (before the fix, that key pointed into the old map:
// the splitter read unmapped memory).
func TestListPartitionsKeysOutliveTheirRead(t *testing.T) {
	e, err := boltengine.Open(filepath.Join(t.TempDir(), "store.bbolt"), boltengine.Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l := openLayer(t, e)
	ctx := context.Background()
	for i := range 3 {
		if _, err := l.Apply(ctx, pairPartition{"ns", fmt.Sprintf("p%d", i)}, store.NewBatch().Put(store.Key{0x15, 1}, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	grow := 0
	split := func(b []byte) (int, bool) {
		before := append([]byte(nil), b...)
		grow++
		for j := range 8 {
			big := store.NewBatch()
			for k := range 40 {
				big.Put(store.Key{0x15, byte(grow), byte(j), byte(k)}, make([]byte, 16<<10))
			}
			if _, err := l.Apply(ctx, pairPartition{"grow", fmt.Sprint(grow)}, big); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(before, b) {
			t.Fatalf("the key the splitter was given changed under it: %x, then %x", before, b)
		}
		return pairSplitter(b)
	}
	var got []string
	if err := l.ListPartitions(ctx, nil, split, func(p ListedPartition) error {
		if !p.Unsplit {
			got = append(got, p.Identity.String())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("listed %q, want the 3 partitions of ns", got)
	}
}

// evolveListed is how listAll lists the evolution partition (package
// evolve) of a new store that a Layer opened: its first row is the
// library's format (a new store starts at the formats its binary knows),
// and pairSplitter does not split an identity that starts with null.
func evolveListed(t *testing.T) string {
	t.Helper()
	id, err := evolve.Partition.AppendTuple(nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := gen.AppendStoreFormatKey(nil, gen.SchemaNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("unsplit 00 first %x", append(id, key...))
}
