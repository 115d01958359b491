// Package tuple implements the subset of FoundationDB's tuple-layer encoding
// that mkitfdb keys use, byte-identical to the official binding's tuple.Pack.
//
// Packed tuples sort bytewise in the same order as the tuples they encode
// (see [Compare]), which is what makes them usable as keys: rows of one key
// class sort by their fields, and [RangeEnd] bounds every key under a packed
// prefix.
//
// # Byte layout
//
// Each element is a type code followed by its payload; a tuple is its
// elements concatenated, with no header and no terminator at the top level.
//
//	code        element                 payload
//	0x00        null (top level)        none
//	0x00 0xFF   null inside a nested    none
//	0x01        byte string             bytes, every 0x00 written as 0x00 0xFF, then 0x00
//	0x02        string (UTF-8)          as 0x01
//	0x05        nested tuple            its elements, then 0x00
//	0x0B        integer < -(2^64-1)     length L (9..255) XOR 0xFF, then L bytes one's complement of |v|
//	0x0C..0x13  integer -(2^64-1)..-1   8..1 bytes: one's complement of |v| (0x13 0xFE is -1)
//	0x14        integer 0               none
//	0x15..0x1C  integer 1..2^64-1       1..8 bytes: v big-endian (0x15 0x01 is 1)
//	0x1D        integer >= 2^64         length L (9..255), then L bytes of v big-endian
//	0x26        false                   none
//	0x27        true                    none
//
// Integers always use the fewest bytes that hold their magnitude, so every
// integer has exactly one encoding whatever Go type it came from. Type codes
// the format defines but this package does not (floats 0x20/0x21, UUID 0x30,
// versionstamp 0x33, ...) are rejected when decoding and cannot be encoded.
//
// # Encoding and decoding
//
// The Append functions write one element into a caller's buffer and never
// allocate when it has room; the Len functions give an element's exact size
// without encoding it. A [Reader] decodes elements one at a time and accepts
// only canonical encodings, so whatever it reads re-encodes to the same bytes.
// [Pack], [Unpack] and Compare work on the generic [Tuple] form, for tests, tools
// and comparisons with the binding.
//
// Design note: the official binding's tuple package imports its cgo fdb
// package, so importing it would make every build of mkitfdb (and of the
// services using its generated codecs) need cgo and libfdb_c, even those
// running on the memory or bbolt engines. Its decoder is also lenient: it
// accepts non-canonical integers (0x15 0x00 decodes as uint64 0), accepts a
// nested tuple missing its terminator, and panics on some truncated input,
// while generated codecs need a decoder that rejects every byte string it
// could not have produced. This package therefore implements the format
// itself, and the FoundationDB engine's module (fdblayer/fdbengine, whose
// tests link the binding) checks it against the binding byte for byte.
package tuple
