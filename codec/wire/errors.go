// Package wire is the hand-written runtime of the codecs that cmd/codegen
// writes: the primitives of the record byte layout and the errors every
// generated encoder and decoder wraps.
//
// The layout promises stability: a record version, once generated and
// released, keeps its bytes; new versions and new record kinds may be added.
package wire

import (
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every error about bytes that do not decode: a
// truncated record, trailing bytes, an unknown version or enum tag, a length
// over its declared bound, a non-canonical encoding. Stored data that fails
// this way is corrupt; callers never skip it silently.
var ErrCorrupt = errors.New("corrupt data")

// ErrInvalid is wrapped by every error about a value that cannot be encoded:
// an identity that is empty, over-long or holds control characters, a
// collection over its declared bound, a field outside its declared range.
var ErrInvalid = errors.New("invalid input")

// ErrNewerVersion is wrapped by the error of a value whose version byte is
// above every version its family (a key class's value=) declares: bytes
// written by a newer schema, as a newer process writes during a rolling
// deploy. It does not wrap ErrCorrupt: such a row is held and retried
// once this binary is replaced, never treated as corrupt and never
// skipped. A version byte below the newest that the family does not
// declare, and version 0, are ErrCorrupt.
var ErrNewerVersion = errors.New("value of a newer version")

// ErrFormatTooOld is wrapped by the error of an encoder asked to write a
// value to a store whose format cannot hold it: no version of the
// family is allowed at that format, a version's downgrade cannot express
// the value, or the value holds a variant or enum constant of a newer
// format. It wraps ErrInvalid: nothing was encoded, and the feature stays
// off until the store's format is raised.
var ErrFormatTooOld = fmt.Errorf("the store's format is too old: %w", ErrInvalid)

// VersionError is the error of a value whose version byte is above the
// newest its family declares. It wraps ErrNewerVersion.
type VersionError struct {
	Family  string // the key class whose value family it is
	Version uint8  // the version byte found
	Newest  uint8  // the newest version the family declares
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%s value of version %d: this binary reads versions up to %d: %v", e.Family, e.Version, e.Newest, ErrNewerVersion)
}

// Unwrap returns ErrNewerVersion.
func (e *VersionError) Unwrap() error { return ErrNewerVersion }

// FormatError is the error of a value that a store of format Format
// cannot hold: Record, a version of Family, or what the value holds,
// needs format Need. It wraps ErrFormatTooOld, and so ErrInvalid.
type FormatError struct {
	Family string // the key class whose value family it is
	Record string // the version the encoder would write
	Format uint32 // the store's format it was asked to write at
	Need   uint32 // the format that version or its content needs
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s value: %s needs store format %d, the store's is %d: %v", e.Family, e.Record, e.Need, e.Format, ErrFormatTooOld)
}

// Unwrap returns ErrFormatTooOld.
func (e *FormatError) Unwrap() error { return ErrFormatTooOld }

// UnknownVersion returns the error of b, the value of a row of family,
// whose version byte none of the family's versions has (declared lists
// them, as "1, 2"): a *VersionError when that byte is above last, the
// largest version byte the family has held (its newest, newest, or one
// it retired), else a *DecodeError, wrapping ErrCorrupt, for a retired or
// never declared byte, version 0 or empty bytes.
func UnknownVersion(family string, b []byte, newest, last uint8, declared string) error {
	switch {
	case len(b) == 0:
		return &DecodeError{Record: family + " value", Field: "version", Offset: 0, Reason: "truncated: need 1 bytes, have 0"}
	case b[0] > last:
		return &VersionError{Family: family, Version: b[0], Newest: newest}
	}
	return &DecodeError{Record: family + " value", Field: "version", Offset: 0, Reason: fmt.Sprintf("unknown version %d (the family's versions are %s)", b[0], declared)}
}
