package main

import "go/token"

// The model: what the schema declares, resolved and checked, with no Go
// syntax left in it. Loading builds it (load.go), checking proves it sound
// (check.go), and the emitters only read it.

// declKind says what a declaration is.
type declKind int

const (
	kindStruct   declKind = iota // a plain struct used inside records
	kindIdentity                 // //mk:identity: a validated string
	kindEnum                     // //mk:enum: closed uint8 constants
	kindUnion                    // //mk:union: exactly one of several structs
)

// decl is one declared type.
type decl struct {
	Name string
	Kind declKind
	Pos  token.Position
	Doc  string

	// identity bounds, in bytes
	Min, Max int

	// enum values, in declaration order
	Values []enumValue

	// struct, key and record fields, in order
	Fields []*field

	// union variants, in declaration order; Partition marks a union that
	// identifies partitions (it implements store.Partition)
	Variants  []*variant
	Partition bool

	// key class: Key is set with its tag; Family is its value family,
	// the records its rows may hold, oldest first, when the schema says
	// (value=A,B)
	Key         bool
	Tag         uint32
	Family      []*decl
	familyNames []string
	familyPos   token.Position

	// record: Record is set with its version, and Format with the store
	// format that introduced it (format=, default 1)
	Record  bool
	Version uint8
	Format  uint32

	// Draft marks a key class or record the schema declares unreleased
	// (the draft argument of its directive): the layout lock does not hold
	// it, so its layout may still change.
	Draft bool
	// Retired lists the numbers a union's variants (tags), an enum's
	// constants (values) or a key class's value family (version bytes) may
	// never take again: the retired= argument of its directive.
	Retired []*retired

	// usedInTuple marks unions encoded inside keys (nested tuples) or as
	// partition identities.
	usedInTuple bool
}

type enumValue struct {
	Name   string // the Go constant name
	Short  string // Name without the type's prefix, for String()
	Value  uint8
	Format uint32 // the store format that introduced it (//mk:format=N, default 1)
}

type variant struct {
	Name     string // the union field's name, e.g. Ref
	Type     *decl  // the variant's struct
	Tag      uint8
	KindName string // partition kind ("ref"), partition unions only
	Format   uint32 // the store format that introduced it (format=N, default 1)
	Pos      token.Position

	// guessed holds the options a misspelled one was reported as: check
	// does not report them missing as well.
	guessed map[string]bool
}

// field is one field of a struct, key or record.
type field struct {
	Name string
	Type *typeRef
	Pos  token.Position

	Max, ElemMax       int
	HasMax, HasElemMax bool
	Min                uint64
	HasMin             bool
	Le                 string // name of the field this one is at most
	Sorted             bool
	Optional           bool

	// guessed holds the options a misspelled one was reported as: check
	// does not report them missing as well.
	guessed map[string]bool
}

// elem is the field an element of fl, a slice, is checked, decoded and
// exampled as: a string or []byte element is bounded by fl's elem_max.
func (fl *field) elem() *field {
	return &field{Name: fl.Name, Pos: fl.Pos, Max: fl.ElemMax, HasMax: fl.HasElemMax}
}

// refKind says what shape a typeRef has.
type refKind int

const (
	refPrim  refKind = iota // uint8..uint64, int64, bool, string
	refBytes                // []byte
	refArray                // [N]byte
	refNamed                // a declared type
	refSlice                // []T
	refPtr                  // *T, an optional scalar
)

// typeRef is the type of a field or element.
type typeRef struct {
	Kind refKind
	Prim string // refPrim: uint8, uint16, uint32, uint64, int64, bool, string
	Len  int    // refArray
	Decl *decl  // refNamed
	Elem *typeRef

	name string // refNamed before resolution
}

// schema is the whole model.
type schema struct {
	Decls  []*decl // in source order
	byName map[string]*decl
	pkg    string // the generated package's name, set by generate
	// unregistered: the package does not register itself in package
	// registry (codegen -unregistered), set by generate.
	unregistered bool

	// Namespace is the schema's //mk:namespace: the first element of every
	// partition identity it generates.
	Namespace string
	// library marks the library's own schema package (libraryPkg), the
	// only one allowed the reserved namespaces and key class tags.
	library bool
	// nsPos is the position of the //mk:namespace directive.
	nsPos token.Position

	// RetiredKeys and RetiredRecords are the key class tags and record
	// names the schema's //mk:retired lines reserve for ever.
	RetiredKeys    []*retired
	RetiredRecords []*retired
}

// retired is one retired number (a key class tag, a variant tag, an enum
// value) or record name. Name is, for a number, the name it last had as
// the layout lock knows it ("" when the lock never held it); the lock
// comparison fills it in.
type retired struct {
	Num  uint64
	Name string
	Pos  token.Position
}

// retiredNum returns the entry of list that retires n, or nil.
func retiredNum(list []*retired, n uint64) *retired {
	for _, r := range list {
		if r.Num == n {
			return r
		}
	}
	return nil
}

// retiredName returns the entry of list that retires name, or nil.
func retiredName(list []*retired, name string) *retired {
	for _, r := range list {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// newest is the newest version of key class d's value family, or nil.
func (d *decl) newest() *decl {
	if len(d.Family) == 0 {
		return nil
	}
	return d.Family[len(d.Family)-1]
}

// lastVersion is the largest version byte key class d's family has ever
// held: its newest version's, or a retired one's above it. A value whose
// version is above it was written by a newer schema.
func (d *decl) lastVersion() uint8 {
	last := uint8(0)
	if n := d.newest(); n != nil {
		last = n.Version
	}
	for _, r := range d.Retired {
		last = max(last, uint8(r.Num))
	}
	return last
}

// format is the schema's known format: the largest format= it declares
// on a record, variant or enum constant, 1 when it declares none.
func (s *schema) format() uint32 {
	f := uint32(1)
	for _, d := range s.Decls {
		f = max(f, d.Format)
		for _, v := range d.Variants {
			f = max(f, v.Format)
		}
		for _, v := range d.Values {
			f = max(f, v.Format)
		}
	}
	return f
}

// keys returns the key classes in source order.
func (s *schema) keys() []*decl { return s.filter(func(d *decl) bool { return d.Key }) }

// records returns the records in source order.
func (s *schema) records() []*decl { return s.filter(func(d *decl) bool { return d.Record }) }

func (s *schema) filter(keep func(*decl) bool) []*decl {
	var out []*decl
	for _, d := range s.Decls {
		if keep(d) {
			out = append(out, d)
		}
	}
	return out
}
