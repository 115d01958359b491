package tuple

import (
	"bytes"
	"math"
	"math/big"
	"strings"
)

// A Reader decodes the elements of a packed tuple one at a time, in order.
// It accepts only canonical encodings (the bytes the Append functions write),
// so whatever it reads re-encodes to exactly the bytes it consumed:
// integers must use the fewest bytes, zero only 0x14, and every element must
// be complete.
//
// Every Read, Enter and Exit method fails, without advancing, with an error
// wrapping wire.ErrCorrupt that says what was expected, what was found and
// at which offset. No method panics, whatever the input.
//
// A Reader keeps a reference to the bytes it reads; they must not change
// while it is in use. A Reader is not safe for concurrent use; its zero value
// reads an empty input.
type Reader struct {
	b     []byte
	off   int
	depth int
}

// NewReader returns a Reader positioned at the start of b, outside any
// nested tuple.
func NewReader(b []byte) Reader {
	return Reader{b: b}
}

// Done reports whether every byte of the input has been consumed.
func (r *Reader) Done() bool {
	return r.off >= len(r.b)
}

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int {
	return r.off
}

// Rest returns the bytes not yet consumed, as a sub-slice of the input.
func (r *Reader) Rest() []byte {
	return r.b[r.off:]
}

// Depth returns how many nested tuples the Reader is inside: 0 at the top
// level, incremented by EnterNested and decremented by ExitNested.
func (r *Reader) Depth() int {
	return r.depth
}

// Peek returns the type code of the next element without consuming it, and
// false when no bytes are left. Inside a nested tuple a 0x00 is either a
// null or the nested tuple's end; AtNestedEnd tells which.
func (r *Reader) Peek() (code byte, ok bool) {
	if r.off >= len(r.b) {
		return 0, false
	}
	return r.b[r.off], true
}

// AtNestedEnd reports whether the Reader is inside a nested tuple and the
// next byte is its terminator (a 0x00 not followed by 0xFF), that is whether
// ExitNested would succeed.
func (r *Reader) AtNestedEnd() bool {
	return r.depth > 0 && r.off < len(r.b) && r.b[r.off] == 0x00 && !r.escapedAt(r.off)
}

// escapedAt reports whether b[i] is followed by the escape byte 0xFF.
func (r *Reader) escapedAt(i int) bool {
	return i+1 < len(r.b) && r.b[i+1] == EscapeByte
}

// ReadNull consumes a null: 0x00 at the top level, 0x00 0xFF inside a nested
// tuple. It fails on any other element, on a nested tuple's end and at the
// end of input.
func (r *Reader) ReadNull() error {
	if r.off >= len(r.b) || r.b[r.off] != CodeNull {
		return r.mismatch("null")
	}
	if r.depth == 0 {
		r.off++
		return nil
	}
	if !r.escapedAt(r.off) {
		return r.mismatch("null (0x00 0xFF)")
	}
	r.off += 2
	return nil
}

// ReadBytes consumes a byte-string element (type code 0x01) and returns its
// content. When the content holds no escaped 0x00 the result is a sub-slice
// of the input (no allocation), valid as long as the input is and with its
// capacity clipped so appending to it never writes into the input; otherwise
// it is a fresh unescaped copy. An empty element gives an empty, non-nil
// slice. It fails on any other element, on a missing terminator and at the
// end of input.
func (r *Reader) ReadBytes() ([]byte, error) {
	b, _, err := r.readBytes()
	return b, err
}

// readBytes is ReadBytes, also reporting whether the result is a fresh copy.
func (r *Reader) readBytes() (b []byte, fresh bool, err error) {
	start, end, escapes, err := r.scanEscaped(CodeBytes, "bytes")
	if err != nil {
		return nil, false, err
	}
	r.off = end + 1
	if escapes == 0 {
		return r.b[start:end:end], false, nil
	}
	return unescape(make([]byte, 0, end-start-escapes), r.b[start:end]), true, nil
}

// ReadStringBytes consumes a string element (type code 0x02) and returns
// its content as bytes: the input's own bytes when the content holds no
// escaped 0x00 (no allocation), else an unescaped copy. It fails as
// ReadString does.
func (r *Reader) ReadStringBytes() ([]byte, error) {
	start, end, escapes, err := r.scanEscaped(CodeString, "string")
	if err != nil {
		return nil, err
	}
	r.off = end + 1
	if escapes == 0 {
		return r.b[start:end:end], nil
	}
	return unescape(make([]byte, 0, end-start-escapes), r.b[start:end]), nil
}

// ReadString consumes a string element (type code 0x02) and returns its
// content, making at most one allocation (the string's bytes). It does not
// check UTF-8: Go strings hold any bytes and re-encode to the same element.
// It fails on any other element, on a missing terminator and at the end of
// input.
func (r *Reader) ReadString() (string, error) {
	start, end, escapes, err := r.scanEscaped(CodeString, "string")
	if err != nil {
		return "", err
	}
	r.off = end + 1
	if escapes == 0 {
		return string(r.b[start:end]), nil
	}
	var sb strings.Builder
	sb.Grow(end - start - escapes)
	src := r.b[start:end]
	for {
		i := bytes.IndexByte(src, 0x00)
		if i < 0 {
			sb.Write(src)
			return sb.String(), nil
		}
		sb.Write(src[:i+1])
		src = src[i+2:] // skip the escape byte
	}
}

// scanEscaped checks that the next element has type code code and finds its
// terminator. It returns the content's bounds in r.b (escapes included) and
// the number of escaped 0x00 bytes in it, without advancing.
func (r *Reader) scanEscaped(code byte, what string) (start, end, escapes int, err error) {
	if r.off >= len(r.b) || r.b[r.off] != code {
		return 0, 0, 0, r.mismatch(what)
	}
	start = r.off + 1
	i := start
	for {
		j := bytes.IndexByte(r.b[i:], 0x00)
		if j < 0 {
			return 0, 0, 0, errAt(r.off, "expected %s terminated by 0x00, found end of input at offset %d", what, len(r.b))
		}
		i += j
		if !r.escapedAt(i) {
			return start, i, escapes, nil
		}
		escapes++
		i += 2
	}
}

// unescape appends src to dst with every 0x00 0xFF replaced by 0x00.
func unescape(dst, src []byte) []byte {
	for {
		i := bytes.IndexByte(src, 0x00)
		if i < 0 {
			return append(dst, src...)
		}
		dst = append(dst, src[:i+1]...)
		src = src[i+2:]
	}
}

// ReadInt consumes an integer element and returns its value. It fails on any
// other element, on a truncated or non-canonical integer, and on an integer
// outside the int64 range (including every 0x1D and 0x0B form).
func (r *Reader) ReadInt() (int64, error) {
	neg, body, next, err := r.scanInt("integer")
	if err != nil {
		return 0, err
	}
	if len(body) > 8 {
		return 0, errAt(r.off, "expected integer within int64, found %d-byte integer", len(body))
	}
	u := bigEndian(body)
	if neg {
		mag := negMagnitude(u, len(body))
		if mag > 1<<63 {
			return 0, errAt(r.off, "expected integer within int64, found -%d", mag)
		}
		r.off = next
		return int64(-mag), nil // -mag wraps to 2^63 for MinInt64, as intended
	}
	if u > math.MaxInt64 {
		return 0, errAt(r.off, "expected integer within int64, found %d", u)
	}
	r.off = next
	return int64(u), nil
}

// ReadUint consumes an integer element and returns its value. It fails on
// any other element, on a truncated or non-canonical integer, on a negative
// integer and on one over MaxUint64 (the 0x1D form).
func (r *Reader) ReadUint() (uint64, error) {
	neg, body, next, err := r.scanInt("unsigned integer")
	if err != nil {
		return 0, err
	}
	if neg {
		return 0, errAt(r.off, "expected unsigned integer, found negative integer (type code 0x%02x)", r.b[r.off])
	}
	if len(body) > 8 {
		return 0, errAt(r.off, "expected integer within uint64, found %d-byte integer", len(body))
	}
	r.off = next
	return bigEndian(body), nil
}

// ReadBigInt consumes an integer element of any width and returns its value
// as a new big.Int. It fails on any other element and on a truncated or
// non-canonical integer.
func (r *Reader) ReadBigInt() (*big.Int, error) {
	neg, body, next, err := r.scanInt("integer")
	if err != nil {
		return nil, err
	}
	r.off = next
	return bigFromBody(neg, body), nil
}

// readInteger consumes an integer element and returns it as the binding's
// Unpack would: int64 when it fits, uint64 when it is over MaxInt64 and
// fits 8 bytes, *big.Int otherwise.
func (r *Reader) readInteger() (any, error) {
	neg, body, next, err := r.scanInt("integer")
	if err != nil {
		return nil, err
	}
	r.off = next
	if len(body) > 8 {
		return bigFromBody(neg, body), nil
	}
	u := bigEndian(body)
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	case !neg:
		return u, nil
	}
	mag := negMagnitude(u, len(body))
	if mag <= 1<<63 {
		return int64(-mag), nil
	}
	return bigFromBody(neg, body), nil
}

// scanInt checks that the next element is a complete, canonical integer and
// returns its sign, its payload as stored (one's complement for negatives;
// empty for zero) and the offset just past it, without advancing.
func (r *Reader) scanInt(want string) (neg bool, body []byte, next int, err error) {
	if r.off >= len(r.b) {
		return false, nil, 0, r.mismatch(want)
	}
	code := r.b[r.off]
	start := r.off + 1
	var n int
	switch {
	case code == CodeIntZero:
		return false, nil, start, nil
	case code > CodeIntZero && code <= CodePosInt8:
		n = int(code - CodeIntZero)
	case code >= CodeNegInt8 && code < CodeIntZero:
		neg, n = true, int(CodeIntZero-code)
	case code == CodePosBigInt || code == CodeNegBigInt:
		neg = code == CodeNegBigInt
		if start >= len(r.b) {
			return false, nil, 0, errAt(r.off, "expected length byte of integer (type code 0x%02x), found end of input", code)
		}
		n = int(r.b[start])
		if neg {
			n ^= 0xFF
		}
		if n <= 8 {
			return false, nil, 0, errAt(start, "non-canonical integer: length %d under type code 0x%02x, which is for 9..255 bytes", n, code)
		}
		start++
	default:
		return false, nil, 0, r.mismatch(want)
	}
	if len(r.b)-start < n {
		return false, nil, 0, errAt(r.off, "expected %d-byte integer (type code 0x%02x), found %d bytes before end of input", n, code, len(r.b)-start)
	}
	body = r.b[start : start+n]
	redundant := byte(0x00)
	if neg {
		redundant = 0xFF
	}
	if body[0] == redundant {
		return false, nil, 0, errAt(start, "non-canonical integer: leading byte 0x%02x under type code 0x%02x (the value fits in fewer bytes)", body[0], code)
	}
	return neg, body, start + n, nil
}

// bigEndian decodes up to 8 bytes as an unsigned big-endian number.
func bigEndian(b []byte) uint64 {
	var u uint64
	for _, c := range b {
		u = u<<8 | uint64(c)
	}
	return u
}

// negMagnitude returns |v| for a negative integer whose n-byte payload
// (n in 1..8), the one's complement of |v|, decodes to u.
func negMagnitude(u uint64, n int) uint64 {
	mag := ^u
	if n < 8 {
		mag &= 1<<(8*n) - 1
	}
	return mag
}

// bigFromBody decodes an integer payload as scanInt returns it.
func bigFromBody(neg bool, body []byte) *big.Int {
	v := new(big.Int)
	if !neg {
		return v.SetBytes(body)
	}
	mag := make([]byte, len(body))
	for i, c := range body {
		mag[i] = ^c
	}
	return v.Neg(v.SetBytes(mag))
}

// ReadBool consumes a boolean element (0x26 false, 0x27 true). It fails on
// any other element (the deprecated true code 0x25 included) and at the end
// of input.
func (r *Reader) ReadBool() (bool, error) {
	if r.off < len(r.b) {
		switch r.b[r.off] {
		case CodeFalse:
			r.off++
			return false, nil
		case CodeTrue:
			r.off++
			return true, nil
		}
	}
	return false, r.mismatch("boolean")
}

// EnterNested consumes the start of a nested tuple (0x05). Until the
// matching ExitNested, ReadNull expects 0x00 0xFF. It fails on any other
// element and at the end of input.
func (r *Reader) EnterNested() error {
	if r.off >= len(r.b) || r.b[r.off] != CodeNested {
		return r.mismatch("nested tuple")
	}
	r.off++
	r.depth++
	return nil
}

// ExitNested consumes the terminator (0x00) of the innermost nested tuple
// the Reader is in. It fails outside any nested tuple, on a null (0x00 0xFF),
// on any other element and at the end of input.
func (r *Reader) ExitNested() error {
	if r.depth == 0 {
		return errAt(r.off, "expected end of nested tuple, found %s outside any nested tuple", r.found())
	}
	if !r.AtNestedEnd() {
		return r.mismatch("end of nested tuple (0x00)")
	}
	r.off++
	r.depth--
	return nil
}
