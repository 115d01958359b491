package fdblayer

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Scan reads the rows of partition p with keys in [start, end), in key
// order, strictly after the cursor when after is non-nil, at most limit
// rows (and at most the Layer's maximum page, DefaultMaxScanRows unless
// configured), and no more bytes after the first row than
// Capabilities().MaxScanBytes (keys counted with the partition's prefix):
// a page that reaches either bound ends early with a Next cursor. An
// empty start means the partition's first key; an empty end, or one
// starting with 0xFF, the partition's end; a range with start >= end is
// empty. Next is nil when the range is exhausted; otherwise it resumes
// after the page's last row, whatever was inserted or deleted meanwhile.
// Next is exact (nil exactly when no row follows) except after a page
// holding one row over the byte budget alone, which the next page, empty,
// ends. One page is one snapshot; the rows are the caller's.
//
// It fails with store.ErrInvalid, before any I/O, when limit < 1, start or
// end exceed Capabilities().MaxKeyBytes, p cannot encode, or after is
// truncated, garbled, of an unknown version or issued for another
// partition or range (never a silent restart); with store.ErrUnavailable
// when ctx ends or the engine fails. It is safe for concurrent use.
func (l *Layer) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, _, err := l.scan(ctx, p, start, end, after, limit, nil, nil)
	return page, err
}

// AppendScan implements store.ScanAppender: it reads the page Scan would
// read, appending its rows to rows and their bytes to buf (a new array
// only when buf has no room). It fails as Scan does, returning an empty
// page and buf as passed; it does not retain rows or buf. It is safe for
// concurrent use (on distinct rows and buf).
func (l *Layer) AppendScan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int, rows []store.KeyValue, buf []byte) (store.ScanPage, []byte, error) {
	return l.scan(ctx, p, start, end, after, limit, rows, buf)
}

var _ store.ScanAppender = (*Layer)(nil)

// scan is Scan and AppendScan: the page's rows are appended to rows and
// their bytes to buf.
func (l *Layer) scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int, rows []store.KeyValue, buf []byte) (store.ScanPage, []byte, error) {
	fail := func(err error) (store.ScanPage, []byte, error) { return store.ScanPage{}, buf, err }
	s := l.getScratch()
	defer l.putScratch(s)
	sub, err := l.appendSubspace(s.buf[:0], p)
	if err != nil {
		return fail(fmt.Errorf("fdblayer: scan: %w", err))
	}
	q, err := l.pageQuery(s, p, sub, start, end, after, limit)
	if err != nil {
		return fail(err)
	}
	if q.empty() {
		return store.ScanPage{Entries: rows}, buf, nil
	}
	var page store.ScanPage
	out := buf
	err = l.read(ctx, p, "scan", func(txn kv.ReadTxn) error {
		var err error
		page, out, _, err = q.read(txn, s, l.caps.MaxScanBytes, rows, buf)
		return err
	})
	if err != nil {
		return fail(err)
	}
	return page, out, nil
}

// pageQuery is one Scan page's range in engine keys: begin and stop bound
// the range read, n is the page's row limit.
type pageQuery struct {
	sub, start, end []byte
	begin, stop     []byte
	n               int
}

// pageQuery checks a Scan's arguments and builds its engine range in s's
// buffer, after sub (p's subspace, at the start of s.buf). It fails with
// store.ErrInvalid as Scan does.
func (l *Layer) pageQuery(s *scratch, p store.Partition, sub, start, end store.Key, after store.Cursor, limit int) (pageQuery, error) {
	if limit < 1 {
		return pageQuery{}, fmt.Errorf("fdblayer: scan %s: %w: limit %d < 1", store.PartitionName(p), store.ErrInvalid, limit)
	}
	if len(start) > l.caps.MaxKeyBytes || len(end) > l.caps.MaxKeyBytes {
		return pageQuery{}, fmt.Errorf("fdblayer: scan %s: %w: range bound over %d bytes", store.PartitionName(p), store.ErrInvalid, l.caps.MaxKeyBytes)
	}
	from := []byte(start)
	var last []byte
	if after != nil {
		var err error
		if last, err = parseCursor(after, sub, start, end); err != nil {
			return pageQuery{}, fmt.Errorf("fdblayer: scan %s: %w", store.PartitionName(p), err)
		}
		from = last
	}
	// Engine bounds: sub+from (plus 0x00 to resume strictly after a
	// cursor's key) up to sub+end, clamped to the subspace's end sub+0xFF.
	need := 3*len(sub) + len(from) + 1 + len(end) + 1
	if cap(sub) < need {
		sub = append(make([]byte, 0, need), sub...)
	}
	s.buf = sub
	begin := append(sub[len(sub):], sub...)
	begin = append(begin, from...)
	if last != nil {
		begin = append(begin, 0x00)
	}
	stop := begin[len(begin):]
	stop = append(stop, sub...)
	if len(end) > 0 && end[0] != partitionEnd {
		stop = append(stop, end...)
	} else {
		stop = append(stop, partitionEnd)
	}
	return pageQuery{sub: sub, start: start, end: end, begin: begin, stop: stop, n: min(limit, l.maxScanRows)}, nil
}

// empty reports whether the range holds no key at all.
func (q *pageQuery) empty() bool { return bytes.Compare(q.begin, q.stop) >= 0 }

// read reads the page in txn, within maxBytes after its first row (0:
// rows only): its rows appended to rows and their bytes to buf. It
// returns the page, buf extended, and got, the engine's rows the page
// holds (valid until txn ends).
func (q *pageQuery) read(txn kv.ReadTxn, s *scratch, maxBytes int, rows []store.KeyValue, buf []byte) (store.ScanPage, []byte, []kv.KeyValue, error) {
	// One row more than the page says whether the range goes on.
	got, err := txn.GetRange(s.rows[:0], q.begin, q.stop, q.n+1, maxBytes)
	s.rows = got
	if err != nil {
		return store.ScanPage{}, buf, nil, err
	}
	keep, more := cutPage(got, q.n, maxBytes)
	var page store.ScanPage
	page.Entries, buf = appendPage(rows, buf, got[:keep], len(q.sub))
	if more {
		page.Next = appendCursor(nil, q.sub, q.start, q.end, page.Entries[len(page.Entries)-1].Key)
	}
	return page, buf, got[:keep], nil
}

// cutPage returns how many of got, rows a range read returned for a page
// of n rows and maxBytes bytes (read with limit n+1 and byte budget
// maxBytes, so that got holds the first row past the page when there is
// one), make the page: the first row, then rows while the page holds at
// most n rows and maxBytes bytes. more reports that the range goes on
// after them; it is also true after a lone first row over maxBytes, with
// which the read stopped, not knowing.
func cutPage(got []kv.KeyValue, n, maxBytes int) (keep int, more bool) {
	size := 0
	for i, r := range got {
		size += len(r.Key) + len(r.Value)
		if i > 0 && (i >= n || maxBytes > 0 && size > maxBytes) {
			return i, true
		}
	}
	return len(got), len(got) == 1 && maxBytes > 0 && size > maxBytes
}

// rowsBytes counts the bytes of rows' keys and values.
func rowsBytes(rows []kv.KeyValue) int {
	n := 0
	for _, r := range rows {
		n += len(r.Key) + len(r.Value)
	}
	return n
}

// appendPage copies engine rows into caller-owned entries, appended to
// dst, their bytes appended to buf, dropping the subspace prefix (the
// first prefixLen bytes) of every key. At most one allocation holds all
// the bytes (none when buf has room); every key and value is capped so
// that appending to one cannot overwrite the next.
func appendPage(dst []store.KeyValue, buf []byte, rows []kv.KeyValue, prefixLen int) ([]store.KeyValue, []byte) {
	if len(rows) == 0 {
		return dst, buf
	}
	n := 0
	for _, r := range rows {
		n += len(r.Key) - prefixLen + len(r.Value)
	}
	buf = slices.Grow(buf, n)
	dst = slices.Grow(dst, len(rows))
	for _, r := range rows {
		k := len(buf)
		buf = append(buf, r.Key[prefixLen:]...)
		v := len(buf)
		buf = append(buf, r.Value...)
		dst = append(dst, store.KeyValue{Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)]})
	}
	return dst, buf
}
