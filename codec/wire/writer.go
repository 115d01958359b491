package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Appenders of the record layout. They never fail: generated encoders run
// a record's checker first, so every value that reaches them is in bounds.

// AppendU16 appends v big-endian.
func AppendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }

// AppendU32 appends v big-endian.
func AppendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }

// AppendU64 appends v big-endian.
func AppendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// AppendI64 appends v big-endian two's complement.
func AppendI64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

// AppendBool appends 1 for true, 0 for false.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// AppendLen appends a length or count as a canonical uvarint.
func AppendLen(dst []byte, n int) []byte {
	if n < 0x80 {
		return append(dst, byte(n))
	}
	if n < 0x4000 {
		return append(dst, byte(n)|0x80, byte(n>>7))
	}
	return binary.AppendUvarint(dst, uint64(n))
}

// AppendBytes appends a length-prefixed byte string.
func AppendBytes(dst, b []byte) []byte { return append(AppendLen(dst, len(b)), b...) }

// AppendString appends a length-prefixed string.
func AppendString(dst []byte, s string) []byte { return append(AppendLen(dst, len(s)), s...) }

// LenSize is the encoded size of a length or count.
func LenSize(n int) int {
	s := 1
	for n >= 0x80 {
		n >>= 7
		s++
	}
	return s
}

// Checkers used by generated validation. Each returns an error wrapping
// ErrInvalid that names the record field.

// CheckLen fails when n is over max.
func CheckLen(field string, n, max int) error {
	if n > max {
		return &RuleError{Field: field, Reason: fmt.Sprintf("length %d over its bound %d", n, max)}
	}
	return nil
}

// CheckIdentity fails unless s has between min and max bytes, is valid
// UTF-8 and holds no control characters.
func CheckIdentity(typ, s string, min, max int) error {
	// Fast path: accept printable ASCII (0x20-0x7e), the common case, a
	// word at a time: eight bytes at a time with the last eight
	// overlapping, or two overlapping four-byte words for four to seven
	// bytes. Anything else is judged byte by byte by checkIdentity.
	if len(s) < min || len(s) > max {
		return checkIdentity(typ, s, min, max)
	}
	switch {
	case len(s) >= 8:
		t := s
		for ; len(t) > 8; t = t[8:] {
			if !printableASCII8(t[:8]) {
				return checkIdentity(typ, s, min, max)
			}
		}
		if printableASCII8(s[len(s)-8:]) {
			return nil
		}
	case len(s) >= 4:
		if printableASCII4(s[:4]) && printableASCII4(s[len(s)-4:]) {
			return nil
		}
	}
	return checkIdentity(typ, s, min, max)
}

// printableASCII8 reports whether all eight bytes of s are in 0x20-0x7e.
// With no byte at or over 0x80 (the x term) no byte carries or borrows
// into the next unless an earlier one is out of range, so a byte at or
// over 0x7f sets its top bit in x+0x01.. and the first byte under 0x20
// sets its top bit in x-0x20...
func printableASCII8(s string) bool {
	_ = s[7]
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	return (x|(x+0x0101010101010101)|(x-0x2020202020202020))&0x8080808080808080 == 0
}

// printableASCII4 is printableASCII8 for four bytes.
func printableASCII4(s string) bool {
	_ = s[3]
	x := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
	return (x|(x+0x01010101)|(x-0x20202020))&0x80808080 == 0
}

// checkIdentity is CheckIdentity judged byte by byte, with the failure.
func checkIdentity(typ, s string, min, max int) error {
	if len(s) < min {
		if len(s) == 0 {
			return Rule("", "%s is empty", typ)
		}
		return Rule("", "%s has %d bytes, under its minimum %d", typ, len(s), min)
	}
	if len(s) > max {
		return Rule("", "%s has %d bytes, over its bound %d", typ, len(s), max)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return Rule("", "%s holds a control character at byte %d", typ, i)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return Rule("", "%s is not valid UTF-8 at byte %d", typ, i)
		}
		if unicode.IsControl(r) {
			return Rule("", "%s holds a control character at byte %d", typ, i)
		}
		i += n
	}
	return nil
}

// Invalidf returns an error wrapping ErrInvalid.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Corruptf returns an error wrapping ErrCorrupt.
func Corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// RuleError is a value that breaks a rule of its schema: a bound, an
// identity's form, an enum's set, an ordering. It wraps ErrInvalid; a
// decoder that finds one in stored bytes reports it as a DecodeError,
// which wraps ErrCorrupt.
type RuleError struct {
	Field  string // field path inside the record, key or identity
	Reason string
}

func (e *RuleError) Error() string {
	if e.Field == "" {
		return e.Reason + ": " + ErrInvalid.Error()
	}
	return e.Field + ": " + e.Reason + ": " + ErrInvalid.Error()
}

// Unwrap returns ErrInvalid.
func (e *RuleError) Unwrap() error { return ErrInvalid }

// Rule returns a *RuleError for field.
func Rule(field, format string, args ...any) error {
	return &RuleError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Within prefixes the field path of a *RuleError with prefix; other errors
// are returned as they are.
func Within(prefix string, err error) error {
	re, ok := err.(*RuleError)
	if !ok {
		return err
	}
	field := prefix
	if re.Field != "" {
		field = prefix + "." + re.Field
	}
	return &RuleError{Field: field, Reason: re.Reason}
}

// DecodeRule reports a rule broken by decoded bytes as a DecodeError of
// record, wrapping ErrCorrupt.
func DecodeRule(record string, err error) error {
	if re, ok := err.(*RuleError); ok {
		return &DecodeError{Record: record, Field: re.Field, Offset: -1, Reason: re.Reason}
	}
	return &DecodeError{Record: record, Offset: -1, Reason: err.Error()}
}

// KeyError reports a key of class that does not parse, wrapping ErrCorrupt
// whatever err wraps.
func KeyError(class string, err error) error {
	if re, ok := err.(*RuleError); ok {
		return &DecodeError{Record: class, Field: re.Field, Offset: -1, Reason: re.Reason}
	}
	if errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("parse %s: %w", class, err)
	}
	return &DecodeError{Record: class, Offset: -1, Reason: err.Error()}
}
