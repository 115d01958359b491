package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

// TestPartitionAppendTuple checks the encoding against the tuple layer's
// string element: 0x02, the bytes, 0x00.
func TestPartitionAppendTuple(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []byte
	}{
		{"a", []byte{0x02, 'a', 0x00}},
		{"orders", []byte("\x02orders\x00")},
		{"\xff", []byte{0x02, 0xFF, 0x00}},
		{"a\x01b", []byte{0x02, 'a', 0x01, 'b', 0x00}},
		{"é", []byte{0x02, 0xC3, 0xA9, 0x00}},
	} {
		got, err := Partition{Name: tc.name}.AppendTuple([]byte("pre"))
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		if want := append([]byte("pre"), tc.want...); !bytes.Equal(got, want) {
			t.Errorf("%q: AppendTuple = %x, want %x", tc.name, got, want)
		}
	}
}

func TestPartitionUnencodable(t *testing.T) {
	for _, p := range []Partition{{}, {Name: "x", Broken: true}, {Broken: true}, {Name: "a\x00"}, {Name: "\x00"}} {
		dst := []byte("keep")
		got, err := p.AppendTuple(dst)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%#v: error %v, want ErrInvalid", p, err)
		}
		if string(got) != "keep" {
			t.Errorf("%#v: dst became %q on failure", p, got)
		}
	}
}

// TestPartitionPrefixFree: no name's encoding is a prefix of another's.
func TestPartitionPrefixFree(t *testing.T) {
	names := []string{"a", "ab", "a\x01", "a\x01b", "b", "\x01", "\xff", "a\xff", "a\xff\xff"}
	for _, x := range names {
		ex, err := Partition{Name: x}.AppendTuple(nil)
		noErr(t, err, "AppendTuple")
		for _, y := range names {
			ey, err := Partition{Name: y}.AppendTuple(nil)
			noErr(t, err, "AppendTuple")
			if x != y && bytes.HasPrefix(ey, ex) {
				t.Errorf("encoding of %q (%x) is a prefix of %q's (%x)", x, ex, y, ey)
			}
		}
	}
}

func TestPartitionNames(t *testing.T) {
	for _, tc := range []struct {
		p    store.Partition
		want string
	}{
		{Partition{Name: "orders"}, "test:orders"},
		{Partition{Name: "a\x01b"}, `test:"a\x01b"`},
		{&Partition{Name: "ptr"}, "test:ptr"},
	} {
		if got := store.PartitionName(tc.p); got != tc.want {
			t.Errorf("PartitionName = %q, want %q", got, tc.want)
		}
		if kind := tc.p.Kind(); kind != "test" {
			t.Errorf("Kind = %q, want test", kind)
		}
	}
}
