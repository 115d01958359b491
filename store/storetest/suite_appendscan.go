package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

// testAppendScan: a store.ScanAppender's AppendScan reads the pages Scan
// reads, page for page, appending to the caller's rows and buf without
// touching what they held; its keys and values are capped and the
// caller's, and its cursors resume it. A failed call leaves the page empty
// and buf as passed. Stores that are not ScanAppenders skip it.
func testAppendScan(t *testing.T, f *fixture) {
	sa, ok := f.s.(store.ScanAppender)
	if !ok {
		t.Skip("the store is not a store.ScanAppender")
	}
	want := orderedRows(t, f, f.p)
	held := store.KeyValue{Key: store.Key("held-key"), Value: store.Value("held-value")}
	for _, tc := range []struct {
		name  string
		limit int
		room  int // spare capacity of buf
	}{
		{"limit 1, no room", 1, 0},
		{"limit 3, some room", 3, 16},
		{"limit 1000, room for all", 1000, 4096},
	} {
		buf := append(make([]byte, 0, 4+tc.room), "held"...)
		var got []store.KeyValue
		var after, scanAfter store.Cursor
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("%s: no end after %d pages", tc.name, pages)
			}
			rows := append(make([]store.KeyValue, 0, 1+tc.room/16), held)
			page, out, err := sa.AppendScan(f.ctx, f.p, fullStart, fullEnd, after, tc.limit, rows, buf)
			noErr(t, err, fmt.Sprintf("%s: AppendScan page %d", tc.name, pages))
			scanned, err := f.s.Scan(f.ctx, f.p, fullStart, fullEnd, scanAfter, tc.limit)
			noErr(t, err, fmt.Sprintf("%s: Scan page %d", tc.name, pages))
			if len(page.Entries) == 0 || !sameRows(page.Entries[:1], []store.KeyValue{held}) {
				t.Fatalf("%s: page %d does not start with the row passed in: %s", tc.name, pages, showRows(page.Entries))
			}
			if !bytes.HasPrefix(out, []byte("held")) {
				t.Fatalf("%s: page %d: buf %q lost the bytes passed in", tc.name, pages, out)
			}
			added := page.Entries[1:]
			if !sameRows(added, scanned.Entries) || (page.Next == nil) != (scanned.Next == nil) {
				t.Fatalf("%s: page %d: AppendScan %s (Next %x), Scan %s (Next %x)", tc.name, pages,
					showRows(added), page.Next, showRows(scanned.Entries), scanned.Next)
			}
			for _, e := range added {
				if cap(e.Key) != len(e.Key) || cap(e.Value) != len(e.Value) {
					t.Fatalf("%s: page %d: key %q or its value not capped: appending to one would overwrite another", tc.name, pages, e.Key)
				}
				got = append(got, store.KeyValue{Key: bytes.Clone(e.Key), Value: append(store.Value{}, e.Value...)})
			}
			// The rows' bytes are buf's, and the caller's: scribbling on buf
			// changes them and nothing stored, and the next call reuses it.
			for i := len("held"); i < len(out); i++ {
				out[i] = '#'
			}
			for _, e := range added {
				if len(bytes.Trim(e.Key, "#")) > 0 || len(bytes.Trim(e.Value, "#")) > 0 {
					t.Fatalf("%s: page %d: key %q or its value is not in the buf returned", tc.name, pages, e.Key)
				}
			}
			buf = out[:len("held")]
			if page.Next == nil {
				break
			}
			after, scanAfter = page.Next, scanned.Next
		}
		if !sameRows(got, want) {
			t.Fatalf("%s: AppendScan read\n%s\nwant\n%s", tc.name, showRows(got), showRows(want))
		}
	}
	f.wantRows(t, f.p, want)

	buf := []byte("held")
	page, out, err := sa.AppendScan(f.ctx, f.p, fullStart, fullEnd, nil, 0, []store.KeyValue{held}, buf)
	wantSentinel(t, err, store.ErrInvalid, "AppendScan limit 0")
	if len(page.Entries) != 0 || page.Next != nil || string(out) != "held" {
		t.Fatalf("failed AppendScan returned page %s (Next %x), buf %q; want an empty page and buf as passed", showRows(page.Entries), page.Next, out)
	}
}
