package fdblayer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mkit-dev/mkitfdb/store"
)

// Due index layout (see store.DueIndex):
//
//	wake time of a partition:  root | identity | 0xFF          = 8-byte big-endian ms
//	                                                             [+ 8-byte ceiling, see store.Wakeup]
//	due index entry:           root | 0xFF 0x01 | at (8 bytes, big-endian) | identity = empty
//
// The wake key sits just past the partition's subspace [root+identity,
// root+identity+0xFF), so no user key and no scan reaches it. The due index
// lives under root+0xFF, which no partition reaches: identities never
// start with 0xFF. Entries sort by time, then identity, as ScanDue lists
// them; the identity is the rest of the key. Both are written only by
// Apply, in the transaction of the batch that carries the Wakeup, so an
// entry never commits without its partition's wake time or the reverse.
const (
	dueTag      = 0x01
	dueHeader   = 2 // 0xFF dueTag
	wakeBytes   = 8
	wakeOpsCost = 4 // the wake key's read; clearing the old entry, writing the new one and the wake key
)

var _ store.DueIndex = (*Layer)(nil)

// ScanDue lists due index entries with AtMs <= untilMs, oldest first, then
// by partition identity, strictly after the entry after (nil: from the
// start), at most limit (limit >= 1; not capped, so that a page shorter
// than limit means the end). An entry may be stale by the time the caller
// acts on it; NextWake tells. It fails with store.ErrInvalid for limit < 1
// and store.ErrUnavailable when ctx ends or the engine fails; an entry
// that does not parse is store.ErrCorrupt. Safe for concurrent use.
func (l *Layer) ScanDue(ctx context.Context, untilMs uint64, after *store.DueEntry, limit int) ([]store.DueEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("fdblayer: scan due: %w: limit %d < 1", store.ErrInvalid, limit)
	}
	prefix := append(append([]byte{}, l.root...), partitionEnd, dueTag)
	begin := binary.BigEndian.AppendUint64(bytes0(prefix), 0)
	if after != nil {
		begin = binary.BigEndian.AppendUint64(bytes0(prefix), after.AtMs)
		begin = append(append(begin, after.Partition...), 0x00)
	}
	var end []byte
	if untilMs == math.MaxUint64 {
		end = append(bytes0(l.root), partitionEnd, dueTag+1)
	} else {
		end = binary.BigEndian.AppendUint64(bytes0(prefix), untilMs+1)
	}
	var entries []store.DueEntry
	err := l.read(ctx, nil, "scan due", func(txn ReadTxn) error {
		rows, err := txn.GetRange(nil, begin, end, limit, 0)
		if err != nil {
			return err
		}
		entries = make([]store.DueEntry, 0, len(rows))
		for _, r := range rows {
			rest := r.Key[len(prefix):]
			if len(rest) <= wakeBytes {
				return fmt.Errorf("fdblayer: scan due: %w: index entry of %d bytes", store.ErrCorrupt, len(r.Key))
			}
			entries = append(entries, store.DueEntry{
				AtMs:      binary.BigEndian.Uint64(rest),
				Partition: append([]byte{}, rest[wakeBytes:]...),
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
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
func (l *Layer) NextWake(ctx context.Context, p store.Partition) (uint64, bool, error) {
	sub, err := l.appendSubspace(nil, p)
	if err != nil {
		return 0, false, fmt.Errorf("fdblayer: next wake: %w", err)
	}
	key := [][]byte{append(sub, partitionEnd)}
	var at uint64
	err = l.read(ctx, p, "next wake of", func(txn ReadTxn) error {
		vals, err := txn.GetMany(nil, key)
		if err != nil {
			return err
		}
		at, _, err = decodeWake(vals[0])
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return at, at != 0, nil
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
func (l *Layer) setWake(txn Txn, sub, key []byte, cur, next wake) []byte {
	if cur == next {
		return key
	}
	identity := sub[len(l.root):]
	entry := func(at uint64) []byte {
		key = append(append(key[:0], l.root...), partitionEnd, dueTag)
		key = binary.BigEndian.AppendUint64(key, at)
		return append(key, identity...)
	}
	if cur.at != next.at && cur.at != 0 {
		txn.Clear(entry(cur.at))
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
		txn.Set(entry(next.at), []byte{})
	}
	return key
}
