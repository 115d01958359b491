package tuple

import (
	"bytes"
	"fmt"
	"math/big"
	"math/bits"
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// Type codes of the elements this package encodes and decodes. They are
// part of the stable FoundationDB tuple format and never change.
const (
	CodeNull      byte = 0x00 // null at the top level; also ends a nested tuple
	CodeBytes     byte = 0x01 // byte string
	CodeString    byte = 0x02 // UTF-8 string
	CodeNested    byte = 0x05 // nested tuple
	CodeNegBigInt byte = 0x0B // negative integer of 9..255 bytes, length-prefixed
	CodeNegInt8   byte = 0x0C // negative integer of 8 bytes; 0x0D..0x13 hold 7..1 bytes
	CodeIntZero   byte = 0x14 // integer zero; the integer codes are offsets from it
	CodePosInt8   byte = 0x1C // positive integer of 8 bytes; 0x15..0x1B hold 1..7 bytes
	CodePosBigInt byte = 0x1D // positive integer of 9..255 bytes, length-prefixed
	CodeFalse     byte = 0x26 // boolean false
	CodeTrue      byte = 0x27 // boolean true
	EscapeByte    byte = 0xFF // follows 0x00 inside strings; follows a nested null
)

// MaxBigIntBytes is the most bytes an integer's magnitude may take: the
// length byte of the 0x1D and 0x0B forms cannot say more. Integers range over
// [-(2^2040-1), 2^2040-1].
const MaxBigIntBytes = 255

// AppendNull appends a top-level null (0x00) to dst and returns the extended
// slice. Inside a nested tuple use AppendNestedNull instead.
func AppendNull(dst []byte) []byte {
	return append(dst, CodeNull)
}

// AppendNestedNull appends a null inside a nested tuple (0x00 0xFF) to dst
// and returns the extended slice.
func AppendNestedNull(dst []byte) []byte {
	return append(dst, CodeNull, EscapeByte)
}

// AppendBytes appends b as a byte-string element to dst and returns the
// extended slice: 0x01, b with every 0x00 written as 0x00 0xFF, then 0x00.
// A nil b encodes like an empty one. It never allocates when dst has
// BytesLen(b) bytes of spare capacity.
func AppendBytes(dst, b []byte) []byte {
	dst = append(dst, CodeBytes)
	dst = appendEscaped(dst, b)
	return append(dst, 0x00)
}

// AppendString appends s as a string element to dst and returns the extended
// slice: 0x02, the bytes of s with every 0x00 written as 0x00 0xFF, then
// 0x00. It does not check that s is valid UTF-8 (the binding does not
// either). It never allocates when dst has StringLen(s) bytes of spare
// capacity.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, CodeString)
	for {
		i := strings.IndexByte(s, 0x00)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, EscapeByte)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, 0x00)
}

var zeroByte = []byte{0x00}

func appendEscaped(dst, b []byte) []byte {
	for {
		i := bytes.IndexByte(b, 0x00)
		if i < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, EscapeByte)
		b = b[i+1:]
	}
}

// AppendInt appends v as an integer element to dst and returns the extended
// slice: 0x14 for zero, else the type code 0x14±n followed by the n bytes
// (1..8, the fewest that hold |v|) of v big-endian, or of |v|'s one's
// complement when v is negative. It never allocates when dst has IntLen(v)
// bytes of spare capacity.
func AppendInt(dst []byte, v int64) []byte {
	if v >= 0 {
		return AppendUint(dst, uint64(v))
	}
	// For MinInt64 the negation wraps to itself, and uint64 of it is 2^63,
	// which is |v|.
	mag := uint64(-v)
	n := magnitudeLen(mag)
	return appendBigEndian(append(dst, CodeIntZero-byte(n)), ^mag, n)
}

// AppendUint appends v as an integer element to dst and returns the extended
// slice, in exactly the bytes AppendInt writes for the same value. It never
// allocates when dst has UintLen(v) bytes of spare capacity.
func AppendUint(dst []byte, v uint64) []byte {
	n := magnitudeLen(v)
	return appendBigEndian(append(dst, CodeIntZero+byte(n)), v, n)
}

// appendBigEndian appends the low n bytes of v, most significant first.
func appendBigEndian(dst []byte, v uint64, n int) []byte {
	for shift := 8 * (n - 1); shift >= 0; shift -= 8 {
		dst = append(dst, byte(v>>shift))
	}
	return dst
}

// magnitudeLen is the number of bytes needed to hold m: 0 for 0, else 1..8.
func magnitudeLen(m uint64) int {
	return (bits.Len64(m) + 7) / 8
}

// AppendBigInt appends v as an integer element to dst and returns the
// extended slice. Values that fit in 8 bytes get the same bytes as AppendInt
// or AppendUint; wider ones use the length-prefixed forms 0x1D and 0x0B, as
// the binding does. It fails with an error wrapping wire.ErrInvalid, leaving
// dst unchanged, when v is nil or its magnitude needs more than
// MaxBigIntBytes bytes.
func AppendBigInt(dst []byte, v *big.Int) ([]byte, error) {
	if problem := bigIntProblem(v); problem != "" {
		return dst, fmt.Errorf("tuple: %s: %w", problem, wire.ErrInvalid)
	}
	n := (v.BitLen() + 7) / 8
	neg := v.Sign() < 0
	switch {
	case n <= 8 && neg:
		dst = append(dst, CodeIntZero-byte(n))
	case n <= 8:
		dst = append(dst, CodeIntZero+byte(n))
	case neg:
		dst = append(dst, CodeNegBigInt, byte(n)^0xFF)
	default:
		dst = append(dst, CodePosBigInt, byte(n))
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	v.FillBytes(dst[start:]) // writes |v|, zero-padded on the left
	if neg {
		for i := start; i < len(dst); i++ {
			dst[i] ^= 0xFF
		}
	}
	return dst, nil
}

// bigIntProblem says why v cannot be encoded, or returns "" when it can.
func bigIntProblem(v *big.Int) string {
	if v == nil {
		return "nil *big.Int"
	}
	if n := (v.BitLen() + 7) / 8; n > MaxBigIntBytes {
		return fmt.Sprintf("integer magnitude of %d bytes exceeds %d", n, MaxBigIntBytes)
	}
	return ""
}

// AppendBool appends v as a boolean element (0x26 false, 0x27 true) to dst
// and returns the extended slice.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, CodeTrue)
	}
	return append(dst, CodeFalse)
}

// AppendNestedStart appends the start of a nested tuple (0x05) to dst and
// returns the extended slice. The nested elements follow (a null among them
// written with AppendNestedNull), then AppendNestedEnd.
func AppendNestedStart(dst []byte) []byte {
	return append(dst, CodeNested)
}

// AppendNestedEnd appends the terminator of a nested tuple (0x00) to dst and
// returns the extended slice.
func AppendNestedEnd(dst []byte) []byte {
	return append(dst, 0x00)
}

// RangeEnd returns a new slice holding prefix followed by 0xFF: the exclusive
// end of the range of all keys that start with the packed tuple prefix
// (prefix itself sorts first in that range). It holds because no element
// starts with 0xFF. prefix is not modified and the result never shares
// memory with it.
func RangeEnd(prefix []byte) []byte {
	end := make([]byte, len(prefix)+1)
	copy(end, prefix)
	end[len(prefix)] = 0xFF
	return end
}

// StringLen returns the exact number of bytes AppendString writes for s.
func StringLen(s string) int {
	return 2 + len(s) + strings.Count(s, "\x00")
}

// BytesLen returns the exact number of bytes AppendBytes writes for b.
func BytesLen(b []byte) int {
	return 2 + len(b) + bytes.Count(b, zeroByte)
}

// IntLen returns the exact number of bytes AppendInt writes for v (1..9).
func IntLen(v int64) int {
	if v >= 0 {
		return UintLen(uint64(v))
	}
	return 1 + magnitudeLen(uint64(-v))
}

// UintLen returns the exact number of bytes AppendUint writes for v (1..9).
func UintLen(v uint64) int {
	return 1 + magnitudeLen(v)
}
