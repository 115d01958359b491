package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestReaderUvarintIsCanonical(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want uint64
		ok   bool
	}{
		{[]byte{0x00}, 0, true},
		{[]byte{0x7f}, 127, true},
		{[]byte{0x80, 0x01}, 128, true},
		{[]byte{0x80, 0x00}, 0, false}, // non-minimal zero
		{[]byte{0xff, 0x00}, 0, false}, // non-minimal 127
		{[]byte{0x80}, 0, false},       // truncated
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 0, false}, // overflow
	} {
		r := NewReader(c.in, "T")
		got := r.Uvarint("len")
		err := r.Finish()
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("Uvarint(%x) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("Uvarint(%x): %v does not wrap ErrCorrupt", c.in, err)
		}
	}
}

func TestReaderLenChecksBoundAndBytesLeft(t *testing.T) {
	r := NewReader([]byte{5, 1, 2}, "T")
	if n := r.Len("xs", 10, 1); n != 0 || r.Err() == nil {
		t.Fatalf("a count of 5 over 2 bytes left gave %d, %v", n, r.Err())
	}
	r = NewReader([]byte{3, 1, 2, 3}, "T")
	if n := r.Len("xs", 2, 1); n != 0 || !strings.Contains(r.Err().Error(), "over its bound 2") {
		t.Fatalf("a count of 3 over bound 2 gave %d, %v", n, r.Err())
	}
}

func TestReaderStickyErrorAndTrailingBytes(t *testing.T) {
	r := NewReader([]byte{1, 2}, "Rec")
	r.U64("big")
	if r.U8("after") != 0 || r.Bool("b") {
		t.Fatal("reads after a failure return non-zero values")
	}
	err := r.Finish()
	var de *DecodeError
	if !errors.As(err, &de) || de.Record != "Rec" || de.Field != "big" || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
	r = NewReader([]byte{1, 2}, "Rec")
	r.U8("a")
	if err := r.Finish(); err == nil || !strings.Contains(err.Error(), "1 trailing bytes") {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestBoolRejectsOtherBytes(t *testing.T) {
	r := NewReader([]byte{2}, "T")
	r.Bool("flag")
	if err := r.Finish(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bool byte 2: %v", err)
	}
}

func TestRuleErrorsWrapInvalidAndBecomeCorruptOnDecode(t *testing.T) {
	err := Within("Rec", Within("puts", CheckLen("", 3, 2)))
	if !errors.Is(err, ErrInvalid) || err.Error() != "Rec.puts: length 3 over its bound 2: invalid input" {
		t.Fatalf("got %v", err)
	}
	dec := DecodeRule("Rec", Within("puts", CheckLen("", 3, 2)))
	if !errors.Is(dec, ErrCorrupt) || errors.Is(dec, ErrInvalid) || !strings.Contains(dec.Error(), "Rec.puts") {
		t.Fatalf("got %v", dec)
	}
}

func TestCheckIdentity(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"", false}, {"a", true}, {"abcd", false}, {"a\tb", false}, {"a\x7f", false},
		{"\xc3", false}, {"é", true}, {"\u2028", true}, {"\u0085", false},
	} {
		err := CheckIdentity("Name", c.in, 1, 3)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("CheckIdentity(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}

func TestAppendLenMatchesLenSize(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 21, 1<<28 + 5} {
		b := AppendLen(nil, n)
		r := NewReader(b, "T")
		if got := r.Uvarint("n"); got != uint64(n) || r.Finish() != nil || len(b) != LenSize(n) {
			t.Errorf("n=%d: encoded %x, read %d, size %d", n, b, got, LenSize(n))
		}
	}
}

// TestStringAndBytesLengths reads strings and byte strings whose lengths
// take one, two and three bytes, at and over their bound and the bytes
// left, through String, Bytes and Strings alike.
func TestStringAndBytesLengths(t *testing.T) {
	enc := func(ns ...int) []byte {
		var b []byte
		for _, n := range ns {
			b = AppendString(b, strings.Repeat("x", n))
		}
		return b
	}
	for _, c := range []struct {
		name string
		in   []byte
		max  int
		ok   bool
	}{
		{"empty", enc(0), 10, true},
		{"one-byte length at bound", enc(127), 127, true},
		{"one-byte length over bound", enc(127), 126, false},
		{"two-byte length at bound", enc(300), 300, true},
		{"two-byte length over bound", enc(300), 299, false},
		{"three-byte length", enc(20000), 20000, true},
		{"truncated two-byte length", enc(300)[:1], 1000, false},
		{"two-byte length past the end", enc(300)[:200], 1000, false},
		{"non-canonical two-byte length", []byte{0x85, 0x00, 'a', 'b', 'c', 'd', 'e'}, 10, false},
	} {
		r := NewReader(c.in, "T")
		s := r.String("s", c.max)
		if err := r.Finish(); (err == nil) != c.ok || c.ok && len(s) != len(c.in)-LenSize(len(s)) {
			t.Errorf("%s: String gave %d bytes, %v; want ok=%v", c.name, len(s), err, c.ok)
		}
		r = NewReader(c.in, "T")
		b := r.Bytes("b", c.max)
		if err := r.Finish(); (err == nil) != c.ok || c.ok && string(b) != s {
			t.Errorf("%s: Bytes gave %d bytes, %v; want ok=%v", c.name, len(b), err, c.ok)
		}
	}
}

func TestStringsSharesOneCopy(t *testing.T) {
	in := enc3("ns", "", strings.Repeat("r", 200))
	r := NewReader(in, "T")
	var got [3]string
	r.Strings(got[:], []string{"a", "b", "c"}, []int{10, 10, 200})
	if err := r.Finish(); err != nil || got != [3]string{"ns", "", strings.Repeat("r", 200)} {
		t.Fatalf("Strings = %q, %v", got, err)
	}
	in[1] = 'X' // the strings are a copy, not the input
	if got[0] != "ns" {
		t.Fatalf("Strings aliases its input: %q", got[0])
	}
	if n := testing.AllocsPerRun(100, func() {
		r := NewReader(in, "T")
		r.Strings(got[:], []string{"a", "b", "c"}, []int{10, 10, 200})
	}); n != 1 {
		t.Errorf("Strings allocated %v times, want 1", n)
	}

	for _, c := range []struct {
		name  string
		in    []byte
		maxes []int
		field string
	}{
		{"second over its bound", enc3("ns", "abc", "x"), []int{10, 2, 10}, "b"},
		{"last truncated", enc3("ns", "abc", "xyz")[:9], []int{10, 10, 10}, "c"},
	} {
		r := NewReader(c.in, "T")
		got := [3]string{"stale", "stale", "stale"}
		r.Strings(got[:], []string{"a", "b", "c"}, c.maxes)
		var de *DecodeError
		if err := r.Err(); !errors.As(err, &de) || de.Field != c.field || got != [3]string{} {
			t.Errorf("%s: got %q, %v; want field %s named and dst cleared", c.name, got, err, c.field)
		}
	}
}

func enc3(a, b, c string) []byte {
	return AppendString(AppendString(AppendString(nil, a), b), c)
}

// TestMatchConsumesOnlyWhatMatches: a match advances past the value, a
// mismatch (or a value past the end) consumes nothing and fails nothing.
func TestMatchConsumesOnlyWhatMatches(t *testing.T) {
	in := AppendU32(AppendString(append([]byte{7}, 1), "ns"), 300)
	r := NewReader(in, "T")
	if r.MatchU8(8) || r.MatchString("ns") || r.Offset() != 0 {
		t.Fatalf("mismatches consumed: offset %d", r.Offset())
	}
	if !r.MatchU8(7) || !r.MatchBool(true) || r.MatchString("nt") || r.MatchString("n") || !r.MatchString("ns") {
		t.Fatalf("matches failed at offset %d", r.Offset())
	}
	if r.MatchU32(301) || r.MatchU64(300) || !r.MatchU32(300) || r.MatchU8(0) {
		t.Fatalf("u32 matching wrong at offset %d", r.Offset())
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeErrorNamesTheRecordOnce: a reader's field path starts with the
// declaring type, a checker's does not; the message names the record once
// either way, and a nested type's path keeps both names.
func TestDecodeErrorNamesTheRecordOnce(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  string
	}{
		{"RelayV1.Target", "decode RelayV1.Target at offset 3: short: "},
		{"Target", "decode RelayV1.Target at offset 3: short: "},
		{"RelayPut.Key", "decode RelayV1.RelayPut.Key at offset 3: short: "},
		{"", "decode RelayV1 at offset 3: short: "},
	} {
		err := &DecodeError{Record: "RelayV1", Field: tc.field, Offset: 3, Reason: "short"}
		if got := err.Error(); got != tc.want+ErrCorrupt.Error() {
			t.Errorf("field %q: %q, want %q", tc.field, got, tc.want+ErrCorrupt.Error())
		}
	}
}
