// Package wire is the hand-written runtime of the codecs that cmd/codegen
// writes: the primitives of the record byte layout and the errors every
// generated encoder and decoder wraps.
//
// The layout promises stability: a record version, once generated and
// released, keeps its bytes; new versions and new record kinds may be added.
package wire

import "errors"

// ErrCorrupt is wrapped by every error about bytes that do not decode: a
// truncated record, trailing bytes, an unknown version or enum tag, a length
// over its declared bound, a non-canonical encoding. Stored data that fails
// this way is corrupt; callers never skip it silently.
var ErrCorrupt = errors.New("corrupt data")

// ErrInvalid is wrapped by every error about a value that cannot be encoded:
// an identity that is empty, over-long or holds control characters, a
// collection over its declared bound, a field outside its declared range.
var ErrInvalid = errors.New("invalid input")
