// A hand-written test of the generated package everygen:
// TestEveryFieldTypeGenerates copies it beside the code generated from
// testdata/everytype, where it reaches the unexported decoders.

package everygen

import (
	"bytes"
	"reflect"
	"testing"
)

// TestFastPathReadsLongLengths: lengths of three bytes and more (values
// of 16384 bytes or longer) are read by the fast path itself, not left to
// the Reader, and a non-canonical or over-bound one fails both paths.
func TestFastPathReadsLongLengths(t *testing.T) {
	v := RLong{Key: []byte("k"), V: bytes.Repeat([]byte{7}, 20000)}
	b, err := EncodeRLong(v)
	if err != nil {
		t.Fatal(err)
	}
	var fast, slow RLong
	if !fastDecodeRLong(b, &fast) {
		t.Fatal("the fast path left a 20000-byte value to the Reader")
	}
	if err := readerDecodeRLong(b, &slow); err != nil || !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fast, v) {
		t.Fatalf("fast path %+v, Reader path %+v (%v)", fast, slow, err)
	}
	// the value's length is the three bytes after the key
	at := bytes.Index(b, []byte("k")) + 1
	if b[at] != 0xa0 || b[at+1] != 0x9c || b[at+2] != 0x01 {
		t.Fatalf("value length at %d is %x, want a09c01 (20000)", at, b[at:at+3])
	}
	for _, c := range []struct {
		name string
		len  []byte
	}{
		{"non-canonical", []byte{0xa0, 0x9c, 0x81, 0x00}},
		{"over its bound", []byte{0xa1, 0x8d, 0x06}}, // 100001
	} {
		t.Run(c.name, func(t *testing.T) {
			m := append(append(bytes.Clone(b[:at]), c.len...), b[at+3:]...)
			if fastDecodeRLong(m, &fast) {
				t.Error("the fast path decoded it")
			}
			if err := readerDecodeRLong(m, &slow); err == nil {
				t.Error("the Reader path decoded it")
			}
			agreeRLong(t, b, m)
		})
	}
}
