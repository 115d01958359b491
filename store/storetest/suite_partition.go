package storetest

import (
	"fmt"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

var partitionChecks = []check{
	{"SameKeyTwoValues", testPartitionSameKey},
	{"ScanNeverLeaves", testPartitionScanNeverLeaves},
	{"IdentityIsTheEncoding", testPartitionIdentityIsTheEncoding},
	{"UnencodableIsInvalid", testPartitionUnencodable},
}

// rawPartition is a partition of another Go type than Partition, with a
// given encoding and kind: stores must address partitions by their
// encoding alone.
type rawPartition struct {
	enc  []byte
	kind string
}

func (r rawPartition) AppendTuple(dst []byte) ([]byte, error) { return append(dst, r.enc...), nil }
func (r rawPartition) Kind() string                           { return r.kind }
func (r rawPartition) String() string                         { return fmt.Sprintf("%s:%x", r.kind, r.enc) }

// bytesPartition encodes name as a tuple-layer byte string (0x01), where
// Partition uses a UTF-8 string (0x02): a different partition.
func bytesPartition(name string) rawPartition {
	enc, err := Partition{Name: name}.AppendTuple(nil)
	if err != nil {
		panic(err)
	}
	enc[0] = 0x01
	return rawPartition{enc: enc, kind: "bytes"}
}

// testPartitionSameKey: one key in two partitions names two rows: reads,
// guards, writes and deletes in one never touch the other.
func testPartitionSameKey(t *testing.T, f *fixture) {
	third := Partition{Name: "suite-third"}
	f.put(t, f.p, "k", "in p")
	f.put(t, f.other, "k", "in other")
	f.wantValue(t, f.p, store.Key("k"), store.Value("in p"))
	f.wantValue(t, f.other, store.Key("k"), store.Value("in other"))
	f.wantAbsent(t, third, store.Key("k"))

	vs, err := f.s.GetMany(f.ctx, f.other, keys("k", "k"))
	noErr(t, err, "GetMany")
	if len(vs) != 2 || string(vs[0]) != "in other" || string(vs[1]) != "in other" {
		t.Fatalf("GetMany in other = %q, want [in other, in other]", vs)
	}
	f.apply(t, third, store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("k"), store.Value("in third")),
		store.Committed, "Absent(k) in a third partition")
	out := f.apply(t, f.other, store.NewBatch().Require(store.Equals(store.Key("k"), store.Value("in p"))).Put(store.Key("x"), store.Value("x")),
		store.PreconditionFailed, "Equals(k, p's value) in other")
	if out.FailedIndex != 0 {
		t.Fatalf("outcome %v, want precondition 0 failed", out)
	}
	f.apply(t, f.p, store.NewBatch().Delete(store.Key("k")), store.Committed, "delete in p")
	f.wantAbsent(t, f.p, store.Key("k"))
	f.wantValue(t, f.other, store.Key("k"), store.Value("in other"))
	f.wantValue(t, third, store.Key("k"), store.Value("in third"))
}

// testPartitionScanNeverLeaves: partitions whose names are prefixes of one
// another, end in 0x01 or 0xFF bytes, or differ only in tuple type each
// scan back exactly their own rows over the full key range. Keys starting
// with 0xFF are left out: the contract does not say whether a store must
// accept them (tuple-encoded keys never start with 0xFF).
func testPartitionScanNeverLeaves(t *testing.T, f *fixture) {
	ps := []store.Partition{
		Partition{Name: "iso"}, Partition{Name: "iso\x01"}, Partition{Name: "iso\x01x"},
		Partition{Name: "isox"}, Partition{Name: "is"}, Partition{Name: "iso\xff"}, bytesPartition("iso"),
	}
	edgeKeys := []string{"\x00", "\x00\x00", "\x00\xff", "\x01", "k", "\xfe", "\xfe\xff", "\xfe\xff\xff"}
	want := make([][]store.KeyValue, len(ps))
	for i, p := range ps {
		var kvs []string
		for _, k := range edgeKeys {
			kvs = append(kvs, k, fmt.Sprintf("partition %d key %x", i, k))
		}
		f.put(t, p, kvs...)
		want[i] = rows(kvs...)
	}
	for i, p := range ps {
		for _, limit := range []int{1, 3, 1000} {
			got := scanAll(t, f, p, fullStart, fullEnd, limit)
			if !sameRows(got, want[i]) {
				t.Fatalf("full scan of %v limit %d:\n got %s\nwant %s", p, limit, showRows(got), showRows(want[i]))
			}
		}
	}
}

// testPartitionIdentityIsTheEncoding: a store addresses a partition by its
// AppendTuple bytes, not its Go type, pointer or Kind.
func testPartitionIdentityIsTheEncoding(t *testing.T, f *fixture) {
	named := Partition{Name: "same\x01name"}
	enc, err := named.AppendTuple([]byte("ignored prefix"))
	noErr(t, err, "AppendTuple")
	raw := rawPartition{enc: enc[len("ignored prefix"):], kind: "raw"}

	f.put(t, named, "k", "v")
	f.wantValue(t, raw, store.Key("k"), store.Value("v"))
	f.wantValue(t, &named, store.Key("k"), store.Value("v"))
	f.put(t, raw, "k2", "v2")
	f.wantRows(t, named, rows("k", "v", "k2", "v2"))
	f.wantAbsent(t, bytesPartition("same\x01name"), store.Key("k"), store.Key("k2"))
}

// testPartitionUnencodable: a partition whose identity cannot encode (a
// failing AppendTuple, an empty name, a 0x00 in the name, a nil partition)
// is ErrInvalid on
// every method, and nothing is written anywhere.
func testPartitionUnencodable(t *testing.T, f *fixture) {
	good := Partition{Name: "x"}
	f.put(t, good, "k", "v")
	for _, p := range []store.Partition{Partition{Name: "x", Broken: true}, Partition{}, Partition{Name: "x\x00"}, nil} {
		name := store.PartitionName(p)
		_, _, err := f.s.Get(f.ctx, p, store.Key("k"))
		wantSentinel(t, err, store.ErrInvalid, "Get on "+name)
		_, err = f.s.GetMany(f.ctx, p, keys("k"))
		wantSentinel(t, err, store.ErrInvalid, "GetMany on "+name)
		_, err = f.s.Scan(f.ctx, p, fullStart, fullEnd, nil, 10)
		wantSentinel(t, err, store.ErrInvalid, "Scan on "+name)
		_, err = f.s.Stats(f.ctx, p)
		wantSentinel(t, err, store.ErrInvalid, "Stats on "+name)
		_, err = f.s.Apply(f.ctx, p, store.NewBatch().Put(store.Key("k"), store.Value("written")).Put(store.Key("new"), store.Value("n")))
		wantSentinel(t, err, store.ErrInvalid, "Apply on "+name)
	}
	f.wantRows(t, good, rows("k", "v"))
	f.wantRows(t, f.p, nil)
}
