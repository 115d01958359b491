package tuple_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// Example encodes a key the way generated key codecs do, into a reused
// buffer, and parses it back with a Reader.
func Example() {
	buf := make([]byte, 0, 64)
	key := tuple.AppendString(buf, "timer")
	key = tuple.AppendUint(key, 1700000000000) // due_at_ms
	key = tuple.AppendNestedStart(key)
	key = tuple.AppendInt(key, -1)
	key = tuple.AppendNestedNull(key)
	key = tuple.AppendNestedEnd(key)
	fmt.Printf("% x\n", key)

	r := tuple.NewReader(key)
	class, _ := r.ReadString()
	due, _ := r.ReadUint()
	_ = r.EnterNested()
	ref, _ := r.ReadInt()
	nullErr := r.ReadNull()
	exitErr := r.ExitNested()
	fmt.Println(class, due, ref, nullErr, exitErr, r.Done())
	// Output:
	// 02 74 69 6d 65 72 00 1a 01 8b cf e5 68 00 05 13 fe 00 ff 00
	// timer 1700000000000 -1 <nil> <nil> true
}

// ExampleReader_ReadInt shows the strictness of decoding: a non-canonical
// integer is corrupt data, not a value.
func ExampleReader_ReadInt() {
	r := tuple.NewReader([]byte{0x16, 0x00, 0x01}) // 1 written in two bytes
	_, err := r.ReadInt()
	fmt.Println(errors.Is(err, wire.ErrCorrupt))
	fmt.Println(err)
	// Output:
	// true
	// tuple: offset 1: non-canonical integer: leading byte 0x00 under type code 0x16 (the value fits in fewer bytes): corrupt data
}

// ExamplePack shows the generic form and that packed bytes sort like the
// tuples they encode.
func ExamplePack() {
	a, _ := tuple.Pack(tuple.Tuple{"relay", 255})
	b, _ := tuple.Pack(tuple.Tuple{"relay", 256})
	fmt.Printf("% x\n% x\n", a, b)
	fmt.Println(bytes.Compare(a, b), tuple.Compare(tuple.Tuple{"relay", 255}, tuple.Tuple{"relay", 256}))

	t, _ := tuple.Unpack(b)
	fmt.Printf("%#v\n", t)
	// Output:
	// 02 72 65 6c 61 79 00 15 ff
	// 02 72 65 6c 61 79 00 16 01 00
	// -1 -1
	// tuple.Tuple{"relay", 256}
}

// ExampleRangeEnd bounds every key under a packed prefix.
func ExampleRangeEnd() {
	prefix := tuple.AppendString(nil, "relay")
	end := tuple.RangeEnd(prefix)
	key := tuple.AppendUint(bytes.Clone(prefix), 42)
	fmt.Printf("% x\n", end)
	fmt.Println(bytes.Compare(prefix, key) <= 0 && bytes.Compare(key, end) < 0)
	// Output:
	// 02 72 65 6c 61 79 00 ff
	// true
}
