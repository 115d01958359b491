package tuple

import (
	"bytes"
	"fmt"
	"github.com/mkit-dev/mkitfdb/internal/testkit/tuplecase"
	"math"
	"testing"
)

type goldenVector struct {
	name  string
	tuple Tuple
	hex   string
}

// goldenVectors are tuplecase's golden vectors: encodings every
// FoundationDB binding agrees on (checked against the binding by the
// FoundationDB engine module's differential test).
func goldenVectors() []goldenVector {
	var out []goldenVector
	for _, v := range tuplecase.Golden() {
		out = append(out, goldenVector{v.Name, fromCase(v.Tuple), v.Hex})
	}
	return out
}

func TestGoldenPack(t *testing.T) {
	for _, v := range goldenVectors() {
		t.Run(v.name, func(t *testing.T) {
			want := unhex(v.hex)
			got, err := Pack(v.tuple)
			if err != nil {
				t.Fatalf("Pack: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Pack = % x\nwant   % x", got, want)
			}
			if api := appendWithAPI(t, nil, v.tuple, false); !bytes.Equal(api, want) {
				t.Fatalf("Append functions = % x\nwant               % x", api, want)
			}
		})
	}
}

func TestGoldenUnpack(t *testing.T) {
	for _, v := range goldenVectors() {
		t.Run(v.name, func(t *testing.T) {
			in := unhex(v.hex)
			want := normalize(v.tuple)
			got, err := Unpack(in)
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			if !equalTuple(got, want) {
				t.Fatalf("Unpack = %#v, want %#v", got, want)
			}
			r := NewReader(in)
			viaReader, err := readWithAPI(&r)
			if err != nil {
				t.Fatalf("Reader: %v", err)
			}
			if !r.Done() || r.Offset() != len(in) || len(r.Rest()) != 0 {
				t.Fatalf("Reader stopped at offset %d of %d", r.Offset(), len(in))
			}
			if !equalTuple(viaReader, want) {
				t.Fatalf("Reader = %#v, want %#v", viaReader, want)
			}
		})
	}
}

// TestUnpackTypes checks the integer types Unpack returns at the edges
// where the binding switches between int64, uint64 and *big.Int.
func TestUnpackTypes(t *testing.T) {
	tests := []struct {
		hex  string
		want string
	}{
		{"14", "int64 0"},
		{"1c 7f ff ff ff ff ff ff ff", "int64 9223372036854775807"},
		{"1c 80 00 00 00 00 00 00 00", "uint64 9223372036854775808"},
		{"1c ff ff ff ff ff ff ff ff", "uint64 18446744073709551615"},
		{"0c 7f ff ff ff ff ff ff ff", "int64 -9223372036854775808"},
		{"0c 7f ff ff ff ff ff ff fe", "*big.Int -9223372036854775809"},
		{"0c 00 00 00 00 00 00 00 00", "*big.Int -18446744073709551615"},
		{"1d 09 01 00 00 00 00 00 00 00 00", "*big.Int 18446744073709551616"},
		{"0b f6 fe ff ff ff ff ff ff ff ff", "*big.Int -18446744073709551616"},
	}
	for _, tt := range tests {
		t.Run(tt.hex, func(t *testing.T) {
			got, err := Unpack(unhex(tt.hex))
			if err != nil {
				t.Fatalf("Unpack: %v", err)
			}
			if s := fmt.Sprintf("%T %v", got[0], got[0]); s != tt.want {
				t.Fatalf("Unpack = %s, want %s", s, tt.want)
			}
		})
	}
}

func TestUnpackBytesDoNotAliasInput(t *testing.T) {
	in := unhex("01 61 62 00")
	got, err := Unpack(in)
	if err != nil {
		t.Fatal(err)
	}
	in[1] = 'x'
	if b := got[0].([]byte); string(b) != "ab" {
		t.Fatalf("Unpack result changed with its input: %q", b)
	}
}

func TestLenMatchesAppend(t *testing.T) {
	var ints []int64
	for k := 0; k < 64; k += 8 {
		for _, d := range []int64{-1, 0, 1} {
			v := int64(1)<<k + d
			ints = append(ints, v, -v)
		}
	}
	ints = append(ints, math.MaxInt64, math.MinInt64, math.MinInt64+1)
	for _, v := range ints {
		enc := AppendInt(nil, v)
		if IntLen(v) != len(enc) {
			t.Errorf("IntLen(%d) = %d, AppendInt wrote %d bytes", v, IntLen(v), len(enc))
		}
		if v >= 0 {
			if u := AppendUint(nil, uint64(v)); !bytes.Equal(u, enc) {
				t.Errorf("AppendUint(%d) = % x, AppendInt = % x", v, u, enc)
			}
		}
	}
	for _, v := range []uint64{0, 1, 255, 256, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if n := len(AppendUint(nil, v)); UintLen(v) != n {
			t.Errorf("UintLen(%d) = %d, AppendUint wrote %d bytes", v, UintLen(v), n)
		}
	}
	for _, s := range []string{"", "a", "\x00", "\x00\x00", "a\x00b\x00", "\xff\x00\xff"} {
		if n := len(AppendString(nil, s)); StringLen(s) != n {
			t.Errorf("StringLen(%q) = %d, AppendString wrote %d bytes", s, StringLen(s), n)
		}
		if n := len(AppendBytes(nil, []byte(s))); BytesLen([]byte(s)) != n {
			t.Errorf("BytesLen(%q) = %d, AppendBytes wrote %d bytes", s, BytesLen([]byte(s)), n)
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	prefix := []byte{0xAA, 0xBB}
	buf := append(make([]byte, 0, 64), prefix...)
	buf = AppendString(buf, "x\x00")
	buf = AppendInt(buf, -2)
	buf = AppendNestedStart(buf)
	buf = AppendNestedNull(buf)
	buf = AppendNestedEnd(buf)
	want := unhex("aa bb 02 78 00 ff 00 13 fd 05 00 ff 00")
	if !bytes.Equal(buf, want) {
		t.Fatalf("got % x, want % x", buf, want)
	}
}

func TestRangeEnd(t *testing.T) {
	prefix := unhex("02 61 00 15 01")
	end := RangeEnd(prefix[:len(prefix):len(prefix)])
	if want := unhex("02 61 00 15 01 ff"); !bytes.Equal(end, want) {
		t.Fatalf("RangeEnd = % x, want % x", end, want)
	}
	end[0] = 0x99
	if prefix[0] != 0x02 {
		t.Fatal("RangeEnd result shares memory with its input")
	}
	// Spare capacity in prefix must not be written to either.
	withRoom := append(make([]byte, 0, 8), 0x15, 0x01)
	RangeEnd(withRoom)
	if withRoom[:3][2] != 0x00 {
		t.Fatal("RangeEnd wrote into the spare capacity of its input")
	}
	if got := RangeEnd(nil); !bytes.Equal(got, []byte{0xff}) {
		t.Fatalf("RangeEnd(nil) = % x, want ff", got)
	}
}
