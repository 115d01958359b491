package wire

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Reader decodes one record's bytes field by field with a sticky error:
// after the first failure every read returns a zero value and Err reports
// that failure, so generated decoders check once at the end. It never
// panics and never allocates more than the input can hold: a length or
// count is checked against both its declared bound and the bytes left
// before anything is sliced or allocated.
//
// Byte slices returned by Bytes alias the input: they are valid while the
// input is unchanged.
type Reader struct {
	buf    []byte
	off    int
	record string
	err    error
}

// NewReader returns a Reader over b for the named record.
func NewReader(b []byte, record string) Reader { return Reader{buf: b, record: record} }

// Err returns the first failure, or nil.
func (r *Reader) Err() error { return r.err }

// Offset is the number of bytes consumed.
func (r *Reader) Offset() int { return r.off }

// Failf records a failure of field (first failure wins).
func (r *Reader) Failf(field, format string, args ...any) {
	if r.err == nil {
		r.err = &DecodeError{Record: r.record, Field: field, Offset: r.off, Reason: fmt.Sprintf(format, args...)}
	}
}

// FailErr records a failure of field caused by err, which usually is a
// rule violation (ErrInvalid) found by a record's checker; the result
// wraps ErrCorrupt either way.
func (r *Reader) FailErr(field string, err error) {
	if r.err != nil || err == nil {
		return
	}
	if re, ok := err.(*RuleError); ok {
		if re.Field != "" {
			field = joinField(field, re.Field)
		}
		r.err = &DecodeError{Record: r.record, Field: field, Offset: r.off, Reason: re.Reason}
		return
	}
	r.err = &DecodeError{Record: r.record, Field: field, Offset: r.off, Reason: err.Error()}
}

func joinField(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func (r *Reader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf)-r.off {
		r.Failf(field, "truncated: need %d bytes, have %d", n, len(r.buf)-r.off)
		return nil
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// Version reads the version byte and fails unless it equals want.
func (r *Reader) Version(want uint8) {
	if v := r.U8("version"); r.err == nil && v != want {
		r.Failf("version", "unknown version %d (want %d)", v, want)
	}
}

// U8 reads one byte.
func (r *Reader) U8(field string) uint8 {
	if r.err != nil || r.off >= len(r.buf) {
		r.take(field, 1)
		return 0
	}
	v := r.buf[r.off]
	r.off++
	return v
}

// U16 reads a big-endian uint16.
func (r *Reader) U16(field string) uint16 {
	b := r.take(field, 2)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// U32 reads a big-endian uint32.
func (r *Reader) U32(field string) uint32 {
	b := r.take(field, 4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// U64 reads a big-endian uint64.
func (r *Reader) U64(field string) uint64 {
	if r.err != nil || len(r.buf)-r.off < 8 {
		r.take(field, 8)
		return 0
	}
	v := binary.BigEndian.Uint64(r.buf[r.off:])
	r.off += 8
	return v
}

// I64 reads a big-endian two's-complement int64.
func (r *Reader) I64(field string) int64 { return int64(r.U64(field)) }

// Bool reads a byte that must be 0 or 1.
func (r *Reader) Bool(field string) bool {
	switch v := r.U8(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.Failf(field, "boolean byte %d", v)
		return false
	}
}

// Present reads an option's presence byte (0 absent, 1 present).
func (r *Reader) Present(field string) bool { return r.Bool(field) }

// Uvarint reads a canonical (shortest-form) unsigned varint.
func (r *Reader) Uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	// Fast paths for the one- and two-byte forms, every length and count
	// under 16384; a zero second byte is non-canonical, left to
	// uvarintSlow to report.
	if off := r.off; off < len(r.buf) && r.buf[off] < 0x80 {
		r.off++
		return uint64(r.buf[off])
	} else if off+1 < len(r.buf) && r.buf[off+1]-1 < 0x7f {
		r.off += 2
		return uint64(r.buf[off]&0x7f) | uint64(r.buf[off+1])<<7
	}
	return r.uvarintSlow(field)
}

// uvarintSlow is Uvarint for every other form, and its failures.
func (r *Reader) uvarintSlow(field string) uint64 {
	v, n := binary.Uvarint(r.buf[r.off:])
	switch {
	case n == 0:
		r.Failf(field, "truncated length")
		return 0
	case n < 0:
		r.Failf(field, "length overflows 64 bits")
		return 0
	case r.buf[r.off+n-1] == 0:
		r.Failf(field, "non-canonical length encoding")
		return 0
	}
	r.off += n
	return v
}

// Len reads a length or count and fails when it exceeds max or the bytes
// left (each element takes at least minElem bytes).
func (r *Reader) Len(field string, max, minElem int) int {
	// Fast path: a one-byte length that passes both checks (v <= left/m
	// is v*m <= left, which cannot overflow for v < 128, m <= 1<<16).
	if off := r.off; r.err == nil && off < len(r.buf) && 1 <= minElem && minElem <= 1<<16 {
		if v := int(r.buf[off]); v < 0x80 && v <= max && v*minElem <= len(r.buf)-off-1 {
			r.off++
			return v
		}
	}
	return r.lenSlow(field, max, minElem)
}

// lenSlow is Len for every other length, and its failures.
func (r *Reader) lenSlow(field string, max, minElem int) int {
	v := r.Uvarint(field)
	if r.err != nil {
		return 0
	}
	if v > uint64(max) {
		r.Failf(field, "length %d over its bound %d", v, max)
		return 0
	}
	if minElem > 0 && v > uint64((len(r.buf)-r.off)/minElem) {
		r.Failf(field, "truncated: length %d, %d bytes left", v, len(r.buf)-r.off)
		return 0
	}
	return int(v)
}

// shortLen is the fast path of a length prefix: when the next length is
// a canonical one- or two-byte uvarint (under 16384), at most max and
// within the bytes left, it returns where the bytes start and the length;
// otherwise start is -1 and nothing is consumed.
func (r *Reader) shortLen(max int) (start, n int) {
	if r.err != nil {
		return -1, 0
	}
	if n, start = ShortLen(r.buf, r.off, max); start < 0 || n > len(r.buf)-start {
		return -1, 0
	}
	return start, n
}

// Bytes reads a length-prefixed byte string of at most max bytes. The
// result aliases the input; it is non-nil, even when empty.
func (r *Reader) Bytes(field string, max int) []byte {
	// Fast path: a one- or two-byte length within max and the bytes left.
	if start, n := r.shortLen(max); start >= 0 {
		end := start + n
		r.off = end
		return r.buf[start:end:end]
	}
	n := r.lenSlow(field, max, 1)
	if r.err != nil {
		return nil
	}
	// lenSlow checked n against the bytes left.
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// String reads a length-prefixed string of at most max bytes.
func (r *Reader) String(field string, max int) string {
	// Fast path: a one- or two-byte length within max and the bytes left.
	if start, n := r.shortLen(max); start >= 0 {
		r.off = start + n
		return string(r.buf[start:r.off])
	}
	n := r.lenSlow(field, max, 1)
	if r.err != nil || n == 0 {
		return ""
	}
	// lenSlow checked n against the bytes left.
	s := string(r.buf[r.off : r.off+n])
	r.off += n
	return s
}

// Strings reads len(dst) consecutive length-prefixed strings, the i-th
// named fields[i] and of at most maxes[i] bytes, into dst with one
// allocation: the strings share one copy of their bytes (with the length
// prefixes between them), so a record's run of names costs one allocation
// instead of one each. On failure dst is cleared.
func (r *Reader) Strings(dst []string, fields []string, maxes []int) {
	start := r.off
	for i := range dst {
		r.off += r.Len(fields[i], maxes[i], 1)
	}
	if r.err != nil {
		clear(dst)
		return
	}
	// Every length was read and checked above, so the second pass over
	// the copy re-reads canonical varints that fit.
	all := string(r.buf[start:r.off])
	p := 0
	for i := range dst {
		n, w := uvarintString(all[p:])
		p += w
		dst[i] = all[p : p+int(n)]
		p += int(n)
	}
}

// uvarintString decodes the uvarint that opens s, which Strings has
// already checked, and its width.
func uvarintString(s string) (uint64, int) {
	var v uint64
	for i := 0; i < len(s); i++ {
		if s[i] < 0x80 {
			return v | uint64(s[i])<<(7*i), i + 1
		}
		v |= uint64(s[i]&0x7f) << (7 * i)
	}
	return 0, len(s)
}

// The Match methods advance past the next value when it encodes v, and
// report whether it did; otherwise they consume nothing and record no
// failure. Decoders use them to keep a value they already hold when the
// bytes encode it again.

// MatchU8 matches the byte v.
func (r *Reader) MatchU8(v uint8) bool {
	if r.err == nil && r.off < len(r.buf) && r.buf[r.off] == v {
		r.off++
		return true
	}
	return false
}

// MatchBool matches the encoding of v.
func (r *Reader) MatchBool(v bool) bool {
	if v {
		return r.MatchU8(1)
	}
	return r.MatchU8(0)
}

// MatchU16 matches the big-endian v.
func (r *Reader) MatchU16(v uint16) bool {
	if r.err == nil && len(r.buf)-r.off >= 2 && binary.BigEndian.Uint16(r.buf[r.off:]) == v {
		r.off += 2
		return true
	}
	return false
}

// MatchU32 matches the big-endian v.
func (r *Reader) MatchU32(v uint32) bool {
	if r.err == nil && len(r.buf)-r.off >= 4 && binary.BigEndian.Uint32(r.buf[r.off:]) == v {
		r.off += 4
		return true
	}
	return false
}

// MatchU64 matches the big-endian v.
func (r *Reader) MatchU64(v uint64) bool {
	if r.err == nil && len(r.buf)-r.off >= 8 && binary.BigEndian.Uint64(r.buf[r.off:]) == v {
		r.off += 8
		return true
	}
	return false
}

// MatchString matches the length-prefixed s (of fewer than 16384 bytes:
// a longer s never matches).
func (r *Reader) MatchString(s string) bool {
	if start, n := r.shortLen(len(s)); start >= 0 && n == len(s) && string(r.buf[start:start+n]) == s {
		r.off = start + n
		return true
	}
	return false
}

// Fixed fills dst with the next len(dst) bytes.
func (r *Reader) Fixed(field string, dst []byte) {
	if b := r.take(field, len(dst)); b != nil {
		copy(dst, b)
	}
}

// Finish fails on trailing bytes and returns the first failure.
func (r *Reader) Finish() error {
	if r.err == nil && r.off != len(r.buf) {
		r.Failf("", "%d trailing bytes", len(r.buf)-r.off)
	}
	return r.err
}

// DecodeError describes bytes that do not decode as a record. It wraps
// ErrCorrupt.
type DecodeError struct {
	Record string // the record or key class
	Field  string // the field path, empty for the record as a whole
	Offset int    // bytes consumed before the failure
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("decode %s: %s: %v", e.path(), e.Reason, ErrCorrupt)
	}
	return fmt.Sprintf("decode %s at offset %d: %s: %v", e.path(), e.Offset, e.Reason, ErrCorrupt)
}

// path is the record and the field path, the record named once: a
// reader's field paths start with the type that declares the field
// ("RelayV1.Target", "RelayPut.Key"), a checker's do not ("Target").
func (e *DecodeError) path() string {
	switch {
	case e.Field == "":
		return e.Record
	case strings.HasPrefix(e.Field, e.Record+"."):
		return e.Field
	}
	return e.Record + "." + e.Field
}

// Unwrap returns ErrCorrupt.
func (e *DecodeError) Unwrap() error { return ErrCorrupt }
