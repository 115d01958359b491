package relay

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// decodeSeeds are encoded rows: targets of the library's schema and of
// others, identities that are not tuples, and bytes that are no row.
func decodeSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	targets := [][]byte{
		identityOf(refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("target-000")}),
		identityOf(refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}),
		{0x02, 'o', 'r', 'd', 'e', 'r', 's', 0x00, 0x15, 0x07}, // ("orders", 7)
		{0xff, 0x01}, // not a tuple
		nil,          // empty
	}
	out := [][]byte{{}, {gen.VersionRelayV1}, []byte("garbage")}
	for _, t := range targets {
		v, err := gen.EncodeRelayV1(gen.RelayV1{Target: t, Puts: []gen.RelayPut{{Key: []byte("k"), Value: []byte("v")}}, Deletes: [][]byte{[]byte("d")}, AtMs: 1})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// decodeFire returns a fire ready to decode raw rows.
func decodeFire() *fire {
	return &fire{
		scratch: getScratch(),
		c:       &timers.Ctx{Partition: store.Identity{}},
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// FuzzDecodeRead: a window of rows a, b, a (sequences 1-3) decodes to the
// prefix before the first row that is not a RelayV1 naming a tuple
// identity, never panicking; that row ends the window as corrupt; every
// decoded row is in the group of its target's identity bytes, the same
// group for the same bytes, a store.Identity addressing them.
func FuzzDecodeRead(f *testing.F) {
	seeds := decodeSeeds(f)
	for _, a := range seeds {
		for _, b := range seeds {
			f.Add(a, b)
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fr := decodeFire()
		defer fr.release()
		values := [][]byte{a, b, a}
		for i, v := range values {
			fr.raw = append(fr.raw, store.KeyValue{Key: gen.AppendRelayKey(nil, uint64(i+1)), Value: v})
		}
		fr.decodeRead()

		valid := 0
		for _, v := range values {
			rec, err := gen.DecodeRelayV1(v)
			if err == nil {
				_, err = store.ParseIdentity(rec.Target)
			}
			if err != nil {
				break
			}
			valid++
		}
		if len(fr.rows) != valid || fr.corrupt != (valid < len(values)) {
			t.Fatalf("decoded %d rows (corrupt %v), want the %d valid ones", len(fr.rows), fr.corrupt, valid)
		}
		for i, q := range fr.rows {
			g := fr.groups[q.group]
			if !bytes.Equal(g.id, fr.flat[i].Record.Target) {
				t.Fatalf("row %d in the group of %x, its target is %x", i+1, g.id, fr.flat[i].Record.Target)
			}
			id, err := g.target.AppendTuple(nil)
			if err != nil || !bytes.Equal(id, g.id) {
				t.Fatalf("group %d addresses %x (%v), want %x", q.group, id, err, g.id)
			}
			if fr.flat[i].Source != fr.c.Partition {
				t.Fatalf("row %d source %v", i+1, fr.flat[i].Source)
			}
		}
		for i := range fr.groups {
			for j := range i {
				if bytes.Equal(fr.groups[i].id, fr.groups[j].id) {
					t.Fatalf("groups %d and %d share the target %x", j, i, fr.groups[i].id)
				}
			}
		}
	})
}

// TestATargetNotATupleIsCorrupt: a row whose target identity does not
// parse fails to decode with store.ErrCorrupt; the rows before it keep
// their groups.
func TestATargetNotATupleIsCorrupt(t *testing.T) {
	seeds := decodeSeeds(t)
	fr := decodeFire()
	defer fr.release()
	for i, v := range [][]byte{seeds[3], seeds[5], seeds[6]} { // ta, ("orders", 7), not a tuple
		fr.raw = append(fr.raw, store.KeyValue{Key: gen.AppendRelayKey(nil, uint64(i+1)), Value: v})
	}
	if fr.decodeRead() || !fr.corrupt || len(fr.rows) != 2 || len(fr.groups) != 2 {
		t.Fatalf("decoded %d rows in %d groups, corrupt %v; want 2 rows, 2 groups, corrupt", len(fr.rows), len(fr.groups), fr.corrupt)
	}
	var row Row
	if _, err := fr.decodeRow(fr.raw[2], &row); err != nil {
		t.Fatalf("the row decodes (%v); only its identity is corrupt", err)
	}
	if _, err := fr.targets.add(row.Record.Target, 2); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a target that is not a tuple: %v, want store.ErrCorrupt", err)
	}
}
