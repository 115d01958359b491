package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

var cursorChecks = []check{
	{"ResumesAtAnyLimit", testCursorAnyLimit},
	{"ForeignPartitionInvalid", testCursorForeignPartition},
	{"ForeignRangeInvalid", testCursorForeignRange},
	{"MalformedInvalid", testCursorMalformed},
}

// firstCursor writes rows a..f into p and f.other and returns the Next
// cursor of the first page (two rows) of p's [a, z).
func firstCursor(t testing.TB, f *fixture) store.Cursor {
	t.Helper()
	for _, p := range []store.Partition{f.p, f.other} {
		f.put(t, p, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6")
	}
	page, err := f.s.Scan(f.ctx, f.p, store.Key("a"), store.Key("z"), nil, 2)
	noErr(t, err, "Scan page 1")
	if len(page.Entries) != 2 || page.Next == nil {
		t.Fatalf("page 1 = %s, Next %x; want 2 rows and a cursor", showRows(page.Entries), page.Next)
	}
	return page.Next
}

// testCursorAnyLimit: a cursor is bound to its partition and range, not to
// the limit it was issued with.
func testCursorAnyLimit(t *testing.T, f *fixture) {
	c := firstCursor(t, f)
	for _, tc := range []struct {
		limit int
		want  []store.KeyValue
	}{
		{1, rows("c", "3")},
		{3, rows("c", "3", "d", "4", "e", "5")},
		{100, rows("c", "3", "d", "4", "e", "5", "f", "6")},
	} {
		page, err := f.s.Scan(f.ctx, f.p, store.Key("a"), store.Key("z"), c, tc.limit)
		noErr(t, err, fmt.Sprintf("resume at limit %d", tc.limit))
		if !sameRows(page.Entries, tc.want) {
			t.Fatalf("resume at limit %d = %s, want %s", tc.limit, showRows(page.Entries), showRows(tc.want))
		}
	}
}

// testCursorForeignPartition: a cursor issued for one partition is
// ErrInvalid on another, even over the same range and rows.
func testCursorForeignPartition(t *testing.T, f *fixture) {
	c := firstCursor(t, f)
	for _, p := range []store.Partition{f.other, Partition{Name: "suite-never-written"}} {
		page, err := f.s.Scan(f.ctx, p, store.Key("a"), store.Key("z"), c, 2)
		if err == nil {
			t.Fatalf("cursor of %v accepted on %v: got %s", f.p, p, showRows(page.Entries))
		}
		wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("cursor of %v on %v", f.p, p))
	}
}

// testCursorForeignRange: a cursor issued for one range is ErrInvalid on
// any other, even one that contains the cursor's position.
func testCursorForeignRange(t *testing.T, f *fixture) {
	c := firstCursor(t, f)
	for _, r := range [][2]string{{"a", "y"}, {"b", "z"}, {"", "z"}, {"a", "z\x00"}, {"a\x00", "z"}, {"b", "c"}} {
		page, err := f.s.Scan(f.ctx, f.p, store.Key(r[0]), store.Key(r[1]), c, 2)
		if err == nil {
			t.Fatalf("cursor of [a, z) accepted on [%q, %q): got %s", r[0], r[1], showRows(page.Entries))
		}
		wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("cursor of [a, z) on [%q, %q)", r[0], r[1]))
	}
}

// testCursorMalformed: a truncated, extended, version-flipped, doubled or
// random cursor is ErrInvalid, never a silent restart or a page. Flipping
// a byte in the middle is not tested: without a checksum that can name
// another valid position, and the contract does not demand one.
func testCursorMalformed(t *testing.T, f *fixture) {
	c := firstCursor(t, f)
	type variant struct {
		name   string
		cursor store.Cursor
	}
	var vs []variant
	for n := 1; n < len(c); n++ {
		vs = append(vs, variant{fmt.Sprintf("truncated to %d of %d bytes", n, len(c)), bytes.Clone(c[:n])})
	}
	vs = append(vs,
		variant{"with a trailing 0x00", append(bytes.Clone(c), 0x00)},
		variant{"with a trailing 0xFF", append(bytes.Clone(c), 0xFF)},
		variant{"doubled", append(bytes.Clone(c), c...)},
		variant{"first byte flipped", append(store.Cursor{^c[0]}, c[1:]...)},
		variant{"all zero", make(store.Cursor, len(c))},
		variant{"all 0xFF", store.Cursor(bytes.Repeat([]byte{0xFF}, len(c)))},
	)
	rng := rand.New(rand.NewPCG(99, 1))
	for i := range 16 {
		n := len(c)
		if i%2 == 1 {
			n = 1 + rng.IntN(64)
		}
		r := make(store.Cursor, n)
		for j := range r {
			r[j] = byte(rng.Uint32())
		}
		vs = append(vs, variant{fmt.Sprintf("random %d (%d bytes)", i, n), r})
	}
	for _, v := range vs {
		page, err := f.s.Scan(f.ctx, f.p, store.Key("a"), store.Key("z"), v.cursor, 2)
		if err == nil {
			t.Fatalf("cursor %s (%x) accepted: got %s, Next %x", v.name, v.cursor, showRows(page.Entries), page.Next)
		}
		wantSentinel(t, err, store.ErrInvalid, "cursor "+v.name)
	}
	// The genuine cursor still works after all that.
	page, err := f.s.Scan(f.ctx, f.p, store.Key("a"), store.Key("z"), c, 2)
	noErr(t, err, "genuine cursor")
	if !sameRows(page.Entries, rows("c", "3", "d", "4")) {
		t.Fatalf("genuine cursor resumed at %s, want c, d", showRows(page.Entries))
	}
}
