package wire

import "encoding/binary"

// Design note: the fast path. A generated DecodeX first decodes its bytes
// in one straight-line pass that keeps the input and the offset in local
// variables (fastDecodeX and fastReadX in the generated code). Only when
// that pass meets anything it does not accept are the bytes decoded again,
// from the start, with a Reader, whose sticky error names the record,
// field, offset and reason. The pass accepts exactly what the Reader path
// accepts, with every check (the generated tests hold the two paths to
// the same result on mutated encodings of every record); it only spends no
// method calls, field names, or loads and stores of a Reader's state on
// well-formed bytes. It reads identity names with NameAt, through the
// same Intern tables; unions and runs of strings, which share the
// Reader's interning and allocation, it reads with a Reader over the bytes
// left. The functions below are its reads of lengths and counts.

// ShortLen reads the length or count that starts at b[at] when it is a
// canonical one- or two-byte uvarint (under 16384) of at most max, and
// returns it and the offset after it; otherwise next is -1 (LenAt reads
// the rest). Whether the bytes left hold what it counts is the caller's
// check. It inlines.
func ShortLen(b []byte, at, max int) (n, next int) {
	if uint(at) >= uint(len(b)) {
		return 0, -1
	}
	n = int(b[at])
	if n >= 0x80 {
		if uint(at+1) >= uint(len(b)) || b[at+1]-1 >= 0x7f {
			return 0, -1
		}
		n = n&0x7f | int(b[at+1])<<7
		at++
	}
	if n > max {
		return 0, -1
	}
	return n, at + 1
}

// LenAt reads the canonical uvarint length or count that starts at b[at]
// and returns it and the offset after it. next is -1 when the varint is
// truncated, overflows 64 bits, is not in its shortest form or exceeds
// max; whether the bytes left hold what it counts is the caller's check.
// It is the fast path's Reader.Len, for lengths ShortLen does not read.
func LenAt(b []byte, at, max int) (n, next int) {
	if at < 0 || at >= len(b) {
		return 0, -1
	}
	v, w := binary.Uvarint(b[at:])
	if w <= 0 || w > 1 && b[at+w-1] == 0 || v > uint64(max) {
		return 0, -1
	}
	return int(v), at + w
}
