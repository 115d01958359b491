package codecs

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// refReader is wire.Reader's Uvarint, Len, Bytes and String before their
// fast paths (a change made for these benchmarks): wire.Reader must read
// the same values, stop at the same offsets and fail with the same errors.
type refReader struct {
	buf []byte
	off int
	err error
}

func (r *refReader) failf(field, format string, args ...any) {
	if r.err == nil {
		r.err = &wire.DecodeError{Record: "T", Field: field, Offset: r.off, Reason: fmt.Sprintf(format, args...)}
	}
}

func (r *refReader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf)-r.off {
		r.failf(field, "truncated: need %d bytes, have %d", n, len(r.buf)-r.off)
		return nil
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *refReader) Uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	if r.off < len(r.buf) && r.buf[r.off] < 0x80 {
		v := r.buf[r.off]
		r.off++
		return uint64(v)
	}
	v, n := binary.Uvarint(r.buf[r.off:])
	switch {
	case n == 0:
		r.failf(field, "truncated length")
		return 0
	case n < 0:
		r.failf(field, "length overflows 64 bits")
		return 0
	case r.buf[r.off+n-1] == 0:
		r.failf(field, "non-canonical length encoding")
		return 0
	}
	r.off += n
	return v
}

func (r *refReader) Len(field string, max, minElem int) int {
	v := r.Uvarint(field)
	if r.err != nil {
		return 0
	}
	if v > uint64(max) {
		r.failf(field, "length %d over its bound %d", v, max)
		return 0
	}
	if minElem > 0 && v > uint64((len(r.buf)-r.off)/minElem) {
		r.failf(field, "truncated: length %d, %d bytes left", v, len(r.buf)-r.off)
		return 0
	}
	return int(v)
}

func (r *refReader) Bytes(field string, max int) []byte {
	n := r.Len(field, max, 1)
	if r.err != nil {
		return nil
	}
	return r.take(field, n)
}

func (r *refReader) String(field string, max int) string {
	n := r.Len(field, max, 1)
	if r.err != nil || n == 0 {
		return ""
	}
	return string(r.take(field, n))
}

// TestReaderMatchesReference runs the same random reads over random
// inputs, rich in one- to three-byte varints (including non-canonical,
// truncated and overlong ones), through both readers.
func TestReaderMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	varint := func(b []byte) []byte {
		switch rng.IntN(8) {
		case 0:
			return append(b, byte(rng.IntN(0x80)))
		case 1:
			return binary.AppendUvarint(b, uint64(rng.IntN(1<<14)))
		case 2:
			return binary.AppendUvarint(b, uint64(rng.IntN(1<<21)))
		case 3:
			return append(b, byte(0x80|rng.IntN(0x80)), 0) // non-canonical
		case 4:
			return append(b, byte(0x80|rng.IntN(0x80))) // truncated when last
		case 5:
			return append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f) // overflow
		default:
			return append(b, byte(rng.IntN(256)))
		}
	}
	for iter := range 300_000 {
		var in []byte
		for n := rng.IntN(6); n > 0; n-- {
			in = varint(in)
			for k := rng.IntN(12); k > 0; k-- {
				in = append(in, byte(rng.IntN(256)))
			}
		}
		got := wire.NewReader(in, "T")
		want := refReader{buf: in}
		for step := 0; step < 8 && want.err == nil; step++ {
			max := []int{0, 1, 5, 127, 128, 300, 1 << 20}[rng.IntN(7)]
			var g, w string
			switch op := rng.IntN(4); op {
			case 0:
				g, w = fmt.Sprint(got.Uvarint("f")), fmt.Sprint(want.Uvarint("f"))
			case 1:
				minElem := rng.IntN(4)
				g, w = fmt.Sprint(got.Len("f", max, minElem)), fmt.Sprint(want.Len("f", max, minElem))
			case 2:
				gb, wb := got.Bytes("f", max), want.Bytes("f", max)
				g, w = fmt.Sprintf("%x %v", gb, gb == nil), fmt.Sprintf("%x %v", wb, wb == nil)
			case 3:
				g, w = got.String("f", max), want.String("f", max)
			}
			if g != w || got.Offset() != want.off || fmt.Sprint(got.Err()) != fmt.Sprint(want.err) {
				t.Fatalf("iteration %d step %d on %x: got %q at %d (%v), want %q at %d (%v)",
					iter, step, in, g, got.Offset(), got.Err(), w, want.off, want.err)
			}
		}
	}
}
