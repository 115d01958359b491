package tuple

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// Errors: every decoding failure wraps wire.ErrCorrupt and every encoding
// failure wire.ErrInvalid, so callers test with errors.Is against the
// sentinels the generated codecs share. Messages name the offset, what was
// expected and what was found; they carry no data beyond type codes and
// integer values.

// mismatch is the error for finding something other than want at r.off.
func (r *Reader) mismatch(want string) error {
	return errAt(r.off, "expected %s, found %s", want, r.found())
}

// found describes what starts at r.off, for error messages.
func (r *Reader) found() string {
	if r.off >= len(r.b) {
		return "end of input"
	}
	c := r.b[r.off]
	if c == 0x00 && r.depth > 0 {
		if r.escapedAt(r.off) {
			return "null (0x00 0xFF)"
		}
		return "end of nested tuple (0x00)"
	}
	return fmt.Sprintf("%s (type code 0x%02x)", typeName(c), c)
}

// typeName names a type code as the tuple format defines it.
func typeName(c byte) string {
	switch {
	case c == CodeNull:
		return "null"
	case c == CodeBytes:
		return "bytes"
	case c == CodeString:
		return "string"
	case c == 0x03 || c == 0x04:
		return "deprecated nested tuple"
	case c == CodeNested:
		return "nested tuple"
	case c == CodeNegBigInt || c == CodePosBigInt:
		return "integer wider than 8 bytes"
	case c > CodeNegBigInt && c < CodePosBigInt:
		return "integer"
	case c == 0x20:
		return "float"
	case c == 0x21:
		return "double"
	case c == 0x25:
		return "deprecated true"
	case c == CodeFalse:
		return "false"
	case c == CodeTrue:
		return "true"
	case c == 0x30:
		return "UUID"
	case c == 0x33:
		return "versionstamp"
	case c == EscapeByte:
		return "escape byte"
	}
	return "unknown type"
}

// errAt returns an error wrapping wire.ErrCorrupt about the input at off.
func errAt(off int, format string, args ...any) error {
	return fmt.Errorf("tuple: offset %d: %s: %w", off, fmt.Sprintf(format, args...), wire.ErrCorrupt)
}
