package tuple

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
)

type goldenVector struct {
	name  string
	tuple Tuple
	hex   string
}

// goldenVectors are encodings every FoundationDB binding agrees on. The
// "spec" ones are the test cases of FoundationDB's design/tuple.md; the rest
// are integer boundaries and combinations worked out from the same rules
// (and checked against the binding by fdb_compat_test.go).
func goldenVectors() []goldenVector {
	ff := func(n int) string { return strings.TrimSpace(strings.Repeat("ff ", n)) }
	zeros := func(n int) string { return strings.TrimSpace(strings.Repeat("00 ", n)) }
	return []goldenVector{
		{"spec/null", Tuple{nil}, "00"},
		{"spec/bytes", Tuple{[]byte("foo\x00bar")}, "01 66 6f 6f 00 ff 62 61 72 00"},
		{"spec/string", Tuple{"F\u00d4O\x00bar"}, "02 46 c3 94 4f 00 ff 62 61 72 00"},
		{"spec/nested", Tuple{Tuple{[]byte("foo\x00bar"), nil, Tuple{}}}, "05 01 66 6f 6f 00 ff 62 61 72 00 00 ff 05 00 00"},
		{"spec/nested empty", Tuple{Tuple{}}, "05 00"},
		{"spec/nested only null", Tuple{Tuple{nil}}, "05 00 ff 00"},
		{"spec/int -5551212", Tuple{-5551212}, "11 ab 4b 93"},
		{"spec/int -1", Tuple{-1}, "13 fe"},

		{"empty tuple", Tuple{}, ""},
		{"int 0", Tuple{0}, "14"},
		{"int 1", Tuple{1}, "15 01"},
		{"int 255", Tuple{255}, "15 ff"},
		{"int 256", Tuple{256}, "16 01 00"},
		{"int 65535", Tuple{65535}, "16 ff ff"},
		{"int 65536", Tuple{65536}, "17 01 00 00"},
		{"int -255", Tuple{-255}, "13 00"},
		{"int -256", Tuple{-256}, "12 fe ff"},
		{"int -65535", Tuple{-65535}, "12 00 00"},
		{"int -65536", Tuple{-65536}, "11 fe ff ff"},
		{"int MaxInt64", Tuple{int64(math.MaxInt64)}, "1c 7f " + ff(7)},
		{"int MinInt64", Tuple{int64(math.MinInt64)}, "0c 7f " + ff(7)},
		{"int MinInt64+1", Tuple{int64(math.MinInt64 + 1)}, "0c 80 " + zeros(7)},
		{"uint 2^63", Tuple{uint64(1 << 63)}, "1c 80 " + zeros(7)},
		{"uint MaxUint64", Tuple{uint64(math.MaxUint64)}, "1c " + ff(8)},
		{"int8 MinInt8", Tuple{int8(math.MinInt8)}, "13 7f"},
		{"uint8 200", Tuple{uint8(200)}, "15 c8"},
		{"int16 MaxInt16", Tuple{int16(math.MaxInt16)}, "16 7f ff"},
		{"int32 MinInt32", Tuple{int32(math.MinInt32)}, "10 7f ff ff ff"},
		{"uint32 MaxUint32", Tuple{uint32(math.MaxUint32)}, "18 ff ff ff ff"},
		{"uint 1", Tuple{uint(1)}, "15 01"},
		{"big 5", Tuple{big.NewInt(5)}, "15 05"},
		{"big 0", Tuple{big.NewInt(0)}, "14"},
		{"big MinInt64", Tuple{big.NewInt(math.MinInt64)}, "0c 7f " + ff(7)},
		{"big -(2^63+1)", Tuple{bigInt("-9223372036854775809")}, "0c 7f " + ff(6) + " fe"},
		{"big -(2^64-1)", Tuple{bigInt("-18446744073709551615")}, "0c " + zeros(8)},
		{"big 2^64", Tuple{pow2(64)}, "1d 09 01 " + zeros(8)},
		{"big -2^64", Tuple{new(big.Int).Neg(pow2(64))}, "0b f6 fe " + ff(8)},
		{"big 2^72-1", Tuple{new(big.Int).Sub(pow2(72), big.NewInt(1))}, "1d 09 " + ff(9)},
		{"big 2^72", Tuple{pow2(72)}, "1d 0a 01 " + zeros(9)},
		{"big -(2^72)", Tuple{new(big.Int).Neg(pow2(72))}, "0b f5 fe " + ff(9)},
		{"big 2^2040-1", Tuple{new(big.Int).Sub(pow2(2040), big.NewInt(1))}, "1d ff " + ff(255)},
		{"big -(2^2040-1)", Tuple{new(big.Int).Sub(big.NewInt(1), pow2(2040))}, "0b 00 " + zeros(255)},
		{"true", Tuple{true}, "27"},
		{"false", Tuple{false}, "26"},
		{"empty string", Tuple{""}, "02 00"},
		{"empty bytes", Tuple{[]byte{}}, "01 00"},
		{"nil bytes", Tuple{[]byte(nil)}, "01 00"},
		{"bytes 00", Tuple{[]byte{0x00}}, "01 00 ff 00"},
		{"bytes ff", Tuple{[]byte{0xff}}, "01 ff 00"},
		{"string 00 00", Tuple{"\x00\x00"}, "02 00 ff 00 ff 00"},
		{"string 00 ff", Tuple{"\x00\xff"}, "02 00 ff ff 00"},
		{"mixed", Tuple{"a", 1, true, nil, []byte("b")}, "02 61 00 15 01 27 00 01 62 00"},
		{"nested in nested", Tuple{Tuple{Tuple{nil}, 1}}, "05 05 00 ff 00 15 01 00"},
		{"nested then null", Tuple{Tuple{"a"}, nil}, "05 02 61 00 00 00"},
		{"nested bytes 00", Tuple{Tuple{[]byte{0}, nil}}, "05 01 00 ff 00 00 ff 00"},
	}
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
