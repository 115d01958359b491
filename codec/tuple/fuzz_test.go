package tuple

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// fuzzSeeds are the golden encodings and the malformed vectors, except the
// few over 512 bytes: the fuzzer minimizes every new interesting input for
// up to a minute, and inputs grown from a 2,000-byte seed stall it.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, v := range goldenVectors() {
		seeds = append(seeds, unhex(v.hex))
	}
	for _, v := range malformedVectors {
		seeds = append(seeds, unhex(v.hex))
	}
	small := seeds[:0]
	for _, s := range seeds {
		if len(s) <= 512 {
			small = append(small, s)
		}
	}
	return small
}

// FuzzUnpack checks that Unpack never panics, fails only with
// wire.ErrCorrupt, and accepts only canonical bytes: whatever it decodes
// packs back to exactly the input. The Reader must agree with it, and
// Check must accept what it accepts, count its elements and fail with its
// error.
func FuzzUnpack(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tup, err := Unpack(in)
		if n, cerr := Check(in); fmt.Sprint(cerr) != fmt.Sprint(err) || (err == nil && n != len(tup)) {
			t.Fatalf("Check(% x) = %d, %v; Unpack gave %d elements, %v", in, n, cerr, len(tup), err)
		}
		if err != nil {
			if !errors.Is(err, wire.ErrCorrupt) {
				t.Fatalf("Unpack(% x): error %v does not wrap wire.ErrCorrupt", in, err)
			}
			return
		}
		packed, err := Pack(tup)
		if err != nil {
			t.Fatalf("Pack(Unpack(% x)) = %v", in, err)
		}
		if !bytes.Equal(packed, in) {
			t.Fatalf("Unpack accepted non-canonical % x; it packs back to % x", in, packed)
		}
		if Compare(tup, tup) != 0 {
			t.Fatalf("Compare(t, t) != 0 for %#v", tup)
		}
		r := NewReader(in)
		viaReader, err := readWithAPI(&r)
		if err != nil || !r.Done() || !equalTuple(viaReader, tup) {
			t.Fatalf("Reader on % x read %#v, %v (stopped at %d); Unpack gave %#v", in, viaReader, err, r.Offset(), tup)
		}
	})
}

// FuzzReader drives a Reader over arbitrary bytes with an arbitrary
// sequence of method calls. It checks that no call panics, that a failed
// call wraps wire.ErrCorrupt and leaves the Reader where it was, and that
// re-encoding everything read with the matching Append function reproduces
// exactly the bytes consumed so far.
func FuzzReader(f *testing.F) {
	ops := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, seed := range fuzzSeeds() {
		f.Add(seed, ops)
	}
	f.Add(unhex("05 00 ff 15 01 00 27"), []byte{6, 10, 0, 3, 7, 5})
	f.Add(unhex("02 61 00 ff 00 1c 80 00 00 00 00 00 00 00"), []byte{2, 3, 4})
	f.Fuzz(func(t *testing.T, in, ops []byte) {
		r := NewReader(in)
		var out []byte
		for _, op := range ops {
			offset, depth := r.Offset(), r.Depth()
			var err error
			switch op % 11 {
			case 0:
				if err = r.ReadNull(); err == nil && depth == 0 {
					out = AppendNull(out)
				} else if err == nil {
					out = AppendNestedNull(out)
				}
			case 1:
				var b []byte
				if b, err = r.ReadBytes(); err == nil {
					out = AppendBytes(out, b)
				}
			case 2:
				var s string
				twin := r // ReadStringBytes must read what ReadString reads
				raw, rawErr := twin.ReadStringBytes()
				if s, err = r.ReadString(); err == nil {
					out = AppendString(out, s)
				}
				if (err == nil) != (rawErr == nil) || string(raw) != s || twin.Offset() != r.Offset() {
					t.Fatalf("ReadStringBytes %q, %v at %d; ReadString %q, %v at %d", raw, rawErr, twin.Offset(), s, err, r.Offset())
				}
			case 3:
				var v int64
				if v, err = r.ReadInt(); err == nil {
					out = AppendInt(out, v)
				}
			case 4:
				var v uint64
				if v, err = r.ReadUint(); err == nil {
					out = AppendUint(out, v)
				}
			case 5:
				var v bool
				if v, err = r.ReadBool(); err == nil {
					out = AppendBool(out, v)
				}
			case 6:
				if err = r.EnterNested(); err == nil {
					out = AppendNestedStart(out)
				}
			case 7:
				atEnd := r.AtNestedEnd()
				if err = r.ExitNested(); err == nil {
					out = AppendNestedEnd(out)
				}
				if atEnd != (err == nil) {
					t.Fatalf("AtNestedEnd() = %v but ExitNested() = %v at offset %d of % x", atEnd, err, offset, in)
				}
			case 8:
				b, err2 := r.ReadBigInt()
				if err = err2; err == nil {
					if out, err2 = AppendBigInt(out, b); err2 != nil {
						t.Fatalf("AppendBigInt(ReadBigInt()) = %v", err2)
					}
				}
			case 9:
				code, ok := r.Peek()
				if ok == r.Done() || (ok && code != in[offset]) {
					t.Fatalf("Peek() = %#x, %v at offset %d of % x", code, ok, offset, in)
				}
			case 10:
				if !bytes.Equal(r.Rest(), in[offset:]) {
					t.Fatalf("Rest() = % x at offset %d of % x", r.Rest(), offset, in)
				}
			}
			if err != nil {
				if !errors.Is(err, wire.ErrCorrupt) {
					t.Fatalf("op %d: error %v does not wrap wire.ErrCorrupt", op%11, err)
				}
				if r.Offset() != offset || r.Depth() != depth {
					t.Fatalf("op %d failed but moved the Reader from %d/%d to %d/%d", op%11, offset, depth, r.Offset(), r.Depth())
				}
			}
			if !bytes.Equal(out, in[:r.Offset()]) {
				t.Fatalf("after op %d: re-encoded % x, consumed % x", op%11, out, in[:r.Offset()])
			}
		}
	})
}
