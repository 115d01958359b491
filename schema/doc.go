// Package schema declares everything mkitfdb stores: partition identities,
// key classes and value records. It is the input of cmd/codegen, which
// writes the Go types, key codecs, record codecs, fuzz targets and
// benchmarks into package gen.
//
// # Why plain Go declarations
//
// A schema is ordinary Go source that compiles, read by the generator with
// go/parser the way stringer and msgp read theirs. Editors, gofmt, go vet
// and godoc all work on it; a field's type is a Go type the reader already
// knows; positions come from the Go tokenizer, so every schema mistake is
// reported as file:line. A separate schema language would need its own
// parser, highlighting and docs for no gain in expressiveness. An importing
// project declares its own schema package the same way and runs
//
//	//go:generate go run github.com/mkit-dev/mkitfdb/cmd/codegen -schema . -out ../gen -pkg gen
//
// # Declarations
//
// A directive comment line right above a type says what the type is:
//
//	//mk:identity min=1 max=64    a validated name
//	//mk:enum                     a closed set of uint8 constants
//	//mk:union [partition]        exactly one of several variants: a struct
//	                              whose fields are pointers to variant structs,
//	                              each tagged mk:"tag=N" (and kind=name for a
//	                              partition); partition unions identify
//	                              partitions (store.Partition)
//	//mk:key tag=N                a key class: its fields, in order, follow the
//	                              tag in the FoundationDB tuple encoding, so
//	                              byte order is field order; no fields makes a
//	                              singleton
//	//mk:record version=N [union] a versioned value record
//
// A struct type without a directive is a plain struct used inside records.
//
// # What the generated types look like
//
// An identity becomes an opaque struct (gen.RepoName{}) built only by
// NewRepoName (an error wrapping wire.ErrInvalid for a bad name),
// MustRepoName (for constants), UnmarshalText and the decoders, all of
// which validate; so every value but the zero one is valid, and encoders
// check only for the zero value instead of re-validating the bytes each
// call. Identities compare with == and key maps; String returns the name.
//
// A union becomes an interface. A partition union's variants are the
// variant structs (gen.RefPartition{...}); a record union's variants are
// pointers to them (&gen.ReservationCommitted{...}), so that
// DecodeReservationV1Into can decode in place into the variant a value
// already holds, reusing its slices.
//
// Field tags (mk:"...", comma separated) bound and constrain fields:
//
//	max=N       the most bytes of a string or []byte, or elements of a slice
//	elem_max=N  the most bytes of each element of a []string or [][]byte
//	            (required there)
//	min=N       the least value of an integer
//	le=Field    an integer at most another integer field of the same struct
//	sorted      slice elements strictly ascending (and so unique)
//	optional    a []byte whose absence (nil) differs from empty
//
// Every string, []byte and slice in a record needs a bound: records are
// bounded by construction.
//
// Field types: uint8, uint16, uint32, uint64, int64, bool, string, []byte,
// [N]byte, identities, enums, structs, unions, pointers to scalars
// (optional values), and slices of those.
//
// # Stability
//
// A record version's layout never changes once released. New record
// kinds, key classes, enum values and union variants may be added; a
// change of layout is a new version (a new record type, RelayV2).
package schema
