// Package schema declares, for TestEveryFieldTypeGenerates, a record of
// every field type that package schema documents (scalars, enums,
// identities, strings, []byte, fixed arrays, optionals, nested structs,
// unions and slices of each), a key class of every one that has a tuple
// form, and value families (EvKey, EvOneKey) whose versions, variants
// and enum constants declare formats. A type the generator breaks fails
// the test here before it reaches a schema of the repository.
//
//mk:namespace everytype
package schema

// Color is an enum.
//
//mk:enum
type Color uint8

const (
	ColorRed   Color = 1
	ColorGreen Color = 2
	ColorBlue  Color = 7
	ColorTeal  Color = 9 //mk:format=2
)

// Name is an identity.
//
//mk:identity min=1 max=16
type Name string

// Label is an identity whose zero value (empty) is valid.
//
//mk:identity min=0 max=8
type Label string

// Inner is a plain struct nested in records.
type Inner struct {
	A    uint32
	S    string   `mk:"max=10"`
	B    []byte   `mk:"max=6"`
	Tags []string `mk:"max=3,elem_max=5"`
}

// Empty is a struct with no fields.
type Empty struct{}

// Circle, Rect and Nothing are the variants of Shape.
type Circle struct {
	R uint32
}

// Rect is a variant of Shape.
type Rect struct {
	W, H  uint16
	Color Color
	Who   Name
	On    bool
}

// Nothing is a variant of Shape without fields.
type Nothing struct{}

// Shape is a union of scalars and names, also used in keys.
//
//mk:union
type Shape struct {
	Circle  *Circle  `mk:"tag=1"`
	Rect    *Rect    `mk:"tag=2"`
	Nothing *Nothing `mk:"tag=3"`
}

// Bag and Note are the variants of Payload.
type Bag struct {
	Items [][]byte `mk:"max=4,elem_max=8"`
	Inner Inner
}

// Note is a variant of Payload.
type Note struct {
	Text string `mk:"max=20"`
}

// Payload is a union whose variants hold slices and strings.
//
//mk:union
type Payload struct {
	Bag  *Bag  `mk:"tag=1"`
	Note *Note `mk:"tag=2"`
}

// PlaceA and PlaceB are the variants of Place.
type PlaceA struct {
	Who  Name
	Slot uint32
}

// PlaceB is a variant of Place.
type PlaceB struct {
	Who  Name
	Also Name
}

// Place is a partition union.
//
//mk:union partition
type Place struct {
	A *PlaceA `mk:"tag=1,kind=a"`
	B *PlaceB `mk:"tag=2,kind=b"`
}

// Scalars: one record each.

//mk:record version=1
type RU8 struct{ V uint8 }

//mk:record version=1
type RU16 struct{ V uint16 }

//mk:record version=1
type RU32 struct{ V uint32 }

//mk:record version=1
type RU64 struct{ V uint64 }

//mk:record version=1
type RI64 struct{ V int64 }

//mk:record version=1
type RBool struct{ V bool }

//mk:record version=1
type RString struct {
	V string `mk:"max=12"`
}

//mk:record version=1
type REnum struct{ V Color }

//mk:record version=1
type RName struct{ V Name }

//mk:record version=1
type RLabel struct{ V Label }

//mk:record version=1
type RBytes struct {
	V []byte `mk:"max=9"`
}

//mk:record version=1
type ROptionalBytes struct {
	V []byte `mk:"max=9,optional"`
}

// RLong has a field whose lengths take three bytes and more on the wire
// (values of 16384 bytes and longer), which the fast path reads itself
// (testdata/everygen/fastpath_test.go).
//
//mk:record version=1
type RLong struct {
	Key []byte `mk:"max=8"`
	V   []byte `mk:"max=100000"`
}

//mk:record version=1
type RArray struct{ V [4]byte }

//mk:record version=1
type RArray1 struct{ V [1]byte }

// Optionals: one record each.

//mk:record version=1
type RPtrU8 struct{ V *uint8 }

//mk:record version=1
type RPtrU16 struct{ V *uint16 }

//mk:record version=1
type RPtrU32 struct{ V *uint32 }

//mk:record version=1
type RPtrU64 struct{ V *uint64 }

//mk:record version=1
type RPtrI64 struct{ V *int64 }

//mk:record version=1
type RPtrBool struct{ V *bool }

//mk:record version=1
type RPtrEnum struct{ V *Color }

// Nested structs and unions.

//mk:record version=1
type RStruct struct{ V Inner }

//mk:record version=1
type REmpty struct{ V Empty }

//mk:record version=1
type RShape struct{ V Shape }

//mk:record version=1
type RPayload struct{ V Payload }

//mk:record version=1
type RPlace struct{ V Place }

// Dot, Box and Gone are the variants of RUnion.
type Dot struct {
	X    uint64
	Tags []string `mk:"max=3,elem_max=4"`
}

// Box is a variant of RUnion.
type Box struct {
	Items []Inner `mk:"max=3"`
	Color Color
}

// Gone is a variant of RUnion without fields.
type Gone struct{}

// RUnion is a record union.
//
//mk:record version=3 union
type RUnion struct {
	Dot  *Dot  `mk:"tag=1"`
	Box  *Box  `mk:"tag=2"`
	Gone *Gone `mk:"tag=9"`
}

// Slices of every element type.

//mk:record version=1
type RSliceU16 struct {
	V []uint16 `mk:"max=5"`
}

//mk:record version=1
type RSliceU32 struct {
	V []uint32 `mk:"max=5"`
}

//mk:record version=1
type RSliceU64 struct {
	V []uint64 `mk:"max=5,sorted"`
}

//mk:record version=1
type RSliceI64 struct {
	V []int64 `mk:"max=5"`
}

//mk:record version=1
type RSliceBool struct {
	V []bool `mk:"max=5"`
}

//mk:record version=1
type RSliceString struct {
	V []string `mk:"max=4,elem_max=6"`
}

//mk:record version=1
type RSliceSortedString struct {
	V []string `mk:"max=4,elem_max=6,sorted"`
}

//mk:record version=1
type RSliceEnum struct {
	V []Color `mk:"max=5"`
}

//mk:record version=1
type RSliceName struct {
	V []Name `mk:"max=5,sorted"`
}

//mk:record version=1
type RSliceLabel struct {
	V []Label `mk:"max=5"`
}

//mk:record version=1
type RSliceBytes struct {
	V [][]byte `mk:"max=5,elem_max=7"`
}

//mk:record version=1
type RSliceArray struct {
	V [][4]byte `mk:"max=5"`
}

//mk:record version=1
type RSliceStruct struct {
	V []Inner `mk:"max=5"`
}

//mk:record version=1
type RSliceEmpty struct {
	V []Empty `mk:"max=5"`
}

//mk:record version=1
type RSliceShape struct {
	V []Shape `mk:"max=5,sorted"`
}

//mk:record version=1
type RSlicePayload struct {
	V []Payload `mk:"max=5"`
}

//mk:record version=1
type RSlicePlace struct {
	V []Place `mk:"max=5,sorted"`
}

// RAll holds every field type at once, with the integer rules, so runs of
// names and fixed-size fields sit next to each other.
//
//mk:record version=2
type RAll struct {
	Lo      uint64 `mk:"min=3"`
	Hi      uint64 `mk:"le=Lo"`
	A       uint8
	B       uint16
	C       uint32
	D       int64
	E       bool
	Who     Name
	Also    Name
	Label   Label
	Text    string `mk:"max=12"`
	Text2   string `mk:"max=3"`
	Color   Color
	Bytes   []byte `mk:"max=9"`
	Maybe   []byte `mk:"max=9,optional"`
	Fixed   [4]byte
	PtrU8   *uint8
	PtrU16  *uint16
	PtrU32  *uint32
	PtrU64  *uint64
	PtrI64  *int64
	PtrBool *bool
	PtrEnum *Color
	Inner   Inner
	Empty   Empty
	Shape   Shape
	Payload Payload
	Place   Place
	U16s    []uint16  `mk:"max=5"`
	U32s    []uint32  `mk:"max=5"`
	U64s    []uint64  `mk:"max=5"`
	I64s    []int64   `mk:"max=5"`
	Bools   []bool    `mk:"max=5"`
	Strings []string  `mk:"max=4,elem_max=6"`
	Colors  []Color   `mk:"max=5"`
	Names   []Name    `mk:"max=5"`
	Labels  []Label   `mk:"max=5"`
	Blobs   [][]byte  `mk:"max=5,elem_max=7"`
	Arrays  [][4]byte `mk:"max=5"`
	Inners  []Inner   `mk:"max=5"`
	Empties []Empty   `mk:"max=5"`
	Shapes  []Shape   `mk:"max=5"`
	Loads   []Payload `mk:"max=5"`
	Places  []Place   `mk:"max=5"`
}

// Key classes: one per type with a tuple form, and one of them all.

//mk:key tag=101
type KU8 struct{ V uint8 }

//mk:key tag=102
type KU16 struct{ V uint16 }

//mk:key tag=103
type KU32 struct{ V uint32 }

//mk:key tag=104
type KU64 struct{ V uint64 }

//mk:key tag=105
type KI64 struct{ V int64 }

//mk:key tag=106
type KBool struct{ V bool }

//mk:key tag=107
type KString struct {
	V string `mk:"max=12"`
}

//mk:key tag=108
type KBytes struct {
	V []byte `mk:"max=9"`
}

//mk:key tag=109
type KEnum struct{ V Color }

//mk:key tag=110
type KName struct{ V Name }

//mk:key tag=111
type KLabel struct{ V Label }

//mk:key tag=112
type KShape struct{ V Shape }

//mk:key tag=113
type KPlace struct{ V Place }

//mk:key tag=114
type KSingleton struct{}

//mk:key tag=300
type KAll struct {
	A     uint8
	B     uint16
	C     uint32
	D     uint64
	E     int64
	F     bool
	S     string `mk:"max=12"`
	Bytes []byte `mk:"max=9"`
	Color Color
	Who   Name
	Label Label
	Shape Shape
	Place Place
}

// Value families: EvKey's rows hold three versions of a value (version 3
// was retired between them), the newest a union with a variant of a
// format above its own; ColorTeal is a constant of format 2.

// EvA is the oldest version of EvKey's value.
//
//mk:record version=1
type EvA struct {
	N     uint32
	Color Color
}

// EvB adds a label.
//
//mk:record version=2 format=2
type EvB struct {
	N     uint32
	Color Color
	Label string `mk:"max=8"`
}

// EvPlain is a variant of EvC.
type EvPlain struct {
	N     uint32
	Color Color
	Label string `mk:"max=8"`
}

// EvFancy is EvC's variant of format 4, above EvC's own.
type EvFancy struct {
	N      uint32
	Colors []Color `mk:"max=3"`
}

// EvC is the newest version of EvKey's value: a union.
//
//mk:record version=4 format=3 union
type EvC struct {
	Plain *EvPlain `mk:"tag=1"`
	Fancy *EvFancy `mk:"tag=2,format=4"`
}

// EvKey's rows hold an EvA, an EvB or an EvC.
//
//mk:key tag=115 value=EvA,EvB,EvC retired=3
type EvKey struct{ ID uint64 }

// EvOneKey's family has one version.
//
//mk:key tag=116 value=RU64
type EvOneKey struct{ ID uint64 }
