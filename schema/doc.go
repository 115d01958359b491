// Package schema declares the library's own runtime records: the key
// classes and value records its handlers keep in any partition (relay
// rows, relay scan state, timers, scheduler leases, the outbox sequence,
// the outcome backlog and pending index, the outcome timer, the watermark
// checkpoint, the keys an outcome receiver accepted, migration checkpoints). It declares no partitions: partitions belong to services'
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
//	//mk:enum [retired=N,...]     a closed set of uint8 constants
//	//mk:union [partition]        exactly one of several variants: a struct
//	  [retired=N,...]             whose fields are pointers to variant structs,
//	                              each tagged mk:"tag=N" (and kind=name for a
//	                              partition); partition unions identify
//	                              partitions (store.Partition)
//	//mk:key tag=N [value=R,...]  a key class: its fields, in order, follow the
//	  [retired=N,...] [draft]     tag in the FoundationDB tuple encoding, so
//	                              byte order is field order; no fields makes a
//	                              singleton; N is 100 or more outside this
//	                              package; value= lists the records of the
//	                              schema its rows hold, oldest first: its
//	                              value family (below)
//	//mk:record version=N [union] a versioned value record; format=N is the
//	  [format=N] [draft]          store format that introduced it (below)
//	  [retired=N,...]
//
// A struct type without a directive is a plain struct used inside records.
// A union variant takes format=N among its options (mk:"tag=3,format=2"),
// an enum constant a //mk:format=N comment on its line. draft and retired=
// are described under "Evolving a schema", with the //mk:retired line of
// the package doc comment.
//
// # Value families and formats
//
// A key class's rows may hold several versions of a value, its value
// family, listed oldest first by value= (value=OrderV1,OrderV2), each
// version byte above the one before. A record may be a version of several families (U64Value is the
// value of several library classes). For each family the generator writes
// (for a class OrderKey):
//
//	type OrderKeyVersions interface {               // the rows' owner implements it
//		UpgradeOrderV1(v OrderV1) (OrderV2, error)   // one per adjacent pair
//		DowngradeOrderV2(v OrderV2) (OrderV1, error) // for a version of a format
//	}                                                // above the first's
//	func NewOrderKeyValues(v OrderKeyVersions) *OrderKeyValues
//	func (x *OrderKeyValues) Decode(b []byte) (OrderV2, error)
//	func (x *OrderKeyValues) DecodeInto(b []byte, v *OrderV2) error
//	func (x *OrderKeyValues) Encode(v OrderV2, format uint32) ([]byte, error)
//	func VersionOfOrderKeyValue(b []byte) (uint8, error)
//
// Decode reads a value of any version the family declares and returns the
// newest: an older one is decoded strictly, as its own DecodeOrderV1
// does, then upgraded one version at a time. The newest decodes through
// its own DecodeOrderV2Into, the fast path, unchanged. A version byte
// above the family's is not corrupt data: a newer schema wrote it (a newer
// process during a rolling deploy), and it fails with a *wire.VersionError
// wrapping wire.ErrNewerVersion (store.ErrNewerVersion): a row to hold and
// retry, never to skip. Version 0, and a byte below the newest that the
// family does not declare, are wire.ErrCorrupt.
// OrderKeyVersions is generated for a family of one version too, without
// methods (struct{}{} satisfies it): adding a version adds a method, so
// the owner's NewOrderKeyValues(...) stops compiling, naming the upgrade
// it lacks. The per-version AppendOrderV1, EncodeOrderV1 and DecodeOrderV1
// stay, for explicit writes, tests and tools (codec/registry lists each
// class's family, KeyClass.Values, and each row is shown as it is stored).
//
// A format says which processes read a version. format=N on a record (and
// on a variant or enum constant) is the store format of the namespace
// that introduced it, 1 by default; SchemaFormat, the largest the schema
// declares, is the newest format the package knows, and codec/registry
// lists it with each record's. A store's format of a namespace is raised
// only once every process reads it, so that no process writes what
// another running one cannot read: Encode(v, format) writes the newest
// version the store's format allows, downgrading v through the family
// (DowngradeOrderV2), and refuses, with an error wrapping
// wire.ErrFormatTooOld (wire.ErrInvalid), a value that no allowed version
// expresses or that holds a variant or enum constant of a newer format.
// Along a family, formats never decrease.
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
// # Evolving a schema
//
// Rows live for years; schemas change every week. The layout lock keeps
// the two apart: layout.lock, beside the schema package's files, records
// every layout the generator has generated from the schema, which rows
// already stored may hold. The first run writes it; commit it with the
// schema (it is generated: never edit it). Every run, go generate and
// codegen -check alike (so make lint and CI), compares the schema with it
// first and refuses every change that would make bytes already stored
// read differently or fail: each is a file:line error that ends "(layout
// rule ID)", and nothing is written. A change it allows rewrites the lock,
// and -check reports a lock not rewritten yet as stale, as it does
// generated code.
//
// The lock compares what the bytes hold: a key class is its tag, a union
// variant its tag, an enum constant its value, a field its position in its
// record, struct or key class, and a type a field uses is compared by its
// layout, whatever its name. A record holds no number but its version, so
// it is known by its name: renaming one removes it.
//
// Refused, by the ID its error names:
//
//	namespace        the namespace changed: every partition identity starts
//	                 with it, so stored partitions would not be found
//	field-added      a field added to a released record or key class, or to a
//	                 struct or variant one uses: stored bytes end before it
//	field-removed    a field removed: stored bytes hold it
//	field-moved      fields reordered, or a field's name moved to another
//	                 position (two fields swapping names): bytes are read by
//	                 position, and each value would land in another field
//	retyped          a field's type changed (an integer's width or sign, an
//	                 array's length, optional, a pointer, an element type, a
//	                 struct for a union; renamed and retyped alike), or a
//	                 record made a union or a struct: the bytes were written
//	                 with the old type
//	bound-tightened  max or elem_max lowered, min raised or added, le added or
//	                 moved, sorted added, an identity's min raised or max
//	                 lowered: a value already stored may break it
//	key-value        a released key class's value family changed other than
//	                 by a version added at its end: a version no longer
//	                 listed and not retired, one listed before a released
//	                 one or below a byte the family held, value= added to a
//	                 class that had none; rows hold the versions it named
//	                 (dropping value= altogether is allowed)
//	renumbered       a key class, variant or enum constant that keeps its name
//	                 but takes another number, a record another version:
//	                 rows hold the number, so they would read as another; a
//	                 released record's, variant's or enum constant's format=
//	                 lowered: it would be written where processes older than
//	                 it still run
//	removed          a released key class, record, variant, enum constant or
//	                 partition union no longer declared and not retired
//	retired-reused   a retired number (key class tag, variant tag, enum
//	                 value, version of a family) or record name declared again
//	retired-dropped  a retirement the lock holds dropped from the schema
//	released-draft   a released key class or record marked draft
//
// Allowed:
//
//	additions        a new record (a new version of one is a new record, as
//	                 TimerRefV2 is), key class, enum constant, union or
//	                 partition variant, a version at the end of a family
//	                 (value=OrderV1,OrderV2): no stored byte holds it
//	formats raised   format= raised on a released record, variant or enum
//	                 constant: writers then downgrade until the store's
//	                 format reaches it, and every process reads what they
//	                 write
//	renames          a field at its position with its type, a key class at
//	                 its tag, a variant at its tag, an enum constant at its
//	                 value, a struct, union, enum or identity type, a
//	                 partition kind: the bytes hold no names
//	loosened bounds  max or elem_max raised, min lowered or dropped, le or
//	                 sorted dropped, an identity's bounds widened: every
//	                 value already stored still meets them, so it decodes
//	retirements      a key class, record, variant, enum constant or version
//	                 of a family no longer used, its number reserved for ever
//	                 (below)
//	drafts           any change to a layout never released (below)
//	the rest         docs, declaration order, moves between files, value=
//	                 dropped (tools then show the rows' bytes undecoded)
//
// Renames are allowed because stored bytes hold no names: a record is its
// version byte and its fields in order, a key its tag and fields in order.
// A renamed field or type changes the generated API, and the compiler then
// names every use to update; what the compiler cannot see, a name moving
// to another field of the same type, is refused (field-moved, and
// renumbered for key classes, variants and enum constants). A rename that
// changes a field's meaning without changing its type (DueAtMs to
// DueAtSec) is a change of what the bytes mean, which no generator can
// see: make it a new record version instead.
//
// A loosened bound keeps every stored row readable, but a newer binary may
// then write a value an older one refuses: in a rolling deploy, write such
// values only once no process runs the older binary.
//
// A key class or record no longer declared is retired by a line in a
// package doc comment of the schema, a variant or an enum constant by its
// union's or enum's directive, and a version leaving a family (by its
// version byte) by its key class's directive:
//
//	//mk:retired key=105,106
//	//mk:retired record=OrderV0
//	//mk:union partition retired=3
//	//mk:enum retired=4
//	//mk:key tag=100 value=OrderV2 retired=1
//
// A retired number or record name is reserved for ever, as protobuf's
// reserved is: the lock keeps it (with the name it last had), a
// declaration that takes it is refused, and so is a schema that drops the
// retirement. Retire only what no stored row holds any more (rewrite or
// delete those rows first): decoders refuse a retired variant tag or enum
// value as unknown, which is corrupt.
//
// A key class or record never released is marked draft (//mk:record
// version=2 draft; //mk:key tag=105 value=OrderV2 draft): the lock lists it
// without its layout, so it may change freely, and its generated doc says
// so. Removing draft releases it: the next run locks its layout. A
// released layout cannot become a draft again, and a released key class
// cannot hold a draft record. The mark is chosen over a flag that rewrites
// the lock because it is in the schema, seen in review, and acts on one
// declaration, whereas a flag left in a go:generate line, a Makefile or a
// CI script would unlock every layout at once, silently. Never let a draft
// reach a store that keeps its rows: after its next change they may not
// decode.
//
//mk:namespace mkit
package schema
