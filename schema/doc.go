// Package schema declares the library's own runtime records: the key
// classes and value records its handlers keep in any partition (relay
// rows, relay scan state, timers, scheduler leases, the outbox sequence,
// the outcome backlog and pending index, the outcome timer, the watermark
// checkpoint, the keys an outcome receiver accepted). It declares no partitions: partitions belong to services'
// schemas, such as the reference domain's (refdomain/schema) or an
// importing project's. It is the input of cmd/codegen, which writes the Go
// types, key codecs, record codecs, fuzz targets and benchmarks into
// package gen.
//
// # Why plain Go declarations
//
// A schema is ordinary Go source that compiles, read by the generator with
// go/parser the way stringer and msgp read theirs. Editors, gofmt, go vet
// and godoc all work on it; a field's type is a Go type the reader already
// knows; positions come from the Go tokenizer, so every schema mistake is
// reported as file:line. A separate schema language would need its own
// parser, highlighting and docs for no gain in expressiveness. An importing
// project adds the generator as a tool of its module (go get -tool
// github.com/mkit-dev/mkitfdb/cmd/codegen, as the README's quick start
// does), declares its own schema package the same way and runs
//
//	//go:generate go tool codegen -schema . -out ../shopgen -pkg shopgen
//
// # Namespaces and reserved ranges
//
// Every schema package declares exactly one namespace, a directive line in
// its package doc comment:
//
//	//mk:namespace orders
//
// A namespace is 1-32 bytes of a-z, 0-9 and _, starting with a letter.
// Every partition identity the schema generates (its AppendTuple) is the
// tuple (namespace, variant tag, fields...), and its parser (Parse and the
// partition union's name: ParsePartition, ParseShard) refuses an identity
// of any other namespace, so the identities of two schemas are
// never tuple prefixes of each other: no scan, Stats or cursor of one
// schema's partition reaches another's rows, whatever their variant tags
// and fields. The namespace "mkit" and every name starting with "mkit" are
// reserved for the library: this package declares "mkit", and the
// generator refuses them in any other package.
//
// A partition holds its schema's records plus the library's runtime
// records, never another schema's: the records a service writes into its
// partitions are of its own schema (its outcome sources' records too),
// and a relay row writes a target's rows as the target's own schema's.
// Each generated package registers its namespace at init (package
// codec/registry), and a program that links two generated packages of one
// namespace fails at start, naming both import paths.
//
// Key class tags 1-99 are the library's: its runtime key classes (outbox
// sequence, relay queue, scan state, timers, leases, high-water marks,
// outcome rows, ...) live there, in any partition. An importing schema's
// key classes take tags 100 and above, so they never share a key range
// with the library's inside one partition; the generator refuses a tag
// below 100 in any package but this one, and one above 99 in this one.
// A missing, second or malformed namespace and a tag out of its range are
// generator errors naming file:line.
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
//	//mk:key tag=N [value=R]      a key class: its fields, in order, follow the
//	                              tag in the FoundationDB tuple encoding, so
//	                              byte order is field order; no fields makes a
//	                              singleton; N is 100 or more outside this
//	                              package; value=R names the record of the
//	                              schema its rows hold, so that tools decode
//	                              them (codec/registry's KeyClass.Value)
//	//mk:record version=N [union] a versioned value record
//
// A struct type without a directive is a plain struct used inside records.
//
// # What the generated types look like
//
// An identity becomes an opaque struct (refdomain.RepoName{}) built only by
// NewRepoName (an error wrapping wire.ErrInvalid for a bad name),
// MustRepoName (for constants), UnmarshalText and the decoders, all of
// which validate; so every value but the zero one is valid, and encoders
// check only for the zero value instead of re-validating the bytes each
// call. Identities compare with == and key maps; String returns the name.
//
// A union becomes an interface. A partition union's variants are the
// variant structs (refdomain.RefPartition{...}); a record union's variants are
// pointers to them (&refdomain.ReservationCommitted{...}), so that
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
//
//mk:namespace mkit
package schema
