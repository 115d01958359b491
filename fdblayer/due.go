package fdblayer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Due index layout (see store.DueIndex):
//
//	wake time of a partition:  root | identity | 0xFF          = 8-byte big-endian ms
//	                                                             [+ 8-byte ceiling, see store.Wakeup]
//	due index entry:           root | 0xFF 0x02 | bucket (1 byte) | at (8 bytes, big-endian) | identity = empty
//	entry of the first layout: root | 0xFF 0x01 | at (8 bytes, big-endian) | identity = empty
//
// The wake key sits just past the partition's subspace [root+identity,
// root+identity+0xFF), so no user key and no scan reaches it. The due index
// lives under root+0xFF, which no partition reaches: identities never
// start with 0xFF. Both are written only by Apply, in the transaction of
// the batch that carries the Wakeup, so an entry never commits without its
// partition's wake time or the reverse.
//
// Design note: DueHashBuckets buckets, chosen by a hash of the identity.
//
// An index ordered by time alone puts every wake time written near "now"
// at the tail of one key range, so on FoundationDB one storage server
// takes every timer write of the cluster, whatever its size. A bucket
// byte, FNV-1a of the identity modulo the bucket count, before the time
// spreads those writes: over DueHashBuckets (16) ranges on an engine
// whose keys many servers share ([kv.Distributed]: FoundationDB, and
// fdbsim's MVCCEngine, which stands for it), so that 16 storage teams share the
// tail, far more than the few a cluster running this library's
// schedulers keeps busy, while a listing of every bucket stays one
// transaction of 17 range reads issued at once (16 buckets and the first
// layout's range, see [kv.RangesReader]). On the memory and bbolt engines, one
// process's memory or file, the index keeps one bucket: spreading there
// buys nothing and costs the index's locality (bench/README.md measures
// it). Within a bucket
// entries sort by time, then identity, as ScanDue lists them. Every Layer
// over a store must use the same count (its engine's): a listing covers
// the buckets its Layer knows.
//
// Entries of the first layout (tag 0x01, no bucket) are listed as the
// last bucket, so a store written before buckets keeps every timer; each
// moves to its bucket when its partition's wake time next changes (a
// scheduler's claim changes it), and MigrateDueIndexPage moves the rest,
// a page at a time (MigrateDueIndex loops it).
const (
	dueTagV1    = 0x01
	dueTag      = 0x02
	dueHeader   = 2 // 0xFF dueTag
	wakeBytes   = 8
	wakeOpsCost = 5 // the wake key's read; clearing the old entry (in both layouts), writing the new one and the wake key
)

// DueHashBuckets is the number of buckets the due index hashes
// partitions into on a [kv.Distributed] engine (see the design note
// above); it keeps one on the others.
const DueHashBuckets = 16

var _ store.DueIndex = (*Layer)(nil)

// dueBucket is the bucket of the due index that holds the entry of the
// partition whose tuple identity is identity: FNV-1a (32 bits) of it,
// modulo the Layer's hashed buckets (DueBuckets() - 1).
func (l *Layer) dueBucket(identity []byte) int {
	h := uint32(2166136261)
	for _, c := range identity {
		h ^= uint32(c)
		h *= 16777619
	}
	return int(h % uint32(l.dueBuckets))
}

// DueBuckets implements store.DueIndex: the hashed buckets (DueHashBuckets
// on a kv.Distributed engine, else 1) and one more,
// last, that lists the entries of the layout before buckets.
func (l *Layer) DueBuckets() int { return l.dueBuckets + 1 }

// v1Bucket is the bucket that lists the first layout's entries.
func (l *Layer) v1Bucket() int { return l.dueBuckets }

// ScanDue implements store.DueIndex: it lists the entries q selects in one
// read transaction, with a range read per bucket, each bounded by
// q.Limit (and q.PerBucket): all of them at once on an engine whose
// transactions are RangesReaders (so that a listing is one round trip),
// else one after another until the page is full. It fails with
// store.ErrInvalid for a query out of range, store.ErrUnavailable when
// ctx ends or the engine fails; an entry that does not parse is
// store.ErrCorrupt. Safe for concurrent use.
func (l *Layer) ScanDue(ctx context.Context, q store.DueQuery) ([]store.DueEntry, error) {
	n, err := q.Check(l.DueBuckets())
	if err != nil {
		return nil, fmt.Errorf("fdblayer: scan due: %w", err)
	}
	from, until := encodedTime(q.From), encodedTime(q.Until)
	if from > until {
		return []store.DueEntry{}, nil
	}
	first := 0
	if q.After != nil {
		first = q.Offset(q.After.Bucket, l.DueBuckets())
	}
	limit := q.Limit
	if q.PerBucket > 0 {
		limit = min(limit, q.PerBucket)
	}
	reads := make([]kv.RangeRead, 0, n-first)
	for i := first; i < n; i++ {
		var after *store.DueEntry
		if i == first {
			after = q.After
		}
		begin, end := l.bucketRange((q.Start+i)%l.DueBuckets(), from, until, after)
		reads = append(reads, kv.RangeRead{Begin: begin, End: end, Limit: limit})
	}
	var entries []store.DueEntry
	err = l.read(ctx, nil, "scan due", func(txn kv.ReadTxn) error {
		entries = make([]store.DueEntry, 0, min(q.Limit, 64))
		if _, ok := txn.(kv.RangesReader); ok {
			rowsets, err := getRanges(txn, reads)
			if err != nil {
				return err
			}
			for i, rows := range rowsets {
				if entries, err = l.appendEntries(entries, (q.Start+first+i)%l.DueBuckets(), rows, q.Limit); err != nil {
					return err
				}
			}
			return nil
		}
		for i, r := range reads {
			if len(entries) >= q.Limit {
				break
			}
			rows, err := txn.GetRange(nil, r.Begin, r.End, min(r.Limit, q.Limit-len(entries)), 0)
			if err != nil {
				return err
			}
			if entries, err = l.appendEntries(entries, (q.Start+first+i)%l.DueBuckets(), rows, q.Limit); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// dueBucketPrefix is the key prefix of bucket b's entries.
func (l *Layer) dueBucketPrefix(b int) []byte {
	if b == l.v1Bucket() {
		return append(bytes0(l.root), partitionEnd, dueTagV1)
	}
	return append(bytes0(l.root), partitionEnd, dueTag, byte(b))
}

// bucketRange is the key range of bucket b's entries with fromMs <= at
// <= untilMs (encoded times), strictly after after (nil: from the start).
func (l *Layer) bucketRange(b int, fromMs, untilMs uint64, after *store.DueEntry) (begin, end []byte) {
	prefix := l.dueBucketPrefix(b)
	begin = binary.BigEndian.AppendUint64(bytes0(prefix), fromMs)
	if after != nil && encodedTime(after.At) >= fromMs {
		begin = binary.BigEndian.AppendUint64(bytes0(prefix), encodedTime(after.At))
		begin = append(append(begin, after.Partition...), 0x00)
	}
	if untilMs == math.MaxUint64 {
		end = append(bytes0(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	} else {
		end = binary.BigEndian.AppendUint64(bytes0(prefix), untilMs+1)
	}
	return begin, end
}

// appendEntries appends to entries the entries of bucket b that rows hold,
// until entries holds limit.
func (l *Layer) appendEntries(entries []store.DueEntry, b int, rows []kv.KeyValue, limit int) ([]store.DueEntry, error) {
	prefix := len(l.root) + dueHeader + 1 // the tag, then the bucket
	if b == l.v1Bucket() {
		prefix-- // no bucket
	}
	for _, r := range rows {
		if len(entries) >= limit {
			break
		}
		rest := r.Key[prefix:]
		if len(rest) <= wakeBytes {
			return entries, fmt.Errorf("fdblayer: scan due: %w: index entry of %d bytes", store.ErrCorrupt, len(r.Key))
		}
		entries = append(entries, store.DueEntry{
			Bucket:    b,
			At:        store.DecodeTime(binary.BigEndian.Uint64(rest)),
			Partition: append([]byte{}, rest[wakeBytes:]...),
		})
	}
	return entries, nil
}

// bytes0 returns a copy of b with room to append.
func bytes0(b []byte) []byte { return append(make([]byte, 0, len(b)+64), b...) }

// NextWake reads partition p's wake time; ok is false when it has none.
// It fails with store.ErrInvalid for a partition that cannot encode,
// store.ErrCorrupt for a stored wake time that does not decode, and
// store.ErrUnavailable when ctx ends or the engine fails. Safe for
// concurrent use.
func (l *Layer) NextWake(ctx context.Context, p store.Partition) (time.Time, bool, error) {
	sub, err := l.appendSubspace(nil, p)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("fdblayer: next wake: %w", err)
	}
	key := [][]byte{append(sub, partitionEnd)}
	var at uint64
	err = l.read(ctx, p, "next wake of", func(txn kv.ReadTxn) error {
		vals, err := txn.GetMany(nil, key)
		if err != nil {
			return err
		}
		at, _, err = decodeWake(vals[0])
		return err
	})
	if err != nil {
		return time.Time{}, false, err
	}
	return store.DecodeTime(at), at != 0, nil
}

// encodedTime is t as stored data holds it (see store.EncodeTime), for a
// time a batch's or a query's validation has checked.
func encodedTime(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}

// decodeWake decodes a stored wake time and its ceiling; absent is 0.
func decodeWake(v []byte) (at, ceil uint64, err error) {
	if v == nil {
		return 0, 0, nil
	}
	if len(v) != wakeBytes && len(v) != 2*wakeBytes {
		return 0, 0, fmt.Errorf("%w: stored wake time of %d bytes", store.ErrCorrupt, len(v))
	}
	at = binary.BigEndian.Uint64(v)
	if len(v) == 2*wakeBytes {
		ceil = binary.BigEndian.Uint64(v[wakeBytes:])
	}
	if at == 0 || len(v) == 2*wakeBytes && (ceil == 0 || ceil >= at) {
		return 0, 0, fmt.Errorf("%w: stored wake time %d with ceiling %d", store.ErrCorrupt, at, ceil)
	}
	return at, ceil, nil
}

// wake is a partition's wake time and its ceiling (see store.Wakeup).
type wake struct{ at, ceil uint64 }

// setWake writes, in txn, the change of a partition's wake time from cur
// to next: its wake key and its due index entries. sub is the partition's
// subspace; key is scratch.
func (l *Layer) setWake(txn kv.Txn, sub, key []byte, cur, next wake) []byte {
	if cur == next {
		return key
	}
	identity := sub[len(l.root):]
	bucket := l.dueBucket(identity)
	if cur.at != next.at && cur.at != 0 {
		key = l.appendDueKey(key[:0], bucket, cur.at, identity)
		txn.Clear(key)
		if l.v1.Load() != v1Empty {
			// The entry may still be of the first layout: clear that too
			// (a blind clear, no read), so that it moves to its bucket.
			key = l.appendDueKey(key[:0], l.v1Bucket(), cur.at, identity)
			txn.Clear(key)
		}
	}
	wakeKey := append(append(key[:0], sub...), partitionEnd)
	if next.at == 0 {
		txn.Clear(wakeKey)
		return key
	}
	// The engine keeps the value until the transaction ends: give it its
	// own bytes.
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 2*wakeBytes), next.at)
	if next.ceil != 0 {
		v = binary.BigEndian.AppendUint64(v, next.ceil)
	}
	txn.Set(wakeKey, v)
	if cur.at != next.at {
		key = l.appendDueKey(key[:0], bucket, next.at, identity)
		txn.Set(key, emptyValue)
	}
	return key
}

// emptyValue is the value of every due index entry.
var emptyValue = []byte{}

// appendDueKey appends to dst the key of the due index entry of the
// partition whose identity is identity at atMs, in bucket b (l.v1Bucket():
// the first layout's).
func (l *Layer) appendDueKey(dst []byte, b int, atMs uint64, identity []byte) []byte {
	dst = append(dst, l.root...)
	if b == l.v1Bucket() {
		dst = append(dst, partitionEnd, dueTagV1)
	} else {
		dst = append(dst, partitionEnd, dueTag, byte(b))
	}
	dst = binary.BigEndian.AppendUint64(dst, atMs)
	return append(dst, identity...)
}

// What a Layer knows of the first layout's entries (Layer.v1).
const (
	v1Unknown = iota
	v1Present
	v1Empty
)

// probeV1 looks, in txn, whether the store holds entries of the first
// layout, once per Layer, before its first wake change: a store that holds
// none (every store written since buckets, and one MigrateDueIndexPage
// found emptied) never clears them. An older process writing first-layout
// entries after that leaves entries a wake change no longer removes: they
// are listed, found stale, and MigrateDueIndexPage removes them.
func (l *Layer) probeV1(txn kv.ReadTxn) error {
	if l.v1.Load() != v1Unknown {
		return nil
	}
	prefix := l.dueBucketPrefix(l.v1Bucket())
	end := append(bytes0(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	rows, err := txn.GetRange(nil, prefix, end, 1, 0)
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		l.v1.CompareAndSwap(v1Unknown, v1Present)
	} else {
		l.v1.CompareAndSwap(v1Unknown, v1Empty)
	}
	return nil
}

// migratePage is how many entries of the first layout one transaction of
// MigrateDueIndexPage moves.
const migratePage = 256

// MigrateDueIndex moves every due index entry of the first layout (no
// bucket; see the layout above) to its bucket, looping MigrateDueIndexPage
// until none is left, and returns how many it moved. A store never needs
// it to find its timers (see MigrateDueIndexPage), and package evolve's
// DueIndexMigration runs the same pages with a checkpoint and a lease. It
// fails as MigrateDueIndexPage does; the pages moved before stay moved.
func (l *Layer) MigrateDueIndex(ctx context.Context) (int, error) {
	moved := 0
	for {
		n, more, err := l.MigrateDueIndexPage(ctx)
		moved += n
		if err != nil || !more {
			return moved, err
		}
	}
}

// MigrateDueIndexPage moves up to 256 due index entries of the first
// layout to their buckets, in one transaction, and returns how many it
// moved and whether entries of that layout may be left (more false: the
// first layout's range was found empty, and wake changes no longer look
// for it). The transaction reads the entries and their partitions' wake
// times and writes the entries the wake times call for (a stale entry,
// whose partition has no wake time or another one, goes), so a page is
// safe beside running schedulers and timer writers (a concurrent change
// conflicts, and the page runs again), and safe to run again after a crash
// or an unknown commit result: it finds the entries moved gone. A store
// never needs it to find its timers: ScanDue lists the first layout's
// entries as its last bucket, and a partition's entry moves when its wake
// time changes. It fails with store.ErrUnavailable when ctx ends or the
// engine fails, and with store.ErrCorrupt for an entry or a wake time
// that does not decode, moving nothing. Safe for concurrent use.
func (l *Layer) MigrateDueIndexPage(ctx context.Context) (moved int, more bool, err error) {
	prefix := l.dueBucketPrefix(l.v1Bucket())
	end := append(bytes0(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	n, err := l.migratePage(ctx, prefix, end)
	if err != nil {
		return n, true, err
	}
	if n < migratePage {
		// Emptied: wake changes no longer clear first-layout entries.
		l.v1.Store(v1Empty)
		return n, false, nil
	}
	return n, true, nil
}

// migratePage moves the first migratePage entries of the first layout in
// one transaction, retried as Apply retries, and returns how many it
// moved.
func (l *Layer) migratePage(ctx context.Context, prefix, end []byte) (int, error) {
	const what = "migrate due index"
	if err := l.notNested(ctx, what, nil); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, l.opError(what, nil, nil, err)
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return 0, l.opError(what, nil, nil, err)
	}
	defer txn.Close()
	var unknown error
	for attempt := 0; ; attempt++ {
		n, committing, err := l.migrateIn(ctx, txn, prefix, end)
		if err == nil || errors.Is(err, store.ErrCorrupt) {
			return n, err
		}
		if err := l.giveUp(ctx, txn, what, nil, attempt, committing, err, &unknown); err != nil {
			return 0, err
		}
	}
}

// migrateIn is one attempt of migratePage in txn.
func (l *Layer) migrateIn(ctx context.Context, txn kv.Txn, prefix, end []byte) (n int, committing bool, err error) {
	rows, err := txn.GetRange(nil, prefix, end, migratePage, 0)
	if err != nil || len(rows) == 0 {
		return 0, false, err
	}
	type old struct{ at, id []byte }
	olds := make([]old, len(rows))
	wakeKeys := make([][]byte, len(rows))
	for i, r := range rows {
		rest := r.Key[len(prefix):]
		if len(rest) <= wakeBytes {
			return 0, false, fmt.Errorf("fdblayer: migrate due index: %w: index entry of %d bytes", store.ErrCorrupt, len(r.Key))
		}
		olds[i] = old{at: rest[:wakeBytes], id: rest[wakeBytes:]}
		wakeKeys[i] = append(append(bytes0(l.root), olds[i].id...), partitionEnd)
	}
	vals, err := txn.GetMany(nil, wakeKeys)
	if err != nil {
		return 0, false, err
	}
	for i, o := range olds {
		txn.Clear(rows[i].Key)
		at, _, err := decodeWake(vals[i])
		if err != nil {
			return 0, false, fmt.Errorf("fdblayer: migrate due index: %x: %w", o.id, err)
		}
		if at == 0 {
			continue // a stale entry: the partition has no wake time
		}
		// The entry the wake time calls for, whether or not the old one
		// named it (a stale one stood beside it).
		txn.Set(l.appendDueKey(nil, l.dueBucket(o.id), at, o.id), emptyValue)
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := txn.Commit(); err != nil {
		return 0, true, err
	}
	return len(rows), false, nil
}

var _ store.Overlapping = (*Layer)(nil)

// OverlapsCalls implements store.Overlapping: calls overlap on a
// [kv.Distributed] engine (FoundationDB's, fdbsim's MVCCEngine), whose
// transactions run at once, and not on the memory and bbolt engines, which run one writer at
// a time.
func (l *Layer) OverlapsCalls() bool {
	d, ok := l.engine.(kv.Distributed)
	return ok && d.Distributed()
}
