package fdblayer

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: moving a partition.
//
// A partition's identity is in every key of its rows, its wake key and
// its due index entry, so a partition that must change identity (one
// written before schemas had namespaces) is moved row by row. A store
// batch is one partition's, so the move is the Layer's, on the engine:
// each page is one engine transaction that copies rows to the new
// identity and clears them from the old, and the page that finds the old
// subspace empty moves the wake time and its due index entry too (into
// the earlier of the two partitions' wake times, when the new one has
// one). A page is safe to run again: rows moved are gone from the old
// identity, so a page after a crash or an unknown commit result moves
// what is left. The new identity's rows are never overwritten: a page
// that finds a key it would move already present there refuses and moves
// nothing. A move is not safe beside writers of the old identity (a row
// they write after the last page stays behind) nor beside writers of the
// new one that write the same keys (an outbox sequence, a timer): it is
// meant for a store whose writers are stopped (see package evolve's
// RenamePartitionsMigration).

// MovePartitionPage moves up to limit rows (at most
// Capabilities().MaxScanBytes of keys and values after the first) of the
// partition whose tuple identity is from to the partition whose identity
// is to, in one engine transaction, and returns how many it moved and
// whether from may hold more (more false: from held no row after them,
// and its wake time and due index entry moved in the same transaction:
// from is gone from the store). A wake time moves into to's: the earlier
// of the two. It never overwrites a row: when to holds a key it would move
// it fails with an error wrapping store.ErrInvalid, naming the key, and
// moves nothing. A page is safe to run again (see the design note above);
// it is not safe beside writers of either partition.
//
// It fails with store.ErrInvalid for a limit below 1, an identity that is
// not a tuple, starts with 0xFF or is over the Layer's bound, and
// identities one of which is a prefix of the other; with store.ErrCorrupt
// for a wake time that does not decode; with store.ErrUnavailable when
// ctx ends or the engine fails. Safe for concurrent use.
func (l *Layer) MovePartitionPage(ctx context.Context, from, to []byte, limit int) (moved int, more bool, err error) {
	const what = "move partition"
	if limit < 1 {
		return 0, false, fmt.Errorf("fdblayer: %s: %w: limit %d, want 1 or more", what, store.ErrInvalid, limit)
	}
	for _, id := range [][]byte{from, to} {
		if err := l.checkIdentity(id); err != nil {
			return 0, false, fmt.Errorf("fdblayer: %s %x to %x: %w", what, from, to, err)
		}
	}
	if bytes.HasPrefix(from, to) || bytes.HasPrefix(to, from) {
		return 0, false, fmt.Errorf("fdblayer: %s %x to %x: %w: one identity is a prefix of the other", what, from, to, store.ErrInvalid)
	}
	if err := l.notNested(ctx, what, nil); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, l.opError(what, nil, nil, err)
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return 0, false, l.opError(what, nil, nil, err)
	}
	defer txn.Close()
	fromSub := append(bytes0(l.root), from...)
	toSub := append(bytes0(l.root), to...)
	var unknown error
	for attempt := 0; ; attempt++ {
		n, more, committing, err := l.moveIn(ctx, txn, fromSub, toSub, limit)
		if err == nil || errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrInvalid) {
			return n, more, err
		}
		if err := l.giveUp(ctx, txn, what, nil, attempt, committing, err, &unknown); err != nil {
			return 0, true, err
		}
	}
}

// checkIdentity checks a partition identity given as bytes, as
// appendSubspace checks a Partition's.
func (l *Layer) checkIdentity(id []byte) error {
	if _, err := store.ParseIdentity(id); err != nil {
		return fmt.Errorf("%w: identity %x is not a tuple", store.ErrInvalid, id)
	}
	if len(id) > l.maxIdentity {
		return fmt.Errorf("%w: identity %x has %d bytes, want at most %d", store.ErrInvalid, id, len(id), l.maxIdentity)
	}
	if id[0] == partitionEnd {
		return fmt.Errorf("%w: identity %x starts with 0xff, which no tuple does", store.ErrInvalid, id)
	}
	return nil
}

// moveIn is one attempt of MovePartitionPage in txn: every read, then
// every write, then the commit. committing reports that err came from
// Commit.
func (l *Layer) moveIn(ctx context.Context, txn kv.Txn, fromSub, toSub []byte, limit int) (n int, more, committing bool, err error) {
	fromEnd := append(bytes0(fromSub), partitionEnd)
	rows, err := txn.GetRange(nil, fromSub, fromEnd, limit+1, l.caps.MaxScanBytes)
	if err != nil {
		return 0, false, false, err
	}
	size := 0
	for i, r := range rows {
		if i < limit {
			size += len(r.Key) + len(r.Value)
		}
	}
	more = len(rows) > limit || l.caps.MaxScanBytes > 0 && size > l.caps.MaxScanBytes
	rows = rows[:min(len(rows), limit)]
	keys := make([][]byte, 0, len(rows)+2)
	for _, r := range rows {
		keys = append(keys, append(bytes0(toSub), r.Key[len(fromSub):]...))
	}
	if !more {
		keys = append(keys, fromEnd, append(bytes0(toSub), partitionEnd))
		if err := l.probeV1(txn); err != nil {
			return 0, false, false, err
		}
	}
	vals, err := txn.GetMany(nil, keys)
	if err != nil {
		return 0, false, false, err
	}
	for i := range rows {
		if vals[i] != nil {
			return 0, false, false, fmt.Errorf("fdblayer: move partition %x to %x: %w: the new partition holds key %x already; nothing moved",
				fromSub[len(l.root):], toSub[len(l.root):], store.ErrInvalid, keys[i][len(toSub):])
		}
	}
	for i, r := range rows {
		txn.Set(keys[i], r.Value)
		txn.Clear(r.Key)
	}
	if !more {
		var from, to wake
		if from.at, from.ceil, err = decodeWake(vals[len(rows)]); err != nil {
			return 0, false, false, fmt.Errorf("fdblayer: move partition %x: %w", fromSub[len(l.root):], err)
		}
		if to.at, to.ceil, err = decodeWake(vals[len(rows)+1]); err != nil {
			return 0, false, false, fmt.Errorf("fdblayer: move partition to %x: %w", toSub[len(l.root):], err)
		}
		next := to
		if from.at != 0 && (to.at == 0 || from.at < to.at) {
			next = from
		}
		scratch := l.setWake(txn, fromSub, nil, from, wake{})
		scratch = l.setWake(txn, toSub, scratch, to, next)
		// An entry of the first layout goes whatever the Layer knows of
		// that layout (a blind clear, no read): an older process may
		// have written one since the Layer looked.
		if from.at != 0 {
			txn.Clear(l.appendDueKey(scratch[:0], l.v1Bucket(), from.at, fromSub[len(l.root):]))
		}
		if to.at != 0 && to.at != next.at {
			txn.Clear(l.appendDueKey(scratch[:0], l.v1Bucket(), to.at, toSub[len(l.root):]))
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, false, false, err
	}
	if err := txn.Commit(); err != nil {
		return 0, false, true, err
	}
	return len(rows), more, false, nil
}
