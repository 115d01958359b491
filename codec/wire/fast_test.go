package wire

import "testing"

func TestFastLengthsAreCanonicalAndBounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    []byte
		at    int
		max   int
		n     int
		next  int // LenAt's; -1 fails
		short bool
	}{
		{"zero", []byte{0x00}, 0, 10, 0, 1, true},
		{"one byte", []byte{9, 0x7f}, 1, 200, 127, 2, true},
		{"two bytes", []byte{0x80, 0x01}, 0, 200, 128, 2, true},
		{"largest two bytes", []byte{0xff, 0x7f}, 0, 1 << 20, 16383, 2, true},
		{"three bytes", []byte{0x80, 0x80, 0x01}, 0, 1 << 20, 16384, 3, false},
		{"at its bound", []byte{10}, 0, 10, 10, 1, true},
		{"over its bound", []byte{11}, 0, 10, 0, -1, false},
		{"two bytes over its bound", []byte{0x80, 0x01}, 0, 127, 0, -1, false},
		{"three bytes over its bound", []byte{0x80, 0x80, 0x01}, 0, 16384 - 1, 0, -1, false},
		{"non-canonical zero", []byte{0x80, 0x00}, 0, 10, 0, -1, false},
		{"non-canonical three bytes", []byte{0x80, 0x80, 0x00}, 0, 1 << 20, 0, -1, false},
		{"truncated", []byte{0x80}, 0, 10, 0, -1, false},
		{"at the end", []byte{1}, 1, 10, 0, -1, false},
		{"overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 0, 1 << 30, 0, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, next := LenAt(c.in, c.at, c.max)
			if next != c.next || next >= 0 && n != c.n {
				t.Errorf("LenAt = %d, %d; want %d, %d", n, next, c.n, c.next)
			}
			n, next = ShortLen(c.in, c.at, c.max)
			if c.short && (n != c.n || next != c.next) || !c.short && next != -1 {
				t.Errorf("ShortLen = %d, %d; want %d, %d read: %v", n, next, c.n, c.next, c.short)
			}
		})
	}
}

// FuzzFastReadsAgreeWithReader holds the fast path's reads to the
// Reader's on the same bytes: LenAt (and ShortLen where it reads) to
// Reader.Len, NameAt to Reader.Name, in value, offset and failure.
func FuzzFastReadsAgreeWithReader(f *testing.F) {
	f.Add([]byte{3, 'a', 'b', 'c'}, uint16(0), uint32(10))
	f.Add([]byte{0x80, 0x01}, uint16(0), uint32(200))
	f.Add([]byte{9, 0x80, 0x80, 0x01}, uint16(1), uint32(1<<20))
	f.Add([]byte{0x80, 0x00}, uint16(0), uint32(10))
	f.Add([]byte{2, 'a', 0x01}, uint16(0), uint32(10))
	f.Add([]byte{0}, uint16(0), uint32(0))
	var names Intern[struct{}]
	f.Fuzz(func(t *testing.T, b []byte, at16 uint16, max32 uint32) {
		at, max := int(at16)%(len(b)+1), int(max32)
		r := NewReader(b[at:], "T")
		want := r.Len("n", max, 0)
		n, next := LenAt(b, at, max)
		if (next >= 0) != (r.Err() == nil) || next >= 0 && (n != want || next != at+r.Offset()) {
			t.Fatalf("LenAt(%x, %d, %d) = %d, %d; Reader.Len %d, offset %d, %v", b, at, max, n, next, want, r.Offset(), r.Err())
		}
		if sn, snext := ShortLen(b, at, max); snext >= 0 && (sn != n || snext != next || snext-at > 2) {
			t.Fatalf("ShortLen(%x, %d, %d) = %d, %d; LenAt %d, %d", b, at, max, sn, snext, n, next)
		}
		r = NewReader(b[at:], "T")
		wantName := r.Name("name", &names, "T", 1, max)
		for range 2 { // a miss, then perhaps a hit
			s, next := NameAt(b, at, &names, "T", 1, max)
			if (next >= 0) != (r.Err() == nil) || next >= 0 && (s != wantName || next != at+r.Offset()) {
				t.Fatalf("NameAt(%x, %d, %d) = %q, %d; Reader.Name %q, offset %d, %v", b, at, max, s, next, wantName, r.Offset(), r.Err())
			}
		}
	})
}
