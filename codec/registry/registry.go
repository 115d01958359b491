// Package registry lists the schemas linked into a program: every package
// cmd/codegen generates registers itself here when it is initialised,
// with its namespace, its import path, and what decodes its partitions,
// keys and records by name. Tools that read a store without knowing its
// schemas in advance (an operator command that prints any partition's
// rows) look them up here.
//
// A namespace names one schema: a partition identity starts with it, and
// the partition holds that schema's records plus the library's runtime
// records (namespace "mkit", package gen). Two generated packages that
// declare one namespace cannot both be linked into a program, since
// nothing could tell their rows apart: the second to initialise panics,
// naming both import paths, so the program fails at start.
//
// [Register] is for generated code; [Lookup] and [All] are safe for concurrent
// use, and see every package once init has run.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
)

// ErrNotLinked is the error of IdentityPrefix for an identity whose
// namespace no linked package declares.
var ErrNotLinked = errors.New("registry: namespace not linked into this program")

// Schema is one generated package.
type Schema struct {
	// Namespace is the schema's namespace (its //mk:namespace).
	Namespace string
	// Format is the newest store format the schema knows: the largest
	// format= it declares on a record, variant or enum constant, 1 when
	// it declares none. A store whose format of the namespace is above it
	// may hold what the package cannot read.
	Format uint32
	// ImportPath is the generated package's import path.
	ImportPath string
	// Partitions are the schema's partition unions (none for the
	// library's own schema).
	Partitions []PartitionUnion
	// Keys are the schema's key classes, in tag order.
	Keys []KeyClass
	// Records are the schema's records, in declaration order.
	Records []Record
}

// Partition is a parsed partition identity: a generated partition
// variant, which is a store.Partition.
type Partition interface {
	AppendTuple(dst []byte) ([]byte, error)
	Kind() string
}

// PartitionUnion is a partition union: Parse parses an identity of one of
// its variants (the generated Parse<Union>), failing with an error
// wrapping wire.ErrCorrupt for any other bytes; ParsePrefix (the
// generated Parse<Union>Prefix) parses one at the start of a longer key
// and returns the bytes it takes.
type PartitionUnion struct {
	Name        string
	Parse       func(identity []byte) (Partition, error)
	ParsePrefix func(b []byte) (Partition, int, error)
}

// KeyClass is a key class: Parse parses a key of the class (the generated
// Parse<Key>) into its typed value, failing with an error wrapping
// wire.ErrCorrupt for any other bytes.
//
// Values is the class's value family when the schema declares one
// (//mk:key value=A,B): the records its rows may hold, each a Record of
// the same schema, oldest first. It is empty for a class whose value is
// another's to decide, such as a timer's. ValueVersion (the generated
// VersionOf<Key>Value) then returns the version byte that opens a row's
// value, which names the one of Values that decodes it; it fails with a
// *wire.VersionError (wire.ErrNewerVersion) for a version above the
// family's newest, and with an error wrapping wire.ErrCorrupt for any
// other byte the family does not declare.
type KeyClass struct {
	Tag          uint32
	Name         string
	Parse        func(key []byte) (any, error)
	Values       []string
	ValueVersion func(value []byte) (uint8, error)
}

// ValueRecord returns the record of k's value family that decodes value,
// a row's value, as it is stored (never upgraded), from s, k's schema:
// the one whose version opens value. It fails as k.ValueVersion does, and
// with an error of its own when k has no value family or s lacks the
// record (a KeyClass of another schema).
func (s Schema) ValueRecord(k KeyClass, value []byte) (Record, error) {
	if len(k.Values) == 0 || k.ValueVersion == nil {
		return Record{}, fmt.Errorf("registry: key class %s declares no value family", k.Name)
	}
	v, err := k.ValueVersion(value)
	if err != nil {
		return Record{}, err
	}
	for _, name := range k.Values {
		if r, ok := s.Record(name); ok && r.Version == int(v) {
			return r, nil
		}
	}
	return Record{}, fmt.Errorf("registry: schema %q has no record of version %d in key class %s's value family", s.Namespace, v, k.Name)
}

// Record is a record version: Decode decodes a value (the generated
// Decode<Record>) into its typed value, failing with an error wrapping
// wire.ErrCorrupt for any other bytes. Format is the store format that
// introduced it (its format=, 1 by default): a value family writes it
// only to a store of that format or above.
type Record struct {
	Name    string
	Version int
	Format  uint32
	Decode  func(value []byte) (any, error)
}

var (
	mu      sync.RWMutex
	schemas = map[string]Schema{}
)

// Register registers a generated package; generated code calls it from
// init. It panics when s has no namespace or import path, or when another
// package registered s's namespace, naming both import paths: two schemas
// of one namespace cannot share a program.
func Register(s Schema) {
	if s.Namespace == "" || s.ImportPath == "" {
		panic(fmt.Sprintf("registry: schema without a namespace or import path: %q %q", s.Namespace, s.ImportPath))
	}
	mu.Lock()
	defer mu.Unlock()
	if prev, dup := schemas[s.Namespace]; dup {
		panic(fmt.Sprintf("registry: namespace %q is declared by two linked packages, %s and %s: a partition's rows belong to one schema, so a program links one package per namespace",
			s.Namespace, prev.ImportPath, s.ImportPath))
	}
	schemas[s.Namespace] = s
}

// Lookup returns the schema of namespace ns, and whether one is linked.
func Lookup(ns string) (Schema, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := schemas[ns]
	return s, ok
}

// All returns every linked schema, in namespace order.
func All() []Schema {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Schema, 0, len(schemas))
	for _, s := range schemas {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Schema) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out
}

// Key returns the key class of tag, and whether the schema has one.
func (s Schema) Key(tag uint32) (KeyClass, bool) {
	for _, k := range s.Keys {
		if k.Tag == tag {
			return k, true
		}
	}
	return KeyClass{}, false
}

// Record returns the record named name, and whether the schema has one.
func (s Schema) Record(name string) (Record, bool) {
	for _, r := range s.Records {
		if r.Name == name {
			return r, true
		}
	}
	return Record{}, false
}

// PartitionParser adapts a generated Parse<Union> to PartitionUnion.Parse.
func PartitionParser[P Partition](parse func([]byte) (P, error)) func([]byte) (Partition, error) {
	return func(b []byte) (Partition, error) {
		p, err := parse(b)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// IdentityPrefix parses the partition identity at the start of b (a raw
// store key after its root prefix: identity, then the partition's own
// key), by the linked schema of the namespace its first element names. It
// returns that schema, the parsed partition and the identity's length in
// bytes. It fails with an error wrapping ErrNotLinked, naming the
// namespace (returned too), when no linked package declares it, and with
// the last union's error (wrapping wire.ErrCorrupt) when none of the
// schema's partition unions parses b; ns is "" when b does not start with
// a tuple string.
func IdentityPrefix(b []byte) (s Schema, p Partition, n int, ns string, err error) {
	r := tuple.NewReader(b)
	ns, err = r.ReadString()
	if err != nil {
		return Schema{}, nil, 0, "", fmt.Errorf("registry: no namespace first: %w", err)
	}
	s, ok := Lookup(ns)
	if !ok {
		return Schema{}, nil, 0, ns, fmt.Errorf("%w: %q", ErrNotLinked, ns)
	}
	err = fmt.Errorf("registry: namespace %q declares no partitions", ns)
	for _, u := range s.Partitions {
		if u.ParsePrefix == nil {
			continue
		}
		if p, n, err = u.ParsePrefix(b); err == nil {
			return s, p, n, ns, nil
		}
	}
	return s, nil, 0, ns, err
}

// PartitionPrefixParser adapts a generated Parse<Union>Prefix to
// PartitionUnion.ParsePrefix.
func PartitionPrefixParser[P Partition](parse func([]byte) (P, int, error)) func([]byte) (Partition, int, error) {
	return func(b []byte) (Partition, int, error) {
		p, n, err := parse(b)
		if err != nil {
			return nil, 0, err
		}
		return p, n, nil
	}
}

// KeyParser adapts a generated Parse<Key> to KeyClass.Parse.
func KeyParser[K any](parse func([]byte) (K, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		k, err := parse(b)
		if err != nil {
			return nil, err
		}
		return k, nil
	}
}

// Decoder adapts a generated Decode<Record> to Record.Decode.
func Decoder[R any](decode func([]byte) (R, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		r, err := decode(b)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}
