package fdblayer_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
)

// scanAllRows pages through [start, end) of p.
func scanAllRows(t *testing.T, l *Layer, p store.Partition, start, end store.Key, limit int) []store.KeyValue {
	t.Helper()
	var (
		rows  []store.KeyValue
		after store.Cursor
	)
	for range 10_000 {
		page, err := l.Scan(t.Context(), p, start, end, after, limit)
		require.NoError(t, err)
		rows = append(rows, page.Entries...)
		if page.Next == nil {
			return rows
		}
		after = page.Next
	}
	t.Fatal("scan did not end")
	return nil
}

func rowKeys(rows []store.KeyValue) []string {
	ks := make([]string, len(rows))
	for i, r := range rows {
		ks[i] = string(r.Key)
	}
	return ks
}

// TestCursorTamper: every cursor that is not exactly one the Layer issued
// for this partition and range is ErrInvalid: truncated, extended, any
// single bit flipped, another version, another partition, another range,
// another root prefix, and a well-formed one whose position lies outside
// its range.
func TestCursorTamper(t *testing.T) {
	e := memengine.New()
	l := openLayer(t, e)
	p, other := testPartition("p"), testPartition("q")
	for _, part := range []store.Partition{p, other} {
		mustApply(t, l, part, store.NewBatch().Put(k("a"), v("1")).Put(k("b"), v("2")).Put(k("c"), v("3")))
	}
	page, err := l.Scan(t.Context(), p, k("a"), k("z"), nil, 1)
	require.NoError(t, err)
	c := page.Next
	require.NotNil(t, c)

	type variant struct {
		name          string
		p             store.Partition
		start, end    store.Key
		cursor        store.Cursor
		onOtherLayers bool
	}
	vs := []variant{
		{name: "empty non-nil", cursor: store.Cursor{}},
		{name: "extended", cursor: append(bytes.Clone(c), 0)},
		{name: "version 2", cursor: append(store.Cursor{2}, c[1:]...)},
		{name: "other partition", p: other},
		{name: "other start", start: k("a\x00")},
		{name: "other end", end: k("y")},
		{name: "end dropped", end: k("")},
		{name: "other root prefix", onOtherLayers: true},
	}
	for n := range len(c) {
		vs = append(vs, variant{name: fmt.Sprintf("truncated to %d", n), cursor: bytes.Clone(c[:n])})
	}
	for i := range len(c) * 8 {
		bad := bytes.Clone(c)
		bad[i/8] ^= 1 << (i % 8)
		vs = append(vs, variant{name: fmt.Sprintf("bit %d flipped", i), cursor: bad})
	}
	sub, err := l.AppendSubspace(nil, p)
	require.NoError(t, err)
	vs = append(vs,
		variant{name: "position before start", cursor: AppendCursor(nil, sub, k("a"), k("z"), k("0"))},
		variant{name: "position at end", cursor: AppendCursor(nil, sub, k("a"), k("z"), k("z"))},
	)

	otherRoot := openLayer(t, memengine.New(), Config{RootPrefix: []byte("\x02other\x00")})
	for _, vt := range vs {
		target, part, start, end, cursor := l, store.Partition(p), k("a"), k("z"), c
		if vt.p != nil {
			part = vt.p
		}
		if vt.start != nil {
			start = vt.start
		}
		if vt.end != nil {
			end = vt.end
		}
		if vt.cursor != nil {
			cursor = vt.cursor
		}
		if vt.onOtherLayers {
			target = otherRoot
		}
		page, err := target.Scan(t.Context(), part, start, end, cursor, 10)
		require.ErrorIs(t, err, store.ErrInvalid, "%s: got %d rows", vt.name, len(page.Entries))
	}

	// The untampered cursor resumes after "a".
	page, err = l.Scan(t.Context(), p, k("a"), k("z"), c, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, rowKeys(page.Entries))
}

// TestCursorLayoutStable pins the version-1 cursor bytes: cursors may be
// stored, so a change of layout needs a new version.
func TestCursorLayoutStable(t *testing.T) {
	sub := []byte(DefaultRootPrefix + "\x02p\x00")
	got := AppendCursor(nil, sub, k("a"), k("z"), k("b\x00"))
	require.Equal(t, "01"+"d9d95496b40be82d"+"6200", hex.EncodeToString(got))
	last, err := ParseCursor(got, sub, k("a"), k("z"))
	require.NoError(t, err)
	require.Equal(t, []byte("b\x00"), last)
}

// TestScanPageBound: a limit above the Layer's maximum page returns pages
// of the maximum, with cursors, until the range ends.
func TestScanPageBound(t *testing.T) {
	l := openLayer(t, memengine.New(), Config{MaxScanRows: 3})
	p := testPartition("p")
	b := store.NewBatch()
	for i := range 7 {
		b.Put(k(fmt.Sprintf("r%d", i)), v("x"))
	}
	mustApply(t, l, p, b)
	page, err := l.Scan(t.Context(), p, nil, nil, nil, 100)
	require.NoError(t, err)
	require.Len(t, page.Entries, 3)
	require.NotNil(t, page.Next)
	require.Len(t, scanAllRows(t, l, p, nil, nil, 100), 7)
}

// TestPartitionIsolation: partitions whose identities are prefixes of one
// another in bytes (the tuple strings "iso" and "iso\x00" encode as
// 02 69 73 6f 00 and 02 69 73 6f 00 ff 00) or in name ("is", "isox") each
// see only their own rows, over an open-ended scan and in Stats; a key
// starting with 0xFF, which would reach into a sibling, is ErrInvalid.
func TestPartitionIsolation(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		ps := []testPartition{"iso", "iso\x00", "iso\x00x", "is", "isox"}
		keys := []string{"\x00", "\x00\xff", "k", "\xfe\xff\xff"}
		for i, p := range ps {
			b := store.NewBatch()
			for _, key := range keys {
				b.Put(k(key), v(fmt.Sprintf("%d", i)))
			}
			mustApply(t, l, p, b)
		}
		for i, p := range ps {
			rows := scanAllRows(t, l, p, nil, nil, 2)
			require.Equal(t, keys, rowKeys(rows), "partition %q", string(p))
			for _, r := range rows {
				require.Equal(t, v(fmt.Sprintf("%d", i)), r.Value, "partition %q key %q", string(p), r.Key)
			}
			// Stats is exact on the memory and bbolt engines: every row's
			// full key and value.
			switch l.Engine().(type) {
			case *memengine.Engine, *boltengine.Engine:
			default:
				continue
			}
			sub, err := l.AppendSubspace(nil, p)
			require.NoError(t, err)
			want := int64(0)
			for _, key := range keys {
				want += int64(len(sub) + len(key) + 1)
			}
			st, err := l.Stats(t.Context(), p)
			require.NoError(t, err)
			require.Equal(t, want, st.ApproximateBytes, "partition %q", string(p))
		}

		_, err := l.Apply(t.Context(), ps[0], store.NewBatch().Put(k("\xff\x00x"), v("alias")))
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = l.Apply(t.Context(), ps[0], store.NewBatch().Require(store.Absent(k("\xff"))).Put(k("a"), v("a")))
		require.ErrorIs(t, err, store.ErrInvalid)
		_, _, err = l.Get(t.Context(), ps[0], k("\xff\x00x"))
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Equal(t, keys, rowKeys(scanAllRows(t, l, ps[0], nil, k("\xff\xff"), 10)), "an end past 0xFF stops at the partition's end")
	})
}

// TestRootPrefixIsolation: Layers with different roots share an engine
// without seeing each other's rows.
func TestRootPrefixIsolation(t *testing.T) {
	e := memengine.New()
	a := openLayer(t, e)
	b, err := Open(e, Config{RootPrefix: []byte("\x02other\x00")})
	require.NoError(t, err)
	p := testPartition("p")
	mustApply(t, a, p, store.NewBatch().Put(k("k"), v("a")))
	mustApply(t, b, p, store.NewBatch().Put(k("k"), v("b")).Put(k("only-b"), v("b")))
	require.Equal(t, v("a"), mustGet(t, a, p, k("k")))
	require.Equal(t, []string{"k"}, rowKeys(scanAllRows(t, a, p, nil, nil, 10)))
	require.Equal(t, []string{"k", "only-b"}, rowKeys(scanAllRows(t, b, p, nil, nil, 10)))
}

// TestCutPage: a page holds its first row, then rows while it holds at
// most n rows and maxBytes bytes; the range goes on when a row was left
// out, or when a lone first row over the budget stopped the read.
func TestCutPage(t *testing.T) {
	rowsOf := func(sizes ...int) []kv.KeyValue {
		out := make([]kv.KeyValue, len(sizes))
		for i, n := range sizes {
			out[i] = kv.KeyValue{Key: []byte{byte(i)}, Value: make([]byte, n-1)}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		got         []kv.KeyValue
		n, maxBytes int
		keep        int
		more        bool
	}{
		{"empty", nil, 3, 10, 0, false},
		{"fits", rowsOf(2, 2), 3, 10, 2, false},
		{"row limit, the lookahead row left out", rowsOf(2, 2, 2, 2), 3, 0, 3, true},
		{"budget reached exactly", rowsOf(5, 5, 1), 3, 10, 2, true},
		{"row past the budget left out", rowsOf(5, 6), 3, 10, 1, true},
		{"lone row over the budget", rowsOf(11), 3, 10, 1, true},
		{"lone row within the budget", rowsOf(10), 3, 10, 1, false},
		{"no budget", rowsOf(100, 100), 3, 0, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, more := CutPage(tc.got, tc.n, tc.maxBytes)
			require.Equal(t, tc.keep, keep)
			require.Equal(t, tc.more, more)
		})
	}
}

// TestScanByteBudgetNext: a page that ended at the byte budget hands out
// a cursor only when a row follows, except after a lone row over the
// budget, whose read stopped before it could tell: the next page, empty,
// ends the scan.
func TestScanByteBudgetNext(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		p := testPartition("p")
		mustApply(t, l, p, store.NewBatch().Put(k("a"), make(store.Value, 40)).Put(k("b"), make(store.Value, 40)).Put(k("c"), make(store.Value, 200)))
		var pages [][]string
		var after store.Cursor
		for range 10 {
			page, err := l.Scan(t.Context(), p, nil, nil, after, 100)
			require.NoError(t, err)
			pages = append(pages, rowKeys(page.Entries))
			if page.Next == nil {
				break
			}
			after = page.Next
		}
		require.Equal(t, [][]string{{"a", "b"}, {"c"}, {}}, pages)
	}, Config{MaxScanBytes: 100})
}
