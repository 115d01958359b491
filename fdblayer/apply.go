package fdblayer

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Apply applies a guarded batch to partition p in one engine transaction,
// as [store.Store.Apply] specifies: it reads every precondition key (all
// reads issued before any is waited on) and returns PreconditionFailed
// (naming the first failed precondition), or DeadlinePassed when the
// Layer's clock reads past the batch's deadline at the start of an
// attempt, both with nothing written; or it applies the writes in order,
// and the batch's Wakeup to the wake time and its due index entry (see
// ScanDue), and commits.
//
// A retryable engine error (a FoundationDB conflict, 1020, and the like)
// makes Apply retry in a fresh transaction, every precondition
// re-evaluated, up to the retry limit and within ctx; then it fails with
// [store.ErrUnavailable] and [ErrRetriesExhausted], or with
// store.ErrUnavailable after a fatal engine error, having written nothing.
// After a commit whose result is unknown (FoundationDB's 1021) it retries
// too and lets the retry's preconditions decide, or fails with
// [store.ErrUnknownResult] when ctx, the retries, a fatal error or the
// deadline end the retries: see that error for what a batch landing twice
// does. It never depends on FoundationDB's automatic_idempotency option.
//
// It fails with [store.ErrInvalid], before any I/O, for a batch that fails
// Validate(Capabilities().Full()), a key starting with 0xFF (see the
// package doc) or a partition that cannot encode, and with
// evolve.ErrNewerFormat (store.ErrNewerFormat), writing nothing, while the
// Layer's gate is fenced: the store's format of a namespace this binary
// links was raised past what it knows. When ctx is already done
// it returns ctx's error, wrapped with store.ErrUnavailable, and writes
// nothing. Apply is safe for concurrent use; it neither retains nor
// modifies b.
func (l *Layer) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if err := b.Validate(l.caps.Full()); err != nil {
		return store.BatchOutcome{}, fmt.Errorf("fdblayer: apply to %s: %w", store.PartitionName(p), err)
	}
	s := l.getScratch()
	defer l.putScratch(s)
	sub, pre, err := l.batchKeys(s, p, b)
	if err != nil {
		return store.BatchOutcome{}, fmt.Errorf("fdblayer: apply: %w", err)
	}
	if err := l.notNested(ctx, "apply to", p); err != nil {
		return store.BatchOutcome{}, err
	}
	if err := l.fenced(ctx, "apply to", p); err != nil {
		return store.BatchOutcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.BatchOutcome{}, l.applyError(p, nil, err)
	}
	if l.group != nil {
		out, err := l.group.submit(ctx, []unit{{p: p, b: b, sub: sub, pre: pre, s: s}})
		return out.BatchOutcome, err
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return store.BatchOutcome{}, l.applyError(p, nil, err)
	}
	return l.retry(ctx, txn, s, p, b, sub, pre, nil)
}

// retry runs attempts of b in txn until one decides the batch or the
// retries end, and closes txn. known, when not nil, holds what txn read
// before (see Prefetch): the first attempt reads only the preconditions
// it does not hold, and a precondition failing there is decided again by
// Apply, on a fresh snapshot; a retry, on a fresh snapshot, reads them
// all. (A function of its own, with few returns, so that its defer and
// Apply's stay cheap.)
func (l *Layer) retry(ctx context.Context, txn kv.Txn, s *scratch, p store.Partition, b *store.Batch, sub []byte, pre [][]byte, known *readCache) (store.BatchOutcome, error) {
	defer txn.Close()
	// unknown is the first error after which the batch may have landed;
	// nil while every failed attempt is known to have written nothing.
	var unknown error
	for attempt := 0; ; attempt, known = attempt+1, nil {
		out, committing, err := l.attempt(ctx, txn, s, b, sub, pre, known)
		if err == nil && known != nil && out.Outcome == store.PreconditionFailed {
			// Decided on what was read before, which a writer may have
			// changed since: no commit ran to conflict with it. Decide
			// again on the state now, as Apply does.
			txn.Close()
			return l.Apply(ctx, p, b)
		}
		if err == nil {
			if out.Outcome == store.DeadlinePassed && unknown != nil {
				return out, l.applyError(p, unknown, fmt.Errorf("deadline passed at %v on a retry", out.Now))
			}
			return out, nil
		}
		if err := l.giveUp(ctx, txn, "apply to", p, attempt, committing, err, &unknown); err != nil {
			return store.BatchOutcome{}, err
		}
	}
}

// giveUp decides what follows attempt's failure with err (committing:
// err came from Commit): nil when the engine has reset txn for another
// attempt, else the error to give up with, named "fdblayer: what p". It
// records in *unknown the first error after which a batch may have
// landed: a commit whose result is unknown, or one the context ended.
func (l *Layer) giveUp(ctx context.Context, txn kv.Txn, what string, p store.Partition, attempt int, committing bool, err error, unknown *error) error {
	if committing && (errors.Is(err, store.ErrUnknownResult) || ctx.Err() != nil) {
		if *unknown == nil {
			*unknown = err
		}
		l.log.Warn("fdblayer: commit result unknown; a retry decides",
			"partition", store.PartitionName(p), "attempt", attempt, "err", err)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w: %w", ctxErr, err)
		}
		return l.opError(what, p, *unknown, err)
	}
	if attempt == l.retryLimit {
		l.log.Warn("fdblayer: retries exhausted", "op", what,
			"partition", store.PartitionName(p), "attempts", attempt+1, "unknown_result", *unknown != nil, "err", err)
		return l.opError(what, p, *unknown, fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempt+1, err))
	}
	if fatal := txn.OnError(err); fatal != nil {
		return l.opError(what, p, *unknown, fatal)
	}
	l.log.Debug("fdblayer: retrying", "op", what, "partition", store.PartitionName(p), "attempt", attempt, "err", err)
	return nil
}

// attempt runs one try of a batch in txn: deadline, then commitBatch.
// pre are the preconditions' engine keys, sub the prefix of the writes'
// keys, known what txn read before (nil: nothing). committing reports
// that err came from Commit.
func (l *Layer) attempt(ctx context.Context, txn kv.Txn, s *scratch, b *store.Batch, sub []byte, pre [][]byte, known *readCache) (out store.BatchOutcome, committing bool, err error) {
	if !b.Deadline.IsZero() {
		if now := l.clock.Now(); now.After(b.Deadline) {
			return store.BatchOutcome{Outcome: store.DeadlinePassed, Now: now}, false, nil
		}
	}
	return l.commitBatch(ctx, txn, s, b, sub, pre, known)
}

// commitBatch reads b's preconditions in txn (every read issued before
// any is awaited; those in known, read earlier in txn, are not read
// again), compares, writes and commits. committing reports that err came
// from Commit.
func (l *Layer) commitBatch(ctx context.Context, txn kv.Txn, s *scratch, b *store.Batch, sub []byte, pre [][]byte, known *readCache) (out store.BatchOutcome, committing bool, err error) {
	var cur, next wake
	if b.Wakeup != nil {
		if err := l.probeV1(txn); err != nil {
			return out, false, err
		}
	}
	if len(pre) > 0 {
		var vals [][]byte
		if known == nil {
			vals, err = txn.GetMany(s.vals[:0], pre)
		} else {
			vals, err = known.getMany(txn, s.vals[:0], pre)
		}
		s.vals = vals
		if err != nil {
			return out, false, err
		}
		if failed, ok, err := checkPreconditions(b, vals); err != nil || !ok {
			return failed, false, err
		}
		if b.Wakeup != nil {
			if cur.at, cur.ceil, err = decodeWake(vals[wakeRead(b)]); err != nil {
				return out, false, err
			}
			next.at, next.ceil = b.Wakeup.NextEncoded(cur.at, cur.ceil)
		}
	}
	key := append(s.key[:0], sub...)
	for _, w := range b.Writes {
		key = append(key[:len(sub)], w.Key...)
		switch w.Op {
		case store.OpPut:
			txn.Set(key, w.Value)
		case store.OpDelete:
			txn.Clear(key)
		}
	}
	if b.Wakeup != nil {
		key = l.setWake(txn, sub, key, cur, next)
	}
	s.key = key
	// A context that ended before the commit started leaves nothing in
	// doubt: stop here rather than start a commit that may land later.
	if err := ctx.Err(); err != nil {
		return out, false, err
	}
	if err := txn.Commit(); err != nil {
		return out, true, err
	}
	return store.BatchOutcome{Outcome: store.Committed}, false, nil
}

// applyError wraps the error Apply gives up with: see opError.
func (l *Layer) applyError(p store.Partition, unknown, err error) error {
	return l.opError("apply to", p, unknown, err)
}

// opError wraps the error a writing operation gives up with, named
// "fdblayer: what p": store.ErrUnknownResult when an earlier attempt may
// have landed, store.ErrUnavailable otherwise.
func (l *Layer) opError(what string, p store.Partition, unknown, err error) error {
	what = "fdblayer: " + what
	if p != nil {
		what += " " + store.PartitionName(p)
	}
	if unknown == nil {
		return wrapError(what, store.ErrUnavailable, err)
	}
	if unknown != err {
		err = fmt.Errorf("%w (after an unknown result: %w)", err, unknown)
	}
	return wrapError(what, store.ErrUnknownResult, err)
}

// wakeRead is the index, among the keys batchKeys builds, of the read
// of the partition's wake key that b's Wakeup starts from: the first
// WakeIs's, or one past the preconditions when b has none (batchKeys adds
// the wake key there), or -1 when b carries no Wakeup.
func wakeRead(b *store.Batch) int {
	if b.Wakeup == nil {
		return -1
	}
	for i, c := range b.Preconditions {
		if c.Op == store.MustWakeAt {
			return i
		}
	}
	return len(b.Preconditions)
}

// batchKeys writes the partition's subspace and the full engine keys of
// b's preconditions (the partition's wake key for a WakeIs; and once
// more, last, when b carries a Wakeup and no WakeIs: see wakeRead) into
// s, one buffer for all of them, and returns them.
// Writes' keys are built one at a time when they are set (the engine
// copies each key). b must have passed Validate (no empty keys). It fails
// with store.ErrInvalid when p cannot encode or a key starts with 0xFF.
func (l *Layer) batchKeys(s *scratch, p store.Partition, b *store.Batch) (sub []byte, pre [][]byte, err error) {
	sub, err = l.appendSubspace(s.buf[:0], p)
	if err != nil {
		return nil, nil, err
	}
	for i, w := range b.Writes {
		if w.Key[0] == partitionEnd {
			return nil, nil, fmt.Errorf("%w: fdblayer: write %d key starts with 0xff, which ends a partition's subspace", store.ErrInvalid, i)
		}
	}
	reads := len(b.Preconditions) + 1 // room for the wake key, if wakeRead adds it
	need := len(sub)*(1+reads) + reads
	for i, c := range b.Preconditions {
		if c.Op != store.MustWakeAt && c.Key[0] == partitionEnd {
			return nil, nil, fmt.Errorf("%w: fdblayer: precondition %d key starts with 0xff, which ends a partition's subspace", store.ErrInvalid, i)
		}
		need += len(c.Key)
	}
	// Every key below is a subslice of buf, so buf must not move while
	// they are appended: give it all the room up front.
	if cap(sub) < need {
		sub = append(make([]byte, 0, need), sub...)
	}
	buf, keys := sub, s.keys[:0]
	for _, c := range b.Preconditions {
		start := len(buf)
		buf = append(buf, sub...)
		if c.Op == store.MustWakeAt {
			buf = append(buf, partitionEnd) // the wake key: see due.go
		} else {
			buf = append(buf, c.Key...)
		}
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	if wakeRead(b) == len(b.Preconditions) {
		start := len(buf)
		buf = append(append(buf, sub...), partitionEnd)
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	s.buf, s.keys = buf, keys
	return sub[:len(sub):len(sub)], keys, nil
}
