package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// lockBase is the released schema the layout lock tests edit: a record
// of most field kinds and bounds, a union record, a partition union, an
// enum, an identity, key classes with and without a value. ~ stands for a
// backquote.
const lockBase = `//mk:namespace test
package schema

// Name is an identity.
//
//mk:identity min=1 max=10
type Name string

//mk:enum
type Color uint8

const (
	ColorRed  Color = 1
	ColorBlue Color = 2
)

// Part is a struct a record uses.
type Part struct {
	SKU string ~mk:"max=8"~
	N   uint32 ~mk:"min=1"~
}

type RegionShard struct {
	Region uint16
}

type NameShard struct {
	Who Name
}

//mk:union partition
type Shard struct {
	Region *RegionShard ~mk:"tag=1,kind=region"~
	Named  *NameShard   ~mk:"tag=2,kind=named"~
}

type Open struct {
	At uint64
}

type Closed struct {
	At     uint64
	Reason string ~mk:"max=100"~
}

//mk:key tag=100 value=OrderV1
type OrderKey struct {
	Who Name
	At  uint64
}

//mk:key tag=101
type IndexKey struct {
	Seq   uint64
	Label string ~mk:"max=20"~
}

//mk:record version=1
type OrderV1 struct {
	Color Color
	Count uint32
	Limit uint32
	Low   uint64 ~mk:"le=High"~
	High  uint64
	Parts []Part   ~mk:"max=10"~
	Tags  []string ~mk:"max=4,elem_max=16"~
	IDs   []uint64 ~mk:"max=8,sorted"~
	Hash  [16]byte
	Note  string ~mk:"max=200"~
	Blob  []byte ~mk:"max=64,optional"~
	Gift  *bool
}

//mk:record version=1 union
type StateV1 struct {
	Open   *Open   ~mk:"tag=1"~
	Closed *Closed ~mk:"tag=2"~
}
`

// edit is one replacement in lockBase: old must occur exactly once.
type edit struct{ old, new string }

// lockCase is a change to a released schema. before edits lockBase into
// the schema whose lock is written first (nothing: lockBase itself);
// after edits lockBase into the changed schema; extra, when set, is a
// second file of the changed schema. A refused change names its rule and
// where: the after line marked "// <-", or, with lockAt, the line of the
// lock that starts with lockAt; want is a further part of the error. An
// allowed change (rule "") must write a lock holding every line of want
// (separated by |), or, with want "same", the lock before, byte for byte.
type lockCase struct {
	name          string
	before, after []edit
	extra         string
	rule, lockAt  string
	line          int // the line of the error, for a line that cannot be marked
	want          string
}

// ~ in an edit stands for a backquote, as in lockBase.
var refusedChanges = []lockCase{
	// fields of a released record, and of the structs it uses
	{name: "field added", after: []edit{{"\tGift  *bool\n", "\tGift  *bool\n\tExtra bool // <-\n"}},
		rule: "field-added", want: "OrderV1.Extra: field added to released record OrderV1"},
	{name: "field added to a struct a record uses", after: []edit{{"\tN   uint32 ~mk:\"min=1\"~\n", "\tN   uint32 ~mk:\"min=1\"~\n\tQty uint8 // <-\n"}},
		rule: "field-added", want: "Part.Qty (in record OrderV1): field added to released struct Part"},
	{name: "field removed", after: []edit{{"\tNote  string ~mk:\"max=200\"~\n", ""}, {"type OrderV1 struct {", "type OrderV1 struct { // <-"}},
		rule: "field-removed", want: "field 10 (Note string) removed from released record OrderV1"},
	{name: "last field removed", after: []edit{{"\tGift  *bool\n", ""}, {"type OrderV1 struct {", "type OrderV1 struct { // <-"}},
		rule: "field-removed", want: "Gift *bool"},
	{name: "fields reordered", after: []edit{{"\tColor Color\n\tCount uint32\n", "\tCount uint32 // <-\n\tColor Color\n"}},
		rule: "field-moved", want: "OrderV1.Count: field 1, the lock holds it as field 2"},
	{name: "two fields of one type swap names", after: []edit{{"\tCount uint32\n\tLimit uint32\n", "\tLimit uint32 // <-\n\tCount uint32\n"}},
		rule: "field-moved"},
	{name: "field renamed and retyped", after: []edit{{"\tCount uint32\n", "\tQty uint64 // <-\n"}},
		rule: "retyped", want: "OrderV1.Qty (renamed from Count): uint64, the lock holds uint32"},
	{name: "field retyped", after: []edit{{"\tCount uint32\n", "\tCount uint64 // <-\n"}},
		rule: "retyped", want: "OrderV1.Count: uint64, the lock holds uint32"},
	{name: "integer made signed", after: []edit{{"\tHigh  uint64\n", "\tHigh  int64 // <-\n"}},
		rule: "retyped"},
	{name: "optional dropped", after: []edit{{"~mk:\"max=64,optional\"~", "~mk:\"max=64\"~ // <-"}},
		rule: "retyped", want: "[]byte, the lock holds []byte optional"},
	{name: "optional scalar made plain", after: []edit{{"\tGift  *bool\n", "\tGift  bool // <-\n"}},
		rule: "retyped", want: "bool, the lock holds *bool"},
	{name: "array length changed", after: []edit{{"\tHash  [16]byte\n", "\tHash  [32]byte // <-\n"}},
		rule: "retyped"},
	{name: "slice element retyped", after: []edit{{"\tIDs   []uint64 ~mk:\"max=8,sorted\"~\n", "\tIDs   []uint32 ~mk:\"max=8,sorted\"~ // <-\n"}},
		rule: "retyped"},
	{name: "identity field made a string", after: []edit{{"\tWho Name\n\tAt", "\tWho string ~mk:\"max=10\"~ // <-\n\tAt"}},
		rule: "retyped", want: "OrderKey.Who: string, the lock holds Name"},
	{name: "partition variant field retyped", after: []edit{{"\tRegion uint16\n", "\tRegion uint32 // <-\n"}},
		rule: "retyped", want: "RegionShard.Region (in partition union Shard): uint32, the lock holds uint16"},
	{name: "struct field made a union", after: []edit{{"\tParts []Part   ~mk:\"max=10\"~\n", "\tParts []Shard ~mk:\"max=10\"~ // <-\n"}},
		rule: "retyped"},

	// bounds
	{name: "string max lowered", after: []edit{{"~mk:\"max=200\"~", "~mk:\"max=199\"~ // <-"}},
		rule: "bound-tightened", want: "OrderV1.Note: max=199: the lock holds max=200"},
	{name: "slice max lowered", after: []edit{{"\tParts []Part   ~mk:\"max=10\"~\n", "\tParts []Part   ~mk:\"max=5\"~ // <-\n"}},
		rule: "bound-tightened"},
	{name: "elem_max lowered", after: []edit{{"~mk:\"max=4,elem_max=16\"~", "~mk:\"max=4,elem_max=8\"~ // <-"}},
		rule: "bound-tightened", want: "elem_max=8: the lock holds elem_max=16"},
	{name: "min raised", after: []edit{{"\tN   uint32 ~mk:\"min=1\"~\n", "\tN   uint32 ~mk:\"min=2\"~ // <-\n"}},
		rule: "bound-tightened", want: "Part.N (in record OrderV1): min=2: the lock holds min=1"},
	{name: "min added", after: []edit{{"\tCount uint32\n", "\tCount uint32 ~mk:\"min=1\"~ // <-\n"}},
		rule: "bound-tightened", want: "min=1: the lock holds no min"},
	{name: "le added", after: []edit{{"\tLimit uint32\n", "\tLimit uint32 ~mk:\"le=Count\"~ // <-\n"}},
		rule: "bound-tightened", want: "le=Count: the lock holds no le"},
	{name: "le moved to another field", after: []edit{{"~mk:\"le=High\"~", "~mk:\"le=Count\"~ // <-"}},
		rule: "bound-tightened", want: "le=Count: the lock holds le=High"},
	{name: "sorted added", after: []edit{{"~mk:\"max=4,elem_max=16\"~", "~mk:\"max=4,elem_max=16,sorted\"~ // <-"}},
		rule: "bound-tightened", want: "sorted: the lock holds it unsorted"},
	{name: "identity max lowered", after: []edit{{"//mk:identity min=1 max=10\ntype Name string", "//mk:identity min=1 max=9\ntype Name string // <-"}},
		rule: "bound-tightened", want: "identity Name (in key class OrderKey): max=9: the lock holds max=10"},
	{name: "identity min raised", after: []edit{{"//mk:identity min=1 max=10\ntype Name string", "//mk:identity min=2 max=10\ntype Name string // <-"}},
		rule: "bound-tightened", want: "min=2: the lock holds min=1"},
	{name: "key field max lowered", after: []edit{{"\tLabel string ~mk:\"max=20\"~\n", "\tLabel string ~mk:\"max=10\"~ // <-\n"}},
		rule: "bound-tightened", want: "IndexKey.Label: max=10"},

	// key classes
	{name: "key class field added", after: []edit{{"\tAt  uint64\n}\n", "\tAt  uint64\n\tSeq uint64 // <-\n}\n"}},
		rule: "field-added", want: "field added to released key class OrderKey"},
	{name: "key class field removed", after: []edit{{"\tLabel string ~mk:\"max=20\"~\n", ""}, {"type IndexKey struct {", "type IndexKey struct { // <-"}},
		rule: "field-removed"},
	{name: "key class field retyped", after: []edit{{"\tAt  uint64\n}\n", "\tAt  int64 // <-\n}\n"}},
		rule: "retyped"},
	{name: "key class fields reordered", after: []edit{{"\tWho Name\n\tAt  uint64\n", "\tAt  uint64 // <-\n\tWho Name\n"}},
		rule: "field-moved"},
	{name: "key class renumbered", after: []edit{{"//mk:key tag=101\ntype IndexKey struct {", "//mk:key tag=102\ntype IndexKey struct { // <-"}},
		rule: "renumbered", want: "key IndexKey: tag 102: the lock holds it at tag 101"},
	{name: "key class moved, another in its place", after: []edit{{"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", "//mk:key tag=101\ntype OtherKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}\n\n//mk:key tag=102\ntype IndexKey struct { // <-\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}"}},
		rule: "renumbered", want: "key IndexKey: tag 102: the lock holds it at tag 101"},
	{name: "key class removed", after: []edit{{"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", ""}},
		rule: "removed", lockAt: "key 101 IndexKey", want: "key class IndexKey (tag 101) is no longer declared"},
	{name: "key value changed", after: []edit{{"//mk:key tag=100 value=OrderV1\ntype OrderKey struct {", "//mk:key tag=100 value=StateV1\ntype OrderKey struct { // <-"}},
		rule: "key-value", want: "value=StateV1: the released class holds value=OrderV1, whose OrderV1 (version 1) is no longer listed"},
	{name: "key value added", after: []edit{{"//mk:key tag=101\ntype IndexKey struct {", "//mk:key tag=101 value=OrderV1\ntype IndexKey struct { // <-"}},
		rule: "key-value", want: "the released class declared no record"},
	{name: "released key class marked draft", after: []edit{{"//mk:key tag=101\ntype IndexKey struct {", "//mk:key tag=101 draft\ntype IndexKey struct { // <-"}},
		rule: "released-draft"},

	// records
	{name: "record version renumbered", after: []edit{{"//mk:record version=1 union\ntype StateV1 struct {", "//mk:record version=2 union\ntype StateV1 struct { // <-"}},
		rule: "renumbered", want: "record StateV1: version=2: the lock holds version 1"},
	{name: "record renamed", after: []edit{{"type StateV1 struct {", "type StateV2 struct {"}},
		rule: "removed", lockAt: "record StateV1", want: "a rename is a removal"},
	{name: "record made a struct", after: []edit{{"//mk:record version=1 union\ntype StateV1 struct {\n\tOpen   *Open   ~mk:\"tag=1\"~\n\tClosed *Closed ~mk:\"tag=2\"~\n}", "//mk:record version=1\ntype StateV1 struct { // <-\n\tAt uint64\n}"}},
		rule: "retyped", want: "a union in the lock, a struct now"},
	{name: "released record marked draft", after: []edit{{"//mk:record version=1 union\ntype StateV1 struct {", "//mk:record version=1 union draft\ntype StateV1 struct { // <-"}},
		rule: "released-draft"},

	// variants
	{name: "variant renumbered", after: []edit{{"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", "\tNamed  *NameShard   ~mk:\"tag=3,kind=named\"~ // <-\n"}},
		rule: "renumbered", want: "variant Named: tag 3, the lock holds tag 2"},
	{name: "variants swap tags", after: []edit{{"\tOpen   *Open   ~mk:\"tag=1\"~\n\tClosed *Closed ~mk:\"tag=2\"~\n", "\tOpen   *Open   ~mk:\"tag=2\"~ // <-\n\tClosed *Closed ~mk:\"tag=1\"~\n"}},
		rule: "renumbered"},
	{name: "variant removed", after: []edit{{"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", ""}, {"type Shard struct {", "type Shard struct { // <-"}},
		rule: "removed", want: "variant Named (tag 2) is no longer declared"},
	{name: "variant's struct gains a field", after: []edit{{"\tReason string ~mk:\"max=100\"~\n", "\tReason string ~mk:\"max=100\"~\n\tBy     uint32 // <-\n"}},
		rule: "field-added", want: "Closed.By (in record StateV1)"},
	{name: "partition union removed", after: []edit{{"//mk:union partition\ntype Shard struct {\n\tRegion *RegionShard ~mk:\"tag=1,kind=region\"~\n\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n}", ""}},
		rule: "removed", lockAt: "union Shard partition"},

	// enums
	{name: "enum value renumbered", after: []edit{{"\tColorBlue Color = 2\n", "\tColorBlue Color = 3\n"}, {"type Color uint8", "type Color uint8 // <-"}},
		rule: "renumbered", want: "enum Color (in record OrderV1): ColorBlue = 3, the lock holds 2"},
	{name: "enum values swap names", after: []edit{{"\tColorRed  Color = 1\n\tColorBlue Color = 2\n", "\tColorRed  Color = 2\n\tColorBlue Color = 1\n"}, {"type Color uint8", "type Color uint8 // <-"}},
		rule: "renumbered"},
	{name: "enum value removed", after: []edit{{"\tColorBlue Color = 2\n", ""}, {"type Color uint8", "type Color uint8 // <-"}},
		rule: "removed", want: "ColorBlue (2) is no longer declared"},

	// retirement
	{name: "retired key tag reused",
		before: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey", "//mk:key tag=102\ntype IndexKey"}},
		after:  []edit{{"//mk:key tag=101\ntype IndexKey struct {", "//mk:key tag=101\ntype IndexKey struct { // <-"}},
		rule:   "retired-reused", want: "key IndexKey: tag 101 was retired"},
	{name: "retired key tag reused, the retirement kept",
		before: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey", "//mk:key tag=102\ntype IndexKey"}},
		after:  []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey struct {", "//mk:key tag=101\ntype IndexKey struct { // <-"}},
		rule:   "retired-reused", want: "tag 101 is retired (//mk:retired at"},
	{name: "key retirement dropped",
		before: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", ""}},
		after:  []edit{{"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", ""}},
		rule:   "retired-dropped", lockAt: "retired key 101", want: "key tag 101 is retired in the lock"},
	{name: "retired record name reused",
		before: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired record=StateV1\n"}, {"type StateV1 struct {", "type StateV2 struct {"}, {"//mk:record version=1 union\n", "//mk:record version=2 union\n"}},
		after:  []edit{{"type StateV1 struct {", "type StateV1 struct { // <-"}},
		rule:   "retired-reused", want: "record StateV1 was retired"},
	{name: "retired record name reused, the retirement kept",
		before: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired record=StateV1\n"}, {"type StateV1 struct {", "type StateV2 struct {"}},
		after:  []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired record=StateV1\n"}, {"type StateV1 struct {", "type StateV1 struct { // <-"}},
		rule:   "retired-reused", want: "record StateV1: the name is retired"},
	{name: "retired variant tag reused",
		before: []edit{{"//mk:record version=1 union\n", "//mk:record version=1 union retired=2\n"}, {"\tClosed *Closed ~mk:\"tag=2\"~\n", ""}},
		after:  []edit{{"\tClosed *Closed ~mk:\"tag=2\"~\n", "\tClosed *Closed ~mk:\"tag=2\"~ // <-\n"}},
		rule:   "retired-reused", want: "variant Closed: tag 2 was retired"},
	{name: "retired variant tag reused, the retirement kept",
		after: []edit{{"//mk:record version=1 union\n", "//mk:record version=1 union retired=2\n"}, {"\tClosed *Closed ~mk:\"tag=2\"~\n", "\tClosed *Closed ~mk:\"tag=2\"~ // <-\n"}},
		rule:  "retired-reused", want: "takes tag 2, which retired= reserves"},
	{name: "variant retirement dropped",
		before: []edit{{"//mk:union partition\n", "//mk:union partition retired=2\n"}, {"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", ""}},
		after:  []edit{{"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", ""}, {"type Shard struct {", "type Shard struct { // <-"}},
		rule:   "retired-dropped", want: "union Shard: tag 2 is retired in the lock"},
	{name: "retired enum value reused",
		before: []edit{{"//mk:enum\n", "//mk:enum retired=2\n"}, {"\tColorBlue Color = 2\n", ""}},
		after:  []edit{{"\tColorBlue Color = 2\n", "\tColorTeal Color = 2\n"}, {"type Color uint8", "type Color uint8 // <-"}},
		rule:   "retired-reused", want: "ColorTeal takes value 2, which was retired"},
	{name: "retired enum value reused, the retirement kept",
		after: []edit{{"//mk:enum\n", "//mk:enum retired=2\n"}, {"type Color uint8", "type Color uint8 // <-"}},
		rule:  "retired-reused", want: "ColorBlue takes value 2, which retired= reserves"},
	{name: "enum retirement dropped",
		before: []edit{{"//mk:enum\n", "//mk:enum retired=2\n"}, {"\tColorBlue Color = 2\n", ""}},
		after:  []edit{{"\tColorBlue Color = 2\n", ""}, {"type Color uint8", "type Color uint8 // <-"}},
		rule:   "retired-dropped"},

	// value families
	{name: "family version removed",
		before: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		after:  []edit{family("OrderV2"), withRecords(orderV2), markOrderKey},
		rule:   "key-value", want: "value=OrderV2: the released class holds value=OrderV1,OrderV2, whose OrderV1 (version 1) is no longer listed: keep it, or retire its version with retired=1"},
	{name: "family newest version removed",
		before: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		after:  []edit{withRecords(orderV2), markOrderKey},
		rule:   "key-value", want: "whose OrderV2 (version 2) is no longer listed"},
	{name: "family version inserted before a released one",
		before: []edit{family("OrderV1,OrderV3"), withRecords(orderV3)},
		after:  []edit{family("OrderV1,OrderV2,OrderV3"), withRecords(orderV2 + orderV3), markOrderKey},
		rule:   "key-value", want: "OrderV2 is listed before the released OrderV3 (the class holds value=OrderV1,OrderV3): a family gains versions only at its end"},
	{name: "family version added below a retired one",
		before: []edit{family("OrderV1 retired=3"), withRecords(orderV3)},
		after:  []edit{family("OrderV1,OrderV2 retired=3"), withRecords(orderV2 + orderV3), markOrderKey},
		rule:   "key-value", want: "OrderV2 (version 2) is added below version 3, which the released class held"},
	{name: "family version replaced by another of its version",
		before: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		after:  []edit{family("OrderV1,OrderV2b"), withRecords(orderV2 + orderV2b), markOrderKey},
		rule:   "key-value", want: "whose OrderV2 (version 2) is no longer listed"},
	{name: "family retirement dropped",
		before: []edit{family("OrderV2 retired=1"), withRecords(orderV2)},
		after:  []edit{family("OrderV2"), withRecords(orderV2), markOrderKey},
		rule:   "retired-dropped", want: "key OrderKey: version 1 of its value family is retired in the lock: keep it in retired="},
	{name: "retired family version reused",
		before: []edit{family("OrderV2 retired=1"), withRecords(orderV2)},
		after:  []edit{family("OrderV1,OrderV2"), withRecords(orderV2), markOrderKey},
		rule:   "retired-reused", want: "key OrderKey: OrderV1 takes version 1 of the family, which was retired"},
	{name: "retired family version reused, the retirement kept",
		before: []edit{family("OrderV2 retired=1"), withRecords(orderV2)},
		after:  []edit{family("OrderV1,OrderV2 retired=1"), withRecords(orderV2), markOrderKey},
		rule:   "retired-reused", want: "key OrderKey: OrderV1 takes version 1 of the family, which retired= reserves"},

	// formats
	{name: "record format lowered",
		before: []edit{{"//mk:record version=1 union\n", "//mk:record version=1 union format=3\n"}},
		after:  []edit{{"//mk:record version=1 union\ntype StateV1 struct {", "//mk:record version=1 union format=2\ntype StateV1 struct { // <-"}},
		rule:   "renumbered", want: "record StateV1: format=2: the lock holds format 3"},
	{name: "record format dropped to the default",
		before: []edit{{"//mk:record version=1\ntype OrderV1 struct {", "//mk:record version=1 format=2\ntype OrderV1 struct {"}},
		after:  []edit{{"type OrderV1 struct {", "type OrderV1 struct { // <-"}},
		rule:   "renumbered", want: "record OrderV1: format=1: the lock holds format 2"},
	{name: "variant format lowered",
		before: []edit{{"~mk:\"tag=2\"~", "~mk:\"tag=2,format=2\"~"}},
		after:  []edit{{"\tClosed *Closed ~mk:\"tag=2\"~\n", "\tClosed *Closed ~mk:\"tag=2\"~ // <-\n"}},
		rule:   "renumbered", want: "union StateV1: variant Closed: format=1, the lock holds format 2"},
	{name: "enum constant format lowered",
		before: []edit{{"\tColorBlue Color = 2\n", "\tColorBlue Color = 2 //mk:format=3\n"}},
		after:  []edit{{"\tColorBlue Color = 2\n", "\tColorBlue Color = 2 //mk:format=2\n"}, {"type Color uint8", "type Color uint8 // <-"}},
		rule:   "renumbered", want: "enum Color (in record OrderV1): ColorBlue: format=2, the lock holds format 3"},

	// the namespace
	{name: "namespace changed", after: []edit{{"//mk:namespace test\n", "//mk:namespace test2\n"}},
		line: 1, rule: "namespace", want: `namespace "test2": the lock holds "test"`},
}

var allowedChanges = []lockCase{
	{name: "family version appended",
		after: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		want:  "layout-lock 2\n|key 100 OrderKey value=OrderV1,OrderV2\n|record OrderV2 version=2\n"},
	{name: "family version appended after released ones",
		before: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		after:  []edit{family("OrderV1,OrderV2,OrderV3"), withRecords(orderV2 + orderV3)},
		want:   "key 100 OrderKey value=OrderV1,OrderV2,OrderV3\n"},
	{name: "family version retired",
		before: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		after:  []edit{family("OrderV2 retired=1"), withRecords(orderV2)},
		want:   "key 100 OrderKey value=OrderV2\n\tWho Name\n\tAt uint64\n\tretired 1 OrderV1\n"},
	{name: "a version added after a retired newest",
		before: []edit{family("OrderV1 retired=2")},
		after:  []edit{family("OrderV1,OrderV3 retired=2"), withRecords(orderV3)},
		want:   "key 100 OrderKey value=OrderV1,OrderV3\n\tWho Name\n\tAt uint64\n\tretired 2\n"},
	{name: "value= dropped from a family",
		before: []edit{family("OrderV1,OrderV2"), withRecords(orderV2)},
		after:  []edit{{"//mk:key tag=100 value=OrderV1\n", "//mk:key tag=100\n"}, withRecords(orderV2)},
		want:   "key 100 OrderKey\n"},
	{name: "record format raised",
		after: []edit{{"//mk:record version=1 union\n", "//mk:record version=1 union format=2\n"}},
		want:  "layout-lock 2\n|record StateV1 version=1 union format=2\n"},
	{name: "new variant of a format",
		after: []edit{{"\tClosed *Closed ~mk:\"tag=2\"~\n", "\tClosed *Closed ~mk:\"tag=2\"~\n\tLost   *Lost   ~mk:\"tag=3,format=2\"~\n}\n\ntype Lost struct {\n\tAt uint64\n"}},
		want:  "\t3 Lost Lost format=2\n"},
	{name: "new enum constant of a format",
		after: []edit{{"\tColorBlue Color = 2\n", "\tColorBlue Color = 2\n\tColorTeal Color = 9 //mk:format=4\n"}},
		want:  "\t9 ColorTeal format=4\n"},
	{name: "variant and enum constant formats raised",
		after: []edit{{"~mk:\"tag=2\"~", "~mk:\"tag=2,format=2\"~"}, {"\tColorBlue Color = 2\n", "\tColorBlue Color = 2 //mk:format=2\n"}},
		want:  "\t2 Closed Closed format=2\n|\t2 ColorBlue format=2\n"},
	{name: "a format on a draft record only", after: []edit{{"//mk:record version=1 union\n", "//mk:record version=2 draft format=2\ntype OrderV2 struct {\n\tA uint8\n}\n\n//mk:record version=1 union\n"}},
		want: "layout-lock 1\n|draft record OrderV2 version=2\n"},
	{name: "new record version", after: []edit{{"//mk:record version=1 union\n", "//mk:record version=2\ntype OrderV2 struct {\n\tColor Color\n\tGift  bool\n}\n\n//mk:record version=1 union\n"}},
		want: "record OrderV2 version=2|\tGift bool"},
	{name: "new key class", after: []edit{{"//mk:key tag=101\n", "//mk:key tag=102 value=OrderV1\ntype ByColorKey struct {\n\tColor Color\n}\n\n//mk:key tag=101\n"}},
		want: "key 102 ByColorKey value=OrderV1|\tColor Color"},
	{name: "new enum value", after: []edit{{"\tColorBlue Color = 2\n", "\tColorBlue Color = 2\n\tColorTeal Color = 9\n"}},
		want: "\t9 ColorTeal"},
	{name: "new partition variant", after: []edit{{"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", "\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n\tThird  *ThirdShard  ~mk:\"tag=3,kind=third\"~\n}\n\ntype ThirdShard struct {\n\tN uint64\n"}},
		want: "\t3 Third ThirdShard kind=third|struct ThirdShard"},
	{name: "new variant of a union record", after: []edit{{"\tClosed *Closed ~mk:\"tag=2\"~\n", "\tClosed *Closed ~mk:\"tag=2\"~\n\tLost   *Lost   ~mk:\"tag=3\"~\n}\n\ntype Lost struct {\n\tAt uint64\n"}},
		want: "\t3 Lost Lost"},
	{name: "field renamed, same type and position", after: []edit{{"\tCount uint32\n", "\tQuantity uint32\n"}},
		want: "\tQuantity uint32"},
	{name: "key field renamed", after: []edit{{"\tSeq   uint64\n", "\tSerial uint64\n"}},
		want: "\tSerial uint64"},
	{name: "bounds loosened", after: []edit{
		{"~mk:\"max=200\"~", "~mk:\"max=300\"~"},
		{"~mk:\"max=4,elem_max=16\"~", "~mk:\"max=8,elem_max=32\"~"},
		{"\tN   uint32 ~mk:\"min=1\"~\n", "\tN   uint32\n"},
		{"~mk:\"le=High\"~", ""},
		{"~mk:\"max=8,sorted\"~", "~mk:\"max=9\"~"},
		{"//mk:identity min=1 max=10", "//mk:identity min=0 max=20"},
		{"\tLabel string ~mk:\"max=20\"~\n", "\tLabel string ~mk:\"max=40\"~\n"},
	}, want: "\tNote string max=300|\tTags []string max=8 elem_max=32|\tN uint32\n|\tLow uint64\n|\tIDs []uint64 max=9\n|identity Name min=0 max=20|\tLabel string max=40"},
	{name: "key class retired", after: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", ""}},
		want: "retired key 101 IndexKey"},
	{name: "record retired", after: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired record=StateV1\n"}, {"//mk:record version=1 union\ntype StateV1 struct {\n\tOpen   *Open   ~mk:\"tag=1\"~\n\tClosed *Closed ~mk:\"tag=2\"~\n}", ""}},
		want: "retired record StateV1"},
	{name: "partition variant retired", after: []edit{{"//mk:union partition\n", "//mk:union partition retired=2\n"}, {"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", ""}},
		want: "\tretired 2 Named"},
	{name: "union record variant retired", after: []edit{{"//mk:record version=1 union\n", "//mk:record version=1 union retired=2\n"}, {"\tClosed *Closed ~mk:\"tag=2\"~\n", ""}},
		want: "record StateV1 version=1 union\n\t1 Open Open\n\tretired 2 Closed"},
	{name: "enum value retired", after: []edit{{"//mk:enum\n", "//mk:enum retired=2\n"}, {"\tColorBlue Color = 2\n", ""}},
		want: "enum Color\n\t1 ColorRed\n\tretired 2 ColorBlue"},
	{name: "retired number never declared",
		after: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=150,151\n"}},
		want:  "retired key 150\nretired key 151\n"},
	{name: "retirements stay",
		before: []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", ""}},
		after:  []edit{{"//mk:namespace test\n", "//mk:namespace test\n//mk:retired key=101\n"}, {"//mk:key tag=101\ntype IndexKey struct {\n\tSeq   uint64\n\tLabel string ~mk:\"max=20\"~\n}", ""}},
		want:   "same"},
	{name: "a draft record changes",
		before: []edit{{"//mk:record version=1 union\n", "//mk:record version=2 draft\ntype OrderV2 struct {\n\tA uint8\n}\n\n//mk:record version=1 union\n"}},
		after:  []edit{{"//mk:record version=1 union\n", "//mk:record version=2 draft\ntype OrderV2 struct {\n\tB string ~mk:\"max=9\"~\n\tA uint16\n}\n\n//mk:record version=1 union\n"}},
		want:   "draft record OrderV2 version=2"},
	{name: "a draft record is released",
		before: []edit{{"//mk:record version=1 union\n", "//mk:record version=2 draft\ntype OrderV2 struct {\n\tA uint8\n}\n\n//mk:record version=1 union\n"}},
		after:  []edit{{"//mk:record version=1 union\n", "//mk:record version=2\ntype OrderV2 struct {\n\tA uint16\n}\n\n//mk:record version=1 union\n"}},
		want:   "record OrderV2 version=2\n\tA uint16\n"},
	{name: "a draft key class changes",
		before: []edit{{"//mk:key tag=101\n", "//mk:key tag=102 draft\ntype NewKey struct {\n\tA uint8\n}\n\n//mk:key tag=101\n"}},
		after:  []edit{{"//mk:key tag=101\n", "//mk:key tag=102 draft\ntype NewKey struct {\n\tB uint64\n}\n\n//mk:key tag=101\n"}},
		want:   "draft key 102 NewKey"},
	{name: "struct type renamed", after: []edit{{"type Part struct {", "type Item struct {"}, {"[]Part ", "[]Item "}},
		want: "struct Item|\tParts []Item max=10"},
	{name: "identity type renamed", after: []edit{{"type Name string", "type Person string"}, {"\tWho Name\n}\n\n//mk:union", "\tWho Person\n}\n\n//mk:union"}, {"\tWho Name\n\tAt", "\tWho Person\n\tAt"}},
		want: "identity Person min=1 max=10"},
	{name: "key class renamed", after: []edit{{"type IndexKey struct {", "type SeqKey struct {"}},
		want: "key 101 SeqKey"},
	{name: "enum constant renamed", after: []edit{{"\tColorBlue Color = 2\n", "\tColorNavy Color = 2\n"}},
		want: "\t2 ColorNavy"},
	{name: "variant and partition kind renamed", after: []edit{{"\tNamed  *NameShard   ~mk:\"tag=2,kind=named\"~\n", "\tPerson *NameShard   ~mk:\"tag=2,kind=person\"~\n"}},
		want: "\t2 Person NameShard kind=person"},
	{name: "partition union renamed", after: []edit{{"type Shard struct {", "type Place struct {"}},
		want: "union Place partition"},
	{name: "key value dropped", after: []edit{{"//mk:key tag=100 value=OrderV1\n", "//mk:key tag=100\n"}},
		want: "key 100 OrderKey\n"},
	{name: "docs changed, a declaration moved to another file",
		after: []edit{{"// Part is a struct a record uses.\ntype Part struct {\n\tSKU string ~mk:\"max=8\"~\n\tN   uint32 ~mk:\"min=1\"~\n}\n", ""}, {"//mk:enum\n", "// Color is a colour.\n//\n//mk:enum\n"}},
		extra: "package schema\n\n// Part moved here.\ntype Part struct {\n\tSKU string ~mk:\"max=8\"~\n\tN   uint32 ~mk:\"min=1\"~\n}\n",
		want:  "same"},
}

// orderV2, orderV2b and orderV3 are records the value family of lockBase's
// OrderKey grows with (withRecords puts them before StateV1); orderV2b
// takes OrderV2's version.
const (
	orderV2  = "//mk:record version=2\ntype OrderV2 struct {\n\tColor Color\n\tGift  bool\n}\n\n"
	orderV2b = "//mk:record version=2\ntype OrderV2b struct {\n\tColor Color\n}\n\n"
	orderV3  = "//mk:record version=3\ntype OrderV3 struct {\n\tColor Color\n\tGift  bool\n\tWrap  bool\n}\n\n"
)

// family is the edit that makes OrderKey's directive value=list (and
// whatever follows list, such as retired=N).
func family(list string) edit {
	return edit{"//mk:key tag=100 value=OrderV1\n", "//mk:key tag=100 value=" + list + "\n"}
}

// withRecords is the edit that declares records before StateV1.
func withRecords(records string) edit {
	return edit{"//mk:record version=1 union\n", records + "//mk:record version=1 union\n"}
}

// markOrderKey marks OrderKey's line, where family errors are reported.
var markOrderKey = edit{"type OrderKey struct {", "type OrderKey struct { // <-"}

// apply makes lockBase's edits, with ~ for a backquote; each old text
// must occur once.
func apply(t *testing.T, edits []edit) string {
	t.Helper()
	src := lockBase
	for _, e := range edits {
		if n := strings.Count(src, e.old); n != 1 {
			t.Fatalf("edit %q occurs %d times in the schema", e.old, n)
		}
		src = strings.Replace(src, e.old, e.new, 1)
	}
	return strings.ReplaceAll(src, "~", "`")
}

// lockRun generates the schema in dir as cmd/codegen does, writing its
// lock, and returns the error.
func lockRun(dir string) error {
	out, err := build(dir, "testgen")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, lockName), out.lock, 0o644)
}

// TestLayoutLockRefuses: every change the layout lock refuses is
// reported at its file:line with its rule, and writes nothing.
func TestLayoutLockRefuses(t *testing.T) {
	for _, c := range refusedChanges {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "s.go"), apply(t, c.before))
			if err := lockRun(dir); err != nil {
				t.Fatalf("the released schema: %v", err)
			}
			lockBefore, err := os.ReadFile(filepath.Join(dir, lockName))
			if err != nil {
				t.Fatal(err)
			}
			after := apply(t, c.after)
			writeFile(t, filepath.Join(dir, "s.go"), after)
			if c.extra != "" {
				writeFile(t, filepath.Join(dir, "t.go"), strings.ReplaceAll(c.extra, "~", "`"))
			}
			err = lockRun(dir)
			if err == nil {
				t.Fatal("the change was not refused")
			}
			line := c.line
			if line == 0 && c.lockAt == "" {
				line = markedLine(t, after)
			}
			at := filepath.Join(dir, "s.go") + ":" + strconv.Itoa(line) + ":"
			if c.lockAt != "" {
				at = filepath.Join(dir, lockName) + ":" + strconv.Itoa(lockLine(t, lockBefore, c.lockAt)) + ":"
			}
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, at) && strings.HasSuffix(line, "(layout rule "+c.rule+")") && strings.Contains(line, c.want) {
					found = true
					t.Log(strings.TrimPrefix(line, dir+string(filepath.Separator)))
				}
			}
			if !found {
				t.Errorf("no error at %s with %q and layout rule %s; the report:\n%s", at, c.want, c.rule, err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, lockName)); string(got) != string(lockBefore) {
				t.Error("a refused change rewrote the lock")
			}
		})
	}
}

// TestLayoutLockAllows: every change the layout lock allows generates,
// extends or updates the lock as want says, and the lock it writes is
// then fresh: a second run writes the same bytes.
func TestLayoutLockAllows(t *testing.T) {
	for _, c := range allowedChanges {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "s.go"), apply(t, c.before))
			if err := lockRun(dir); err != nil {
				t.Fatalf("the released schema: %v", err)
			}
			lockBefore, err := os.ReadFile(filepath.Join(dir, lockName))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "s.go"), apply(t, c.after))
			if c.extra != "" {
				writeFile(t, filepath.Join(dir, "t.go"), strings.ReplaceAll(c.extra, "~", "`"))
			}
			if err := lockRun(dir); err != nil {
				t.Fatalf("refused: %v", err)
			}
			wantLock(t, dir, c.want, lockBefore)
			lock, _ := os.ReadFile(filepath.Join(dir, lockName))
			out, err := build(dir, "testgen")
			if err != nil {
				t.Fatalf("the second run: %v", err)
			}
			if string(out.lock) != string(lock) {
				t.Errorf("the second run renders another lock:\n%s\nthe first:\n%s", out.lock, lock)
			}
		})
	}
}

// wantLock checks the lock in dir holds every |-separated part of want,
// or, for "same", is before byte for byte.
func wantLock(t *testing.T, dir, want string, before []byte) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, lockName))
	if err != nil {
		t.Fatal(err)
	}
	if want == "same" {
		if string(lock) != string(before) {
			t.Errorf("the lock changed:\n%s\nwas:\n%s", lock, before)
		}
		return
	}
	for _, part := range strings.Split(want, "|") {
		if !strings.Contains(string(lock), part) {
			t.Errorf("the lock has no %q:\n%s", part, lock)
		}
	}
}

// markedLine is the line of src marked "// <-".
func markedLine(t *testing.T, src string) int {
	t.Helper()
	for i, line := range strings.Split(src, "\n") {
		if strings.HasSuffix(line, "// <-") {
			return i + 1
		}
	}
	t.Fatal("the changed schema marks no line with // <-")
	return 0
}

// lockLine is the line of lock that starts with prefix.
func lockLine(t *testing.T, lock []byte, prefix string) int {
	t.Helper()
	for i, line := range strings.Split(string(lock), "\n") {
		if strings.HasPrefix(line, prefix) {
			return i + 1
		}
	}
	t.Fatalf("the lock has no line starting %q:\n%s", prefix, lock)
	return 0
}

// TestGiftAddedToReleasedOrderIsRefused plays the edit that breaks every
// order already stored: a field added to the released OrderV1 of the
// orders example. In a module of its own holding the example's schema
// and its committed lock, go generate ./... (the schema's go:generate
// line) and the command make check-generated runs (codegen -check) must
// both refuse it, at the field's file:line, naming the rule.
func TestGiftAddedToReleasedOrderIsRefused(t *testing.T) {
	m := newTempModule(t, "example.com/shop")
	root := repoRoot(t)
	src, err := os.ReadFile(filepath.Join(root, "examples/orders/schema/orders.go"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join(root, "examples/orders/schema", lockName))
	if err != nil {
		t.Fatal(err)
	}
	// The schema's OrderV2 already has Gift: the edit adds it to OrderV1,
	// after OrderV1's last field.
	const open, note = "type OrderV1 struct {\n", "\tNote   string `mk:\"max=200\"`\n"
	at := strings.Index(string(src), open)
	end := strings.Index(string(src)[max(at, 0):], "\n}\n")
	if at < 0 || end < 0 || !strings.HasSuffix(string(src)[at:at+end+1], note) {
		t.Fatalf("examples/orders/schema/orders.go has no OrderV1 ending with %q", note)
	}
	cut := at + end + 1
	edited := string(src)[:cut] + "\tGift   bool\n" + string(src)[cut:]
	m.write("schema/orders.go", []byte(edited))
	m.write("schema/"+lockName, lock)
	line := strconv.Itoa(strings.Count(edited[:cut], "\n") + 1)
	const msg = "OrderV1.Gift: field added to released record OrderV1: "
	const rule = "(layout rule field-added)"

	out, err := m.output("generate", "./...")
	if err == nil {
		t.Fatalf("go generate ./... accepted the field:\n%s", out)
	}
	if !hasLine(out, "orders.go:"+line+":2: "+msg, rule) {
		t.Errorf("go generate ./... does not report orders.go:%s with the rule:\n%s", line, out)
	}
	out, err = m.output("run", "github.com/mkit-dev/mkitfdb/cmd/codegen", "-schema", "schema", "-out", "ordersgen", "-pkg", "ordersgen", "-check")
	if err == nil {
		t.Fatalf("codegen -check accepted the field:\n%s", out)
	}
	if !hasLine(out, filepath.Join("schema", "orders.go")+":"+line+":2: "+msg, rule) {
		t.Errorf("codegen -check does not report schema/orders.go:%s with the rule:\n%s", line, out)
	}
	if got, _ := os.ReadFile(filepath.Join(m.dir, "schema", lockName)); string(got) != string(lock) {
		t.Error("the refused run rewrote the lock")
	}
	if _, err := os.Stat(filepath.Join(m.dir, "ordersgen")); err == nil {
		t.Error("the refused run wrote ordersgen")
	}
}

// hasLine reports whether out has a line starting with prefix and ending
// with suffix.
func hasLine(out, prefix, suffix string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) && strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}

// TestStaleOrDamagedLock: under -check a lock that is missing or not what
// the schema makes is stale, like a generated file; a lock edited into
// something cmd/codegen never writes is refused at its line.
func TestStaleOrDamagedLock(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "s.go"), apply(t, nil))
	out, err := build(dir, "testgen")
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err := lockFresh(dir, out.lock); err != nil || fresh {
		t.Errorf("a missing lock: fresh=%v, %v; want stale", fresh, err)
	}
	if err := os.WriteFile(filepath.Join(dir, lockName), out.lock, 0o644); err != nil {
		t.Fatal(err)
	}
	if fresh, err := lockFresh(dir, out.lock); err != nil || !fresh {
		t.Errorf("the lock just written: fresh=%v, %v; want fresh", fresh, err)
	}
	// An addition not generated yet leaves the lock stale.
	writeFile(t, filepath.Join(dir, "s.go"), apply(t, []edit{{"\tColorBlue Color = 2\n", "\tColorBlue Color = 2\n\tColorTeal Color = 3\n"}}))
	next, err := build(dir, "testgen")
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err := lockFresh(dir, next.lock); err != nil || fresh {
		t.Errorf("a lock without a new enum value: fresh=%v, %v; want stale", fresh, err)
	}

	for _, c := range []struct{ name, from, to, want string }{
		{"unknown line", "namespace test\n", "namespace test\nbogus 1\n", `unknown line "bogus 1"`},
		{"unknown field option", "\tNote string max=200\n", "\tNote string max=200 maxx=3\n", `unknown field option "maxx=3"`},
		{"type with no entry", "\tParts []Part max=10\n", "\tParts []Piece max=10\n", "type Piece has no struct, union, enum or identity entry"},
		{"another format", lockFormat + "\n", "layout-lock x\n", `want "layout-lock 1" or "layout-lock 2"`},
		{"key tag twice", "key 101 IndexKey\n", "key 100 IndexKey\n", "key tag 100 is locked twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(string(out.lock), c.from) {
				t.Fatalf("the lock has no %q", c.from)
			}
			damaged := strings.Replace(string(out.lock), c.from, c.to, 1)
			if err := os.WriteFile(filepath.Join(dir, lockName), []byte(damaged), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := build(dir, "testgen")
			if !errors.Is(err, errLock) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("build = %v; want an error wrapping errLock with %q", err, c.want)
			}
			at := filepath.Join(dir, lockName) + ":" + strconv.Itoa(firstChanged(out.lock, []byte(damaged))) + ":"
			if !strings.HasPrefix(err.Error(), "codegen: "+at) {
				t.Errorf("the error %q is not at %s", err, at)
			}
		})
	}
}

// TestLockFormat2: a lock holding a family of more than one version, a
// family's retired version or a format is written as layout-lock 2, read
// back the same, and refused when damaged; a lock of a format above 2 is
// refused as a newer generator's, not as damaged.
func TestLockFormat2(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "s.go"), apply(t, []edit{family("OrderV1,OrderV2 retired=5"), withRecords(orderV2),
		{"~mk:\"tag=2\"~", "~mk:\"tag=2,format=2\"~"}, {"\tColorBlue Color = 2\n", "\tColorBlue Color = 2 //mk:format=3\n"}}))
	out, err := build(dir, "testgen")
	if err != nil {
		t.Fatal(err)
	}
	lock := string(out.lock)
	for _, want := range []string{"\n" + lockFormat2 + "\n", "key 100 OrderKey value=OrderV1,OrderV2\n", "\tretired 5\n", "\t2 Closed Closed format=2\n", "\t2 ColorBlue format=3\n"} {
		if !strings.Contains(lock, want) {
			t.Errorf("the lock has no %q:\n%s", want, lock)
		}
	}
	parsed, err := parseLock("layout.lock", out.lock)
	if err != nil {
		t.Fatal(err)
	}
	if again := renderLock(parsed); string(again) != lock {
		t.Errorf("the lock read back renders as:\n%s\nwant:\n%s", again, lock)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"format 1 written", "\t2 Closed Closed format=2\n", "\t2 Closed Closed format=1\n", "format=1 is the default and is not written"},
		{"family of a record not locked", "value=OrderV1,OrderV2\n", "value=OrderV1,OrderV9\n", "key OrderKey: value OrderV9 has no record entry"},
		{"retired version of a class without a family", "key 101 IndexKey\n", "key 101 IndexKey\n\tretired 3\n", `want "retired N [Name]" in a union, an enum or a key class with value=`},
		{"record with two formats", "record OrderV2 version=2\n", "record OrderV2 version=2 format=2 format=3\n", "want \"record Name version=N [union] [format=N]\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(lock, c.from) {
				t.Fatalf("the lock has no %q", c.from)
			}
			_, err := parseLock("layout.lock", []byte(strings.Replace(lock, c.from, c.to, 1)))
			if !errors.Is(err, errLock) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("parseLock = %v; want an error wrapping errLock with %q", err, c.want)
			}
		})
	}
	newer := strings.Replace(lock, lockFormat2+"\n", "layout-lock 9\n", 1)
	_, err = parseLock("layout.lock", []byte(newer))
	if err == nil || errors.Is(err, errLock) || !strings.Contains(err.Error(), "layout-lock 9 is written by a newer cmd/codegen") {
		t.Errorf("a lock of format 9: %v; want it refused as a newer generator's", err)
	}
}

// firstChanged is the number of the first line of b that differs from
// a's line there.
func firstChanged(a, b []byte) int {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range bl {
		if i >= len(al) || al[i] != bl[i] {
			return i + 1
		}
	}
	return 0
}

// TestRetirementMistakes: a misplaced or malformed retirement or draft is
// a schema mistake at its file:line.
func TestRetirementMistakes(t *testing.T) {
	for _, c := range []struct {
		name, src string
		line      int
		want      string
	}{
		{"retired outside the package doc", "//mk:namespace test\npackage schema\n\n//mk:retired key=100\n\n//mk:key tag=101\ntype K struct{}\n", 4, "//mk:retired belongs in the package doc comment"},
		{"retired without arguments", "//mk:namespace test\n//mk:retired\npackage schema\n", 2, "//mk:retired needs key=TAG"},
		{"retired misspelled argument", "//mk:namespace test\n//mk:retired kye=100\npackage schema\n", 2, `unknown //mk:retired argument "kye": did you mean key?`},
		{"retired key tag out of range", "//mk:namespace test\n//mk:retired key=7\npackage schema\n", 2, "key=7 is out of range: an importing schema's key classes take tags 100-"},
		{"retired key twice", "//mk:namespace test\n//mk:retired key=100,100\npackage schema\n", 2, "key tag 100 is already retired"},
		{"retired record not a name", "//mk:namespace test\n//mk:retired record=order\npackage schema\n", 2, `"order" is not an exported Go name`},
		{"draft with a value", "//mk:namespace test\npackage schema\n\n//mk:record version=1 draft=yes\ntype R struct{}\n", 5, "draft takes no value"},
		{"draft on a union", "//mk:namespace test\npackage schema\n\ntype V struct{}\n\n//mk:union draft\ntype U struct {\n\tA *V `mk:\"tag=1\"`\n}\n", 7, `unknown //mk:union argument "draft"`},
		{"retired on a struct record", "//mk:namespace test\npackage schema\n\n//mk:record version=1 retired=2\ntype R struct{}\n", 5, "retired= applies to union records"},
		{"retired variant tag 0", "//mk:namespace test\npackage schema\n\ntype V struct{}\n\n//mk:union retired=0\ntype U struct {\n\tA *V `mk:\"tag=1\"`\n}\n", 7, "retired=0 is out of range: variant tags are 1-255"},
		{"retired enum value twice", "//mk:namespace test\npackage schema\n\n//mk:enum retired=4,4\ntype E uint8\n\nconst EA E = 1\n", 5, "retired=4,4 lists 4 twice"},
		{"released key holds a draft", "//mk:namespace test\npackage schema\n\n//mk:key tag=100 value=R\ntype K struct{}\n\n//mk:record version=1 draft\ntype R struct{}\n", 5, "key K: holds R, a draft"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "bad.go"), c.src)
			wantSchemaError(t, dir, "bad.go", c.line, c.want)
		})
	}
}

// TestLayoutRulesDocumented: every rule an error can name has its row in
// package schema's table, so that the ID an error ends with is found
// there.
func TestLayoutRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "schema", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range lockRules {
		if !strings.Contains(string(doc), "//\t"+r.id+" ") {
			t.Errorf("schema/doc.go has no table row for layout rule %s", r.id)
		}
	}
}

// TestDraftIsSaidInGeneratedDoc: a draft record's generated type says
// that its layout is not locked; a released one's does not.
func TestDraftIsSaidInGeneratedDoc(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "s.go"), apply(t, []edit{{"//mk:record version=1 union\n", "//mk:record version=2 draft\ntype OrderV2 struct {\n\tA uint8\n}\n\n//mk:record version=1 union\n"}}))
	files, err := generate(dir, "testgen")
	if err != nil {
		t.Fatal(err)
	}
	types := string(files["types.go"])
	if !strings.Contains(types, "// Draft: the schema marks OrderV2 draft, so the layout lock does not hold\n") {
		t.Errorf("types.go does not say OrderV2 is a draft:\n%s", types)
	}
	if strings.Contains(types, "marks OrderV1 draft") {
		t.Error("types.go says the released OrderV1 is a draft")
	}
}
