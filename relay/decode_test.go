package relay

import (
	"bytes"
	"testing"

	"github.com/mkit-dev/mkitfdb/gen"
)

// decodeSeeds are encoded rows: pairs of one target with different puts,
// deletes and times, other variants, and names of other lengths.
func decodeSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	targets := []gen.Partition{
		gen.NamespacePartition{NS: gen.MustNamespaceKey("target-000")},
		gen.NamespacePartition{NS: gen.MustNamespaceKey("target-001")},
		gen.NamespacePartition{NS: gen.MustNamespaceKey("t")},
		gen.RefPartition{NS: gen.MustNamespaceKey("tenant"), Repo: gen.MustRepoName("repo"), ShardRef: gen.MustShardRef("refs/heads/main")},
		gen.CoordinatorPartition{NS: gen.MustNamespaceKey("target-000")},
		gen.ContentShardPartition{NS: gen.MustNamespaceKey("tenant"), Shard: 7},
	}
	var out [][]byte
	for i, t := range targets {
		for _, rec := range []gen.RelayV1{
			{Target: t, Puts: []gen.RelayPut{{Key: []byte("k"), Value: []byte("v")}}, AtMs: 1},
			{Target: t, Puts: []gen.RelayPut{{Key: []byte("k1"), Value: []byte{}}, {Key: []byte("k2"), Value: bytes.Repeat([]byte{'v'}, 200)}}, Deletes: [][]byte{[]byte("d")}, AtMs: 1 << 40},
			{Target: t, Deletes: [][]byte{[]byte("d1"), bytes.Repeat([]byte{'d'}, 130)}, AtMs: uint64(i*10 + 3)},
			{Target: t},
		} {
			v, err := gen.EncodeRelayV1(rec)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

// decodeFresh decodes v with the generated decoder into a fresh record.
func decodeFresh(v []byte) (gen.RelayV1, error) { return gen.DecodeRelayV1(v) }

func sameRecord(a, b gen.RelayV1) bool {
	if a.Target != b.Target || a.AtMs != b.AtMs || len(a.Puts) != len(b.Puts) || len(a.Deletes) != len(b.Deletes) {
		return false
	}
	for i := range a.Puts {
		if !bytes.Equal(a.Puts[i].Key, b.Puts[i].Key) || !bytes.Equal(a.Puts[i].Value, b.Puts[i].Value) ||
			(a.Puts[i].Key == nil) != (b.Puts[i].Key == nil) || (a.Puts[i].Value == nil) != (b.Puts[i].Value == nil) {
			return false
		}
	}
	for i := range a.Deletes {
		if !bytes.Equal(a.Deletes[i], b.Deletes[i]) || (a.Deletes[i] == nil) != (b.Deletes[i] == nil) {
			return false
		}
	}
	return true
}

// FuzzRowDecoderMatchesCodec: whatever a rowDecoder decodes after
// remembering the target of a first row, it decodes exactly as
// gen.DecodeRelayV1Into does, error for error, and it names a remembered
// target only for a row whose target is that one.
func FuzzRowDecoderMatchesCodec(f *testing.F) {
	seeds := decodeSeeds(f)
	for _, a := range seeds {
		for _, b := range seeds {
			f.Add(a, b)
		}
		f.Add(a, a[:len(a)-1])
		f.Add(a, append(bytes.Clone(a), 0))
		if len(a) > 20 {
			c := bytes.Clone(a)
			c[len(c)-12]++
			f.Add(a, c)
		}
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		d := rowDecoder{known: map[string]knownTarget{}}
		var rec gen.RelayV1
		if id, err := d.decode(first, &rec); err != nil || id != -1 {
			if err == nil {
				t.Fatalf("first row named remembered target %d with nothing remembered", id)
			}
			return
		}
		firstTarget := rec.Target
		d.remember(first, rec.Target, 7)
		// Reused, dirty capacity, as a fire's decode arenas are.
		rec.Puts = append(rec.Puts[:0], gen.RelayPut{Key: []byte("junk")}, gen.RelayPut{}, gen.RelayPut{})[:0]
		rec.Deletes = append(rec.Deletes[:0], []byte("junk"), nil)[:0]
		id, err := d.decode(second, &rec)
		want, wantErr := decodeFresh(second)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("decode error %v, codec's %v", err, wantErr)
		case err != nil:
			if err.Error() != wantErr.Error() {
				t.Fatalf("decode error %q, codec's %q", err, wantErr)
			}
			return
		case !sameRecord(rec, want):
			t.Fatalf("decoded %+v, codec %+v", rec, want)
		case id != -1 && (id != 7 || want.Target != firstTarget):
			t.Fatalf("named remembered target %d for a row of %v (remembered %v)", id, want.Target, firstTarget)
		}
	})
}

// TestRowDecoderReusesATargetWithoutAllocating: a row of a remembered
// target gets the remembered partition and decodes without allocating;
// rows of other targets decode anew.
func TestRowDecoderReusesATargetWithoutAllocating(t *testing.T) {
	seeds := decodeSeeds(t)
	d := rowDecoder{known: map[string]knownTarget{}}
	var rec gen.RelayV1
	for i := 0; i < len(seeds); i += 4 {
		id, err := d.decode(seeds[i], &rec)
		if err != nil || id != -1 {
			t.Fatalf("first row of target %d: id %d, %v; want -1, nil", i/4, id, err)
		}
		d.remember(seeds[i], rec.Target, i/4)
	}
	for i, v := range seeds {
		want, err := decodeFresh(v)
		if err != nil {
			t.Fatal(err)
		}
		id, err := d.decode(v, &rec)
		if err != nil || id != i/4 || !sameRecord(rec, want) {
			t.Fatalf("row %d: id %d, %v, %+v; want %d, nil, %+v", i, id, err, rec, i/4, want)
		}
	}
	rec = gen.RelayV1{Puts: make([]gen.RelayPut, 0, 4), Deletes: make([][]byte, 0, 4)}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.decode(seeds[1], &rec) }); n != 0 {
		t.Fatalf("decoding a row of a remembered target allocated %v times", n)
	}
	d.reset()
	if id, err := d.decode(seeds[1], &rec); err != nil || id != -1 {
		t.Fatalf("after reset: id %d, %v; want -1, nil", id, err)
	}
}
