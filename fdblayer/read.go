package fdblayer

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Get reads one row of partition p; ok is false when the key is absent.
// The value is the caller's. It fails with store.ErrInvalid, before any
// I/O, for an empty key, a key over Capabilities().MaxKeyBytes, a key
// starting with 0xFF (see the package doc) or a partition that cannot
// encode, and with store.ErrUnavailable when ctx ends or the engine fails
// (retryable engine errors are retried first, within the retry limit).
// It is safe for concurrent use.
func (l *Layer) Get(ctx context.Context, p store.Partition, key store.Key) (store.Value, bool, error) {
	// GetMany for one key, without its per-call slices: handlers read a
	// mark or a cursor before nearly every batch.
	if err := l.checkKey(key); err != nil {
		return nil, false, fmt.Errorf("fdblayer: get from %s: key 0: %w", store.PartitionName(p), err)
	}
	s := l.getScratch()
	defer l.putScratch(s)
	full, err := l.appendSubspace(s.buf[:0], p)
	if err != nil {
		return nil, false, fmt.Errorf("fdblayer: get: %w", err)
	}
	full = append(full, key...)
	s.buf, s.keys = full, append(s.keys[:0], full)
	var out store.Value
	err = l.read(ctx, p, "get from", func(txn kv.ReadTxn) error {
		vals, err := txn.GetMany(s.vals[:0], s.keys)
		s.vals = vals
		if err != nil {
			return err
		}
		if vals[0] != nil {
			out = append(make(store.Value, 0, len(vals[0])), vals[0]...)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, out != nil, nil
}

// GetMany reads several rows of partition p from one snapshot, issuing
// every read before waiting on any. The result has one entry per key, in
// order, nil for an absent key; the values are the caller's. It fails like
// Get; an empty keys slice returns an empty result without I/O.
func (l *Layer) GetMany(ctx context.Context, p store.Partition, keys []store.Key) ([]store.Value, error) {
	s := l.getScratch()
	defer l.putScratch(s)
	sub, err := l.appendSubspace(s.buf[:0], p)
	if err != nil {
		return nil, fmt.Errorf("fdblayer: get: %w", err)
	}
	for i, k := range keys {
		if err := l.checkKey(k); err != nil {
			return nil, fmt.Errorf("fdblayer: get from %s: key %d: %w", store.PartitionName(p), i, err)
		}
	}
	if len(keys) == 0 {
		return []store.Value{}, nil
	}
	full := l.fullKeys(s, sub, keys)
	var out []store.Value
	err = l.read(ctx, p, "get from", func(txn kv.ReadTxn) error {
		vals, err := txn.GetMany(s.vals[:0], full)
		s.vals = vals
		if err != nil {
			return err
		}
		out = copyValues(vals)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fullKeys writes the engine keys of keys, in partition subspace sub (at
// the start of s.buf), into s's buffers, one buffer for all of them, and
// returns them. The keys must have passed checkKey.
func (l *Layer) fullKeys(s *scratch, sub []byte, keys []store.Key) [][]byte {
	need := len(sub) * (1 + len(keys))
	for _, k := range keys {
		need += len(k)
	}
	if cap(sub) < need {
		sub = append(make([]byte, 0, need), sub...)
	}
	buf, full := sub, s.keys[:0]
	for _, k := range keys {
		start := len(buf)
		buf = append(append(buf, sub...), k...)
		full = append(full, buf[start:len(buf):len(buf)])
	}
	s.buf, s.keys = buf, full
	return full
}

// copyValues copies engine values into caller-owned ones, nil for absent,
// in one allocation; each is capped so that appending to one cannot
// overwrite the next.
func copyValues(vals [][]byte) []store.Value {
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	out := make([]store.Value, len(vals))
	arena := make([]byte, 0, n)
	for i, v := range vals {
		if v == nil {
			continue
		}
		start := len(arena)
		arena = append(arena, v...)
		out[i] = arena[start:len(arena):len(arena)]
	}
	return out
}

// checkKey rejects a key no row can have.
func (l *Layer) checkKey(k store.Key) error {
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", store.ErrInvalid)
	}
	if len(k) > l.caps.MaxKeyBytes {
		return fmt.Errorf("%w: key has %d bytes, limit %d", store.ErrInvalid, len(k), l.caps.MaxKeyBytes)
	}
	if k[0] == partitionEnd {
		return fmt.Errorf("%w: key starts with 0xff, which ends a partition's subspace", store.ErrInvalid)
	}
	return nil
}

// read runs fn in a read-only transaction, retrying the engine's retryable
// errors within the retry limit and ctx. Its errors wrap
// store.ErrUnavailable (unless fn's error wraps another store sentinel) and
// name the operation and partition (p nil: none).
func (l *Layer) read(ctx context.Context, p store.Partition, what string, fn func(kv.ReadTxn) error) error {
	fail := func(err error) error {
		what := "fdblayer: " + what
		if p != nil {
			what += " " + store.PartitionName(p)
		}
		return wrapError(what, store.ErrUnavailable, err)
	}
	if err := l.notNested(ctx, what, p); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	txn, err := l.engine.BeginRead(ctx)
	if err != nil {
		return fail(err)
	}
	defer txn.Close()
	for attempt := 0; ; attempt++ {
		err := fn(txn)
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if !errors.Is(err, ctxErr) {
				err = fmt.Errorf("%w: %w", ctxErr, err)
			}
			return fail(err)
		}
		if attempt == l.retryLimit {
			return fail(fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempt+1, err))
		}
		if fatal := txn.OnError(err); fatal != nil {
			return fail(fatal)
		}
		l.log.Debug("fdblayer: read retrying", "op", what, "attempt", attempt, "err", err)
	}
}

// getRanges reads reads in txn: at once when it is a kv.RangesReader, else
// one range after another.
func getRanges(txn kv.ReadTxn, reads []kv.RangeRead) ([][]kv.KeyValue, error) {
	if rr, ok := txn.(kv.RangesReader); ok {
		return rr.GetRanges(reads)
	}
	out := make([][]kv.KeyValue, len(reads))
	for i, r := range reads {
		rows, err := txn.GetRange(nil, r.Begin, r.End, r.Limit, 0)
		if err != nil {
			return nil, err
		}
		out[i] = rows
	}
	return out, nil
}
