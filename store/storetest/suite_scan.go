package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

// The suite's keys never start with 0xFF (whether a store must accept
// such keys is left open by the contract), so [fullStart, fullEnd) covers
// every row a subtest writes. Range bounds are not row keys: the empty
// start is a valid bound.
var (
	fullStart = store.Key{}
	fullEnd   = store.Key{0xFF}
)

var scanChecks = []check{
	{"EmptyRange", testScanEmptyRange},
	{"StartNotBeforeEnd", testScanStartNotBeforeEnd},
	{"BoundsHalfOpen", testScanBoundsHalfOpen},
	{"EveryRowOnceInOrder", testScanEveryRowOnce},
	{"NextNilExactlyWhenExhausted", testScanNextNil},
	{"ResumesAcrossInsertsAndDeletes", testScanResumes},
	{"LimitBelowOneInvalid", testScanLimitBelowOne},
	{"AppendScanAppendsWhatScanReads", testAppendScan},
	{"PageEndsAtByteBudget", testScanByteBudget},
}

// scanPages pages through [start, end) of p, limit rows a page, checking
// what holds of every page whatever the data: at most limit rows, keys in
// range, strictly increasing across pages (no row twice), an empty page's
// Next nil. It returns the pages.
func scanPages(t testing.TB, f *fixture, p store.Partition, start, end store.Key, limit int) []store.ScanPage {
	t.Helper()
	var (
		pages []store.ScanPage
		after store.Cursor
		last  store.Key
	)
	for {
		if len(pages) > 10_000 {
			t.Fatalf("scan of [%q, %q) limit %d: no end after %d pages", start, end, limit, len(pages))
		}
		page, err := f.s.Scan(f.ctx, p, start, end, after, limit)
		noErr(t, err, fmt.Sprintf("Scan [%q, %q) limit %d page %d", start, end, limit, len(pages)))
		if len(page.Entries) > limit {
			t.Fatalf("page %d has %d rows, limit %d", len(pages), len(page.Entries), limit)
		}
		for _, e := range page.Entries {
			if bytes.Compare(e.Key, start) < 0 || bytes.Compare(e.Key, end) >= 0 {
				t.Fatalf("page %d: key %q outside [%q, %q)", len(pages), e.Key, start, end)
			}
			if last != nil && bytes.Compare(e.Key, last) <= 0 {
				t.Fatalf("page %d: key %q after %q: out of order or repeated", len(pages), e.Key, last)
			}
			if e.Value == nil {
				t.Fatalf("page %d: key %q has a nil value; present values are never nil", len(pages), e.Key)
			}
			last = e.Key
		}
		if len(page.Entries) == 0 && page.Next != nil {
			t.Fatalf("page %d is empty but has a Next cursor: a scan loop would never end", len(pages))
		}
		pages = append(pages, page)
		if page.Next == nil {
			return pages
		}
		after = page.Next
	}
}

// scanAll returns every row of [start, end) of p, paged limit at a time.
func scanAll(t testing.TB, f *fixture, p store.Partition, start, end store.Key, limit int) []store.KeyValue {
	t.Helper()
	var out []store.KeyValue
	for _, page := range scanPages(t, f, p, start, end, limit) {
		out = append(out, page.Entries...)
	}
	return out
}

// orderedRows writes rows whose keys probe byte order (0x00 and 0xFE
// bytes, prefixes of one another) and returns them in key order.
func orderedRows(t testing.TB, f *fixture, p store.Partition) []store.KeyValue {
	t.Helper()
	ks := []string{
		"\x00", "\x00\x00", "\x00\x01", "\x01", "a", "a\x00", "a\x00\x00", "a\x01", "a\xfe",
		"ab", "abc", "b", "ba", "\x7f", "\x80", "\xfe", "\xfe\xfe", "\xfe\xff\xff",
	}
	for i := range 7 {
		ks = append(ks, fmt.Sprintf("row/%02d", i))
	}
	var kvs []string
	for i, k := range ks {
		v := fmt.Sprintf("v%d", i)
		if i%5 == 0 {
			v = ""
		}
		kvs = append(kvs, k, v)
	}
	f.put(t, p, kvs...)
	want := rows(kvs...)
	slices.SortFunc(want, func(a, b store.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return want
}

// testScanEmptyRange: a range holding no rows is one empty page, Next nil.
func testScanEmptyRange(t *testing.T, f *fixture) {
	for _, r := range [][2]string{{"", "\xff"}, {"m", "n"}} {
		page, err := f.s.Scan(f.ctx, f.p, store.Key(r[0]), store.Key(r[1]), nil, 10)
		noErr(t, err, "Scan of an empty partition")
		if len(page.Entries) != 0 || page.Next != nil {
			t.Fatalf("Scan [%q, %q) of an empty partition = %d rows, Next %x; want none, nil", r[0], r[1], len(page.Entries), page.Next)
		}
	}
	f.put(t, f.p, "a", "1", "z", "2")
	page, err := f.s.Scan(f.ctx, f.p, store.Key("m"), store.Key("n"), nil, 10)
	noErr(t, err, "Scan of an empty range")
	if len(page.Entries) != 0 || page.Next != nil {
		t.Fatalf("Scan [m, n) = %s, Next %x; want no rows, nil", showRows(page.Entries), page.Next)
	}
}

// testScanStartNotBeforeEnd: start >= end is an empty range (an empty
// page, Next nil), not an error.
func testScanStartNotBeforeEnd(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "1", "b", "2", "c", "3")
	for _, r := range [][2]string{{"b", "b"}, {"c", "a"}, {"\xfe", "a"}, {"b", "a\xff"}} {
		page, err := f.s.Scan(f.ctx, f.p, store.Key(r[0]), store.Key(r[1]), nil, 10)
		noErr(t, err, fmt.Sprintf("Scan [%q, %q)", r[0], r[1]))
		if len(page.Entries) != 0 || page.Next != nil {
			t.Fatalf("Scan [%q, %q) = %s, Next %x; want no rows, nil", r[0], r[1], showRows(page.Entries), page.Next)
		}
	}
}

// testScanBoundsHalfOpen: start is inclusive and end exclusive, whether
// or not rows sit on them.
func testScanBoundsHalfOpen(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "1", "b", "2", "b\x00", "3", "c", "4", "d", "5")
	for _, tc := range []struct {
		start, end string
		want       []store.KeyValue
	}{
		{"b", "d", rows("b", "2", "b\x00", "3", "c", "4")},
		{"a\x00", "c", rows("b", "2", "b\x00", "3")},
		{"b\x00", "b\x01", rows("b\x00", "3")},
		{"", "b", rows("a", "1")},
		{"c\x00", "\xff", rows("d", "5")},
		{"b", "b\x00", rows("b", "2")},
	} {
		for _, limit := range []int{1, 2, 100} {
			got := scanAll(t, f, f.p, store.Key(tc.start), store.Key(tc.end), limit)
			if !sameRows(got, tc.want) {
				t.Fatalf("Scan [%q, %q) limit %d = %s, want %s", tc.start, tc.end, limit, showRows(got), showRows(tc.want))
			}
		}
	}
}

// testScanEveryRowOnce: with nothing changing, paging at any limit returns
// every row of the range exactly once, in key order, empty values non-nil.
func testScanEveryRowOnce(t *testing.T, f *fixture) {
	want := orderedRows(t, f, f.p)
	n := len(want)
	for _, limit := range []int{1, 2, 3, 7, n - 1, n, n + 1, 1000} {
		got := scanAll(t, f, f.p, fullStart, fullEnd, limit)
		if !sameRows(got, want) {
			t.Fatalf("limit %d:\n got %s\nwant %s", limit, showRows(got), showRows(want))
		}
	}
	sub := want[3 : n-4]
	got := scanAll(t, f, f.p, sub[0].Key, want[n-4].Key, 1)
	if !sameRows(got, sub) {
		t.Fatalf("sub-range limit 1:\n got %s\nwant %s", showRows(got), showRows(sub))
	}
}

// testScanNextNil: Next is nil exactly when the range is exhausted. A page
// whose last row is not the range's last row has a Next. A page that ends
// on the range's last row should have Next nil; a store that cannot tell
// (it read exactly limit rows) may return a Next, but then the page after
// it must be empty with Next nil. An empty page always has Next nil, and a
// page that holds every row with room to spare (limit above the row
// count) has Next nil.
func testScanNextNil(t *testing.T, f *fixture) {
	want := orderedRows(t, f, f.p)
	n := len(want)
	lastKey := want[n-1].Key
	for limit := 1; limit <= n+1; limit++ {
		pages := scanPages(t, f, f.p, fullStart, fullEnd, limit)
		var got []store.KeyValue
		for i, page := range pages {
			got = append(got, page.Entries...)
			if len(page.Entries) == 0 {
				if i == 0 {
					t.Fatalf("limit %d: first page is empty though the range holds %d rows", limit, n)
				}
				prev := pages[i-1].Entries
				if !bytes.Equal(prev[len(prev)-1].Key, lastKey) {
					t.Fatalf("limit %d: empty page %d follows a page that ended before the last row", limit, i)
				}
				continue
			}
			if pageLast := page.Entries[len(page.Entries)-1].Key; !bytes.Equal(pageLast, lastKey) && page.Next == nil {
				t.Fatalf("limit %d: page %d ends at %q, before the range's last row %q, with Next nil: rows lost", limit, i, pageLast, lastKey)
			}
		}
		if !sameRows(got, want) {
			t.Fatalf("limit %d:\n got %s\nwant %s", limit, showRows(got), showRows(want))
		}
		if limit > n && (len(pages) != 1 || pages[0].Next != nil) {
			t.Fatalf("limit %d > %d rows: %d pages, first Next %x; want one page, Next nil", limit, n, len(pages), pages[0].Next)
		}
	}
	// An empty range never hands out a cursor, even at limit 1.
	page, err := f.s.Scan(f.ctx, f.p, store.Key("row/99"), store.Key("row/999"), nil, 1)
	noErr(t, err, "Scan of an empty sub-range")
	if len(page.Entries) != 0 || page.Next != nil {
		t.Fatalf("empty sub-range: %s, Next %x; want none, nil", showRows(page.Entries), page.Next)
	}
}

// testScanResumes: a cursor resumes strictly after its page's last row,
// whatever changed meanwhile: rows inserted after it appear, rows deleted
// after it do not, rows inserted before it (or re-inserted at it) are
// never returned, and changed values are read fresh.
func testScanResumes(t *testing.T, f *fixture) {
	var kvs []string
	for i := 0; i < 20; i += 2 {
		kvs = append(kvs, fmt.Sprintf("r%02d", i), "v")
	}
	f.put(t, f.p, kvs...)
	scan := func(after store.Cursor) store.ScanPage {
		t.Helper()
		page, err := f.s.Scan(f.ctx, f.p, store.Key("r"), store.Key("s"), after, 4)
		noErr(t, err, "Scan")
		return page
	}
	wantPage := func(page store.ScanPage, want []store.KeyValue, what string) {
		t.Helper()
		if !sameRows(page.Entries, want) {
			t.Fatalf("%s:\n got %s\nwant %s", what, showRows(page.Entries), showRows(want))
		}
	}

	p1 := scan(nil)
	wantPage(p1, rows("r00", "v", "r02", "v", "r04", "v", "r06", "v"), "page 1")
	if p1.Next == nil {
		t.Fatal("page 1 of 10 rows at limit 4 has Next nil")
	}
	// Insert after and before the cursor, delete the cursor's own row and
	// an unseen one.
	f.put(t, f.p, "r07", "new", "r01", "new", "r05", "new")
	f.apply(t, f.p, store.NewBatch().Delete(store.Key("r06")).Delete(store.Key("r10")), store.Committed, "deletes")

	p2 := scan(p1.Next)
	wantPage(p2, rows("r07", "new", "r08", "v", "r12", "v", "r14", "v"), "page 2 after changes")
	if p2.Next == nil {
		t.Fatal("page 2 has Next nil with rows left")
	}
	// Re-insert a row at and before the cursor, delete and insert after it,
	// change a value not yet read.
	f.put(t, f.p, "r14", "again", "r06", "again", "r15", "new", "r18", "changed", "r19", "new")
	f.apply(t, f.p, store.NewBatch().Delete(store.Key("r16")), store.Committed, "delete")

	var rest []store.KeyValue
	after := p2.Next
	for range 10 {
		page := scan(after)
		rest = append(rest, page.Entries...)
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	want := rows("r15", "new", "r18", "changed", "r19", "new")
	if !sameRows(rest, want) {
		t.Fatalf("pages after page 2:\n got %s\nwant %s", showRows(rest), showRows(want))
	}
}

// testScanLimitBelowOne: a limit below 1 is ErrInvalid.
func testScanLimitBelowOne(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "1")
	for _, limit := range []int{0, -1, -1 << 31} {
		_, err := f.s.Scan(f.ctx, f.p, fullStart, fullEnd, nil, limit)
		wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("Scan limit %d", limit))
	}
}

// bigRows writes n rows "big/00", "big/01", ... of value bytes each (a
// byte per row repeated, so that rows differ) and one more, "big/05+",
// of over bytes when over > 0, and returns them in key order.
func bigRows(t testing.TB, f *fixture, p store.Partition, n, value, over int) []store.KeyValue {
	t.Helper()
	var kvs []string
	for i := range n {
		kvs = append(kvs, fmt.Sprintf("big/%02d", i), string(bytes.Repeat([]byte{byte('a' + i%26)}, value)))
	}
	if over > 0 {
		kvs = append(kvs, "big/05+", string(bytes.Repeat([]byte{'+'}, over)))
	}
	f.put(t, p, kvs...)
	want := rows(kvs...)
	slices.SortFunc(want, func(a, b store.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return want
}

// testScanByteBudget: a page whose rows add up past the store's
// MaxScanBytes ends early, short of its limit, with a Next cursor, and the
// next page resumes after its last row: every row once, in order,
// through Scan and AppendScan. A page of more than one row holds at most
// MaxScanBytes of keys and values; a row over the budget is a page of its
// own. Stores reporting no budget skip it.
func testScanByteBudget(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	budget := caps.MaxScanBytes
	if budget <= 0 {
		t.Skip("the store reports no MaxScanBytes")
	}
	value := min(caps.MaxValueBytes, budget/3)
	over := 0
	if caps.MaxValueBytes > budget {
		over = budget + 1
	}
	want := bigRows(t, f, f.p, max(12, 2*budget/value+5), value, over)
	perPage := budget / (value + len("big/00"))
	sa, _ := f.s.(store.ScanAppender)
	for _, limit := range []int{perPage + 1, 1000} {
		for _, appendScan := range []bool{false, true} {
			if appendScan && sa == nil {
				continue
			}
			what := fmt.Sprintf("limit %d, AppendScan %v", limit, appendScan)
			var (
				got   []store.KeyValue
				after store.Cursor
				early bool
			)
			for pages := 0; ; pages++ {
				if pages > len(want)+1 {
					t.Fatalf("%s: no end after %d pages", what, pages)
				}
				var page store.ScanPage
				var err error
				if appendScan {
					page, _, err = sa.AppendScan(f.ctx, f.p, fullStart, fullEnd, after, limit, nil, nil)
				} else {
					page, err = f.s.Scan(f.ctx, f.p, fullStart, fullEnd, after, limit)
				}
				noErr(t, err, fmt.Sprintf("%s: page %d", what, pages))
				size := 0
				for _, e := range page.Entries {
					size += len(e.Key) + len(e.Value)
				}
				switch {
				case len(page.Entries) > limit:
					t.Fatalf("%s: page %d holds %d rows", what, pages, len(page.Entries))
				case len(page.Entries) > 1 && size > budget:
					t.Fatalf("%s: page %d holds %d rows of %d bytes, over the budget of %d", what, pages, len(page.Entries), size, budget)
				case len(page.Entries) == 0 && page.Next != nil:
					t.Fatalf("%s: page %d is empty but has a Next cursor", what, pages)
				}
				for _, e := range page.Entries {
					if len(e.Value) == over && len(page.Entries) != 1 {
						t.Fatalf("%s: page %d holds the row over the budget with %d others", what, pages, len(page.Entries)-1)
					}
				}
				early = early || page.Next != nil && len(page.Entries) < limit
				for _, e := range page.Entries {
					got = append(got, store.KeyValue{Key: bytes.Clone(e.Key), Value: bytes.Clone(e.Value)})
				}
				if page.Next == nil {
					break
				}
				after = page.Next
			}
			if !sameRows(got, want) {
				t.Fatalf("%s: read %d rows %s\nwant %d rows %s", what, len(got), showKeys(got), len(want), showKeys(want))
			}
			if !early {
				t.Fatalf("%s: no page ended early, though %d rows of %d bytes pass the budget of %d", what, len(want), value, budget)
			}
		}
	}
}

// showKeys lists rows' keys, for rows too large to print.
func showKeys(rows []store.KeyValue) string {
	var b bytes.Buffer
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%q", []byte(r.Key))
	}
	return b.String()
}
