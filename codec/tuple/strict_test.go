package tuple

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// malformedVectors are byte strings no tuple packs to: truncated elements,
// non-canonical integers, and type codes this package does not decode.
var malformedVectors = []struct {
	name string
	hex  string
}{
	{"bytes without terminator", "01 61 62"},
	{"bytes code only", "01"},
	{"bytes ending in escape", "01 61 00 ff"},
	{"bytes ending in zero of an escape", "01 00 ff 61 00 ff"},
	{"string without terminator", "02 61"},
	{"string code only", "02"},
	{"second element truncated", "02 61 00 01 62"},
	{"int 1 byte truncated", "15"},
	{"int 2 bytes truncated", "16 01"},
	{"int 8 bytes truncated", "1c ff ff ff ff ff ff ff"},
	{"negative int truncated", "13"},
	{"negative 8 bytes truncated", "0c 7f"},
	{"big int without length", "1d"},
	{"big int truncated", "1d 09 01 00 00"},
	{"negative big int without length", "0b"},
	{"negative big int truncated", "0b f6 fe ff"},
	{"nested without terminator", "05"},
	{"nested element without terminator", "05 15 01"},
	{"nested bytes then end of input", "05 01 61 00"},
	{"nested null then end of input", "05 00 ff"},
	{"inner nested unterminated", "05 05 00"},
	{"int 1 with leading zero", "16 00 01"},
	{"int 0 as one byte", "15 00"},
	{"int 8 bytes with leading zero", "1c 00 ff ff ff ff ff ff ff"},
	{"negative zero", "13 ff"},
	{"int -1 with leading ff", "12 ff fe"},
	{"negative 8 bytes with leading ff", "0c ff 00 00 00 00 00 00 00"},
	{"big int form for 8 bytes", "1d 08 ff ff ff ff ff ff ff ff"},
	{"big int form for 0 bytes", "1d 00"},
	{"big int with leading zero", "1d 09 00 ff ff ff ff ff ff ff ff"},
	{"negative big int form for 8 bytes", "0b f7 00 00 00 00 00 00 00 00"},
	{"negative big int form for 0 bytes", "0b ff"},
	{"negative big int with leading ff", "0b f6 ff 00 00 00 00 00 00 00 00"},
	{"deprecated nested start", "03 04"},
	{"deprecated nested end", "04"},
	{"reserved negative big int", "0a 01"},
	{"reserved positive big int", "1e 01"},
	{"float", "20 80 00 00 00"},
	{"double", "21 80 00 00 00 00 00 00 00"},
	{"deprecated true", "25"},
	{"UUID", "30 " + strings.Repeat("00 ", 16)},
	{"versionstamp", "33 " + strings.Repeat("00 ", 12)},
	{"user type", "40"},
	{"escape byte as type code", "ff"},
	{"null followed by escape at top level", "00 ff"},
	{"escape byte after nested tuple", "05 00 ff"},
	{"nested deeper than MaxDepth", strings.Repeat("05 ", MaxDepth+1) + strings.Repeat("00 ", MaxDepth+1)},
}

func TestUnpackRejectsMalformed(t *testing.T) {
	for _, v := range malformedVectors {
		t.Run(v.name, func(t *testing.T) {
			in := unhex(v.hex)
			got, err := Unpack(in)
			if !errors.Is(err, wire.ErrCorrupt) {
				t.Fatalf("Unpack(% x) = %#v, %v; want an error wrapping wire.ErrCorrupt", in, got, err)
			}
			if strings.HasPrefix(v.name, "nested deeper") {
				return // MaxDepth bounds Unpack's recursion; a Reader has none to bound
			}
			r := NewReader(in)
			if got, err := readWithAPI(&r); !errors.Is(err, wire.ErrCorrupt) {
				t.Fatalf("Reader read %#v, %v; want an error wrapping wire.ErrCorrupt", got, err)
			}
		})
	}
}

// TestUnpackAcceptsMaxDepth pins the nesting limit from the other side.
func TestUnpackAcceptsMaxDepth(t *testing.T) {
	in := unhex(strings.Repeat("05 ", MaxDepth) + strings.Repeat("00 ", MaxDepth))
	got, err := Unpack(in)
	if err != nil {
		t.Fatalf("Unpack of %d nested tuples: %v", MaxDepth, err)
	}
	if again := mustPack(t, got); !bytes.Equal(again, in) {
		t.Fatal("re-packing the deepest accepted tuple changed it")
	}
}

// TestReaderRejects covers failures that depend on which method is called:
// each input is well-formed, but not what the method reads.
func TestReaderRejects(t *testing.T) {
	readInt := func(r *Reader) error { _, err := r.ReadInt(); return err }
	readUint := func(r *Reader) error { _, err := r.ReadUint(); return err }
	readBigInt := func(r *Reader) error { _, err := r.ReadBigInt(); return err }
	readBytes := func(r *Reader) error { _, err := r.ReadBytes(); return err }
	readString := func(r *Reader) error { _, err := r.ReadString(); return err }
	readBool := func(r *Reader) error { _, err := r.ReadBool(); return err }
	readNull := func(r *Reader) error { return r.ReadNull() }
	enter := func(r *Reader) error { return r.EnterNested() }
	exit := func(r *Reader) error { return r.ExitNested() }

	tests := []struct {
		name   string
		hex    string
		nested bool // call EnterNested first
		op     func(*Reader) error
		msg    string // part of the error message
	}{
		{"ReadInt over MaxInt64", "1c 80 00 00 00 00 00 00 00", false, readInt, "offset 0: expected integer within int64, found 9223372036854775808"},
		{"ReadInt under MinInt64", "0c 7f ff ff ff ff ff ff fe", false, readInt, "found -9223372036854775809"},
		{"ReadInt 9 bytes", "1d 09 01 00 00 00 00 00 00 00 00", false, readInt, "found 9-byte integer"},
		{"ReadInt negative 9 bytes", "0b f6 fe ff ff ff ff ff ff ff ff", false, readInt, "found 9-byte integer"},
		{"ReadInt string", "02 61 00", false, readInt, "expected integer, found string (type code 0x02)"},
		{"ReadInt empty", "", false, readInt, "expected integer, found end of input"},
		{"ReadInt non-canonical", "15 00", false, readInt, "offset 1: non-canonical integer"},
		{"ReadUint negative", "13 fe", false, readUint, "found negative integer"},
		{"ReadUint 9 bytes", "1d 09 01 00 00 00 00 00 00 00 00", false, readUint, "expected integer within uint64"},
		{"ReadUint negative 9 bytes", "0b f6 fe ff ff ff ff ff ff ff ff", false, readUint, "found negative integer"},
		{"ReadUint bool", "27", false, readUint, "expected unsigned integer, found true (type code 0x27)"},
		{"ReadBigInt bytes", "01 00", false, readBigInt, "expected integer, found bytes"},
		{"ReadBigInt non-canonical", "1d 08 ff ff ff ff ff ff ff ff", false, readBigInt, "length 8 under type code 0x1d"},
		{"ReadBytes string", "02 61 00", false, readBytes, "expected bytes, found string"},
		{"ReadBytes truncated", "01 61", false, readBytes, "expected bytes terminated by 0x00, found end of input at offset 2"},
		{"ReadString bytes", "01 61 00", false, readString, "expected string, found bytes"},
		{"ReadBool deprecated true", "25", false, readBool, "expected boolean, found deprecated true (type code 0x25)"},
		{"ReadBool int", "14", false, readBool, "expected boolean, found integer"},
		{"ReadNull int", "14", false, readNull, "expected null, found integer"},
		{"ReadNull empty", "", false, readNull, "expected null, found end of input"},
		{"ReadNull at nested end", "05 00", true, readNull, "offset 1: expected null (0x00 0xFF), found end of nested tuple (0x00)"},
		{"EnterNested deprecated", "03 04", false, enter, "expected nested tuple, found deprecated nested tuple (type code 0x03)"},
		{"EnterNested empty", "", false, enter, "expected nested tuple, found end of input"},
		{"ExitNested at top level", "00", false, exit, "outside any nested tuple"},
		{"ExitNested on null", "05 00 ff 00", true, exit, "expected end of nested tuple (0x00), found null (0x00 0xFF)"},
		{"ExitNested on element", "05 15 01 00", true, exit, "found integer (type code 0x15)"},
		{"ExitNested at end of input", "05", true, exit, "found end of input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(unhex(tt.hex))
			if tt.nested {
				if err := r.EnterNested(); err != nil {
					t.Fatalf("EnterNested: %v", err)
				}
			}
			offset, depth := r.Offset(), r.Depth()
			err := tt.op(&r)
			if !errors.Is(err, wire.ErrCorrupt) {
				t.Fatalf("got %v, want an error wrapping wire.ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
			if r.Offset() != offset || r.Depth() != depth {
				t.Fatalf("failed call moved the Reader from offset %d depth %d to %d, %d", offset, depth, r.Offset(), r.Depth())
			}
			if again := tt.op(&r); again == nil || again.Error() != err.Error() {
				t.Fatalf("second call gave %v, first %v", again, err)
			}
		})
	}
}

func TestReaderDoesNotAdvanceOnError(t *testing.T) {
	in := unhex("02 61 00 15 00")
	r := NewReader(in)
	if _, err := r.ReadString(); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { _, err := r.ReadInt(); return err },
		func() error { _, err := r.ReadUint(); return err },
		func() error { _, err := r.ReadBigInt(); return err },
		func() error { _, err := r.ReadBytes(); return err },
		func() error { _, err := r.ReadString(); return err },
		func() error { _, err := r.ReadBool(); return err },
		r.ReadNull, r.EnterNested, r.ExitNested,
	} {
		if err := op(); err == nil {
			t.Fatal("a read of a non-canonical integer succeeded")
		}
		if r.Offset() != 3 || r.Depth() != 0 || !bytes.Equal(r.Rest(), in[3:]) {
			t.Fatalf("failed read moved the Reader to offset %d, depth %d", r.Offset(), r.Depth())
		}
	}
	if code, ok := r.Peek(); !ok || code != 0x15 {
		t.Fatalf("Peek = %#x, %v; want 0x15, true", code, ok)
	}
}

func TestReaderZeroValue(t *testing.T) {
	var r Reader
	if !r.Done() || r.Offset() != 0 || len(r.Rest()) != 0 || r.AtNestedEnd() {
		t.Fatal("zero Reader is not an empty input")
	}
	if _, ok := r.Peek(); ok {
		t.Fatal("Peek on empty input reported a type code")
	}
	if _, err := r.ReadInt(); !errors.Is(err, wire.ErrCorrupt) {
		t.Fatalf("ReadInt on empty input: %v", err)
	}
}

func TestReadBytesSharesInputOnlyWithoutEscapes(t *testing.T) {
	in := unhex("01 61 62 00 01 61 00 ff 62 00")
	r := NewReader(in)
	plain, err := r.ReadBytes()
	if err != nil {
		t.Fatal(err)
	}
	if &plain[0] != &in[1] {
		t.Fatal("ReadBytes copied an element without escapes")
	}
	if cap(plain) != len(plain) {
		t.Fatalf("ReadBytes result has capacity %d beyond its length %d: appending would overwrite the input", cap(plain), len(plain))
	}
	escaped, err := r.ReadBytes()
	if err != nil {
		t.Fatal(err)
	}
	if string(escaped) != "a\x00b" {
		t.Fatalf("ReadBytes = %q, want %q", escaped, "a\x00b")
	}
	escaped[0] = 'x'
	if in[5] != 'a' {
		t.Fatal("ReadBytes of an escaped element shares memory with the input")
	}
}

func TestPackRejectsInvalid(t *testing.T) {
	cyclic := Tuple{1, nil}
	cyclic[1] = cyclic
	tooDeep := Tuple{}
	for i := 0; i <= MaxDepth; i++ {
		tooDeep = Tuple{tooDeep} // MaxDepth+1 nested tuples in the end
	}
	tests := []struct {
		name  string
		tuple Tuple
		msg   string
	}{
		{"float64", Tuple{1.5}, "element 0: unsupported type float64"},
		{"float32 nested", Tuple{"a", Tuple{nil, float32(1)}}, "element 1.1: unsupported type float32"},
		{"struct", Tuple{struct{}{}}, "unsupported type struct {}"},
		{"int slice", Tuple{[]int{1}}, "unsupported type []int"},
		{"big.Int value", Tuple{*big.NewInt(1)}, "unsupported type big.Int"},
		{"nil big.Int", Tuple{1, (*big.Int)(nil)}, "element 1: nil *big.Int"},
		{"big 2^2040", Tuple{pow2(2040)}, "integer magnitude of 256 bytes exceeds 255"},
		{"big -2^2040", Tuple{new(big.Int).Neg(pow2(2040))}, "integer magnitude of 256 bytes exceeds 255"},
		{"cyclic", cyclic, "nesting deeper than 1000"},
		{"too deep", tooDeep, "nesting deeper than 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			packed, err := Pack(tt.tuple)
			if !errors.Is(err, wire.ErrInvalid) {
				t.Fatalf("Pack gave %d bytes, error %v; want an error wrapping wire.ErrInvalid", len(packed), err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
			dst := []byte{0xAA}
			out, err := AppendTuple(dst, tt.tuple)
			if err == nil || !bytes.Equal(out, dst) {
				t.Fatalf("AppendTuple on error = % x, %v; want the original dst and an error", out, err)
			}
		})
	}
	if _, err := Pack(tooDeep[0].(Tuple)); err != nil {
		t.Fatalf("Pack of a tuple nested exactly MaxDepth deep: %v", err)
	}
}

func TestAppendBigIntRejects(t *testing.T) {
	dst := []byte{1, 2}
	for _, v := range []*big.Int{nil, pow2(2040), new(big.Int).Neg(pow2(2040))} {
		out, err := AppendBigInt(dst, v)
		if !errors.Is(err, wire.ErrInvalid) || !bytes.Equal(out, dst) {
			t.Errorf("AppendBigInt(%v) = % x, %v; want dst unchanged and wire.ErrInvalid", v, out, err)
		}
	}
	out, err := AppendBigInt(nil, big.NewInt(math.MinInt64))
	if err != nil || !bytes.Equal(out, AppendInt(nil, math.MinInt64)) {
		t.Errorf("AppendBigInt(MinInt64) = % x, %v; want AppendInt's bytes", out, err)
	}
}

func TestCompareUnsupportedSortsLast(t *testing.T) {
	tests := []struct {
		a, b Tuple
		want int
	}{
		{Tuple{true}, Tuple{1.5}, -1},
		{Tuple{1.5}, Tuple{struct{}{}}, 0},
		{Tuple{(*big.Int)(nil)}, Tuple{Tuple{}}, 1},
		{Tuple{1.5, 1}, Tuple{2.5, 2}, -1},
	}
	for _, tt := range tests {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%#v, %#v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
