package admin

import (
	"bytes"
	"math/big"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
)

// What the views print of a key or identity, -key and -partition take
// back, byte for byte.
func TestTupleTextRoundTrips(t *testing.T) {
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	for _, tp := range []tuple.Tuple{
		{"orders", int64(2), "ada"},
		{int64(16), int64(5)},
		{"a\x00b\"\\", []byte{0, 0xff, 'x'}, nil, true, false},
		{int64(-1), uint64(1 << 63), huge, tuple.Tuple{"nested", tuple.Tuple{int64(0)}, nil}},
		{""},
	} {
		b, err := tuple.Pack(tp)
		if err != nil {
			t.Fatal(err)
		}
		text := formatTuple(b)
		got, err := parseTupleText(text)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%v printed %s, which parses to %x (%v), want %x", tp, text, got, err, b)
		}
	}
	// Bytes that are no tuple print as hex, which parses back too.
	raw := []byte{0xde, 0xad}
	if text := formatTuple(raw); text != "x:dead" {
		t.Errorf("formatTuple(%x) = %s", raw, text)
	}
	if got, err := parseTupleText("x:dead"); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("x:dead parses to %x, %v", got, err)
	}
	for _, bad := range []string{"", "()", "(1", "(1,)", "(1 2)", "(\"a)", "(b\"a)", "(one)", "x:", "x:0g", "(1) x"} {
		if b, err := parseTupleText(bad); err == nil {
			t.Errorf("%q parsed to %x, want an error", bad, b)
		}
	}
}

// FuzzParseTupleText: no input panics the parser, and what it accepts
// prints back to text that parses to the same bytes.
func FuzzParseTupleText(f *testing.F) {
	for _, s := range []string{`("orders", 2, "ada")`, "(16, 5)", `(b"\x00", nil, true, (1, -2))`, "x:0102", "(", "((((", `("\xff")`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := parseTupleText(s)
		if err != nil {
			return
		}
		again, err := parseTupleText(formatTuple(b))
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%q parsed to %x, printed %s, which parses to %x (%v)", s, b, formatTuple(b), again, err)
		}
	})
}
