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
