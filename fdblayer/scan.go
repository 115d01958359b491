package fdblayer

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/mkit-dev/mkitfdb/store"
)

// Scan reads the rows of partition p with keys in [start, end), in key
// order, strictly after the cursor when after is non-nil, at most limit
// rows (and at most the Layer's maximum page, DefaultMaxScanRows unless
// configured). An empty start means the partition's first key; an empty
// end, or one starting with 0xFF, the partition's end; a range with
// start >= end is empty. Next is nil
// when the range is exhausted; otherwise it resumes after the page's last
// row, whatever was inserted or deleted meanwhile. One page is one
// snapshot; the rows are the caller's.
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
	if limit < 1 {
		return fail(fmt.Errorf("fdblayer: scan %s: %w: limit %d < 1", store.PartitionName(p), store.ErrInvalid, limit))
	}
	if len(start) > l.caps.MaxKeyBytes || len(end) > l.caps.MaxKeyBytes {
		return fail(fmt.Errorf("fdblayer: scan %s: %w: range bound over %d bytes", store.PartitionName(p), store.ErrInvalid, l.caps.MaxKeyBytes))
	}
	s := l.getScratch()
	defer l.putScratch(s)
	sub, err := l.appendSubspace(s.buf[:0], p)
	if err != nil {
		return fail(fmt.Errorf("fdblayer: scan: %w", err))
	}
	from := start
	var last []byte
	if after != nil {
		if last, err = parseCursor(after, sub, start, end); err != nil {
			return fail(fmt.Errorf("fdblayer: scan %s: %w", store.PartitionName(p), err))
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
	if bytes.Compare(begin, stop) >= 0 {
		return store.ScanPage{Entries: rows}, buf, nil
	}

	n := min(limit, l.maxScanRows)
	var page store.ScanPage
	out := buf
	err = l.read(ctx, p, "scan", func(txn ReadTxn) error {
		// One row more than the page says whether the range goes on.
		got, err := txn.GetRange(s.rows[:0], begin, stop, n+1)
		s.rows = got
		if err != nil {
			return err
		}
		more := len(got) > n
		if more {
			got = got[:n]
		}
		page.Entries, out = appendPage(rows, buf, got, len(sub))
		if more {
			page.Next = appendCursor(nil, sub, start, end, page.Entries[len(page.Entries)-1].Key)
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return page, out, nil
}

// appendPage copies engine rows into caller-owned entries, appended to
// dst, their bytes appended to buf, dropping the subspace prefix (the
// first prefixLen bytes) of every key. At most one allocation holds all
// the bytes (none when buf has room); every key and value is capped so
// that appending to one cannot overwrite the next.
func appendPage(dst []store.KeyValue, buf []byte, rows []KeyValue, prefixLen int) ([]store.KeyValue, []byte) {
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
