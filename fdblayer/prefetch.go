package fdblayer

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: a prefetch holds no lock.
//
// A caller reads ahead the keys a batch will guard beside other work it
// waits for, then applies the batch (store.Prefetcher). On a kv.Optimistic
// engine (FoundationDB, the MVCC engine) the Layer begins a transaction,
// reads the keys in it and keeps it: a transaction there is a read
// version, which no other transaction waits for, and the batch's commit
// decides the guards on what it read (readCache, as TransactOnce's batch
// does), so that only the commit is left in sequence. A key written since
// the read makes the commit conflict and the Layer retries as Apply
// retries, on a fresh snapshot that reads every guard; a read version
// past the engine's lifetime (FoundationDB's five seconds, when the
// caller's work is slow) fails the same way, transaction_too_old, and is
// retried alike. A guard that fails on what was read ahead is decided
// again by Apply, on the state now: no commit ran to conflict, and the
// key may have changed since. On the memory and bbolt engines a write
// transaction holds the one writer's lock from Begin to its commit, and a
// read transaction of the memory engine holds it shared, so that a
// transaction kept open while the caller waits for its own writes would
// never end: there the prefetch reads nothing and keeps nothing, and the
// batch is applied as Apply applies it, where a read costs no round trip
// anyway.

var _ store.Prefetcher = (*Layer)(nil)

// Prefetch implements store.Prefetcher: on a [kv.Optimistic] engine it
// begins a transaction, reads keys in it (one GetMany) and keeps it for
// the batch's Apply; on another engine it reads nothing and Apply is
// Layer.Apply. It fails with store.ErrInvalid for a key GetMany would
// refuse or a partition that cannot encode, and with store.ErrUnavailable
// when the engine fails or ctx ends. Safe for concurrent use.
func (l *Layer) Prefetch(ctx context.Context, p store.Partition, keys []store.Key) (store.Prefetched, error) {
	for i, k := range keys {
		if err := l.checkKey(k); err != nil {
			return nil, fmt.Errorf("fdblayer: prefetch from %s: key %d: %w", store.PartitionName(p), i, err)
		}
	}
	sub, err := l.appendSubspace(nil, p)
	if err != nil {
		return nil, fmt.Errorf("fdblayer: prefetch: %w", err)
	}
	pf := &prefetched{l: l, p: p}
	if !l.optimistic || len(keys) == 0 {
		return pf, nil
	}
	if err := l.notNested(ctx, "prefetch from", p); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, l.opError("prefetch from", p, nil, err)
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return nil, l.opError("prefetch from", p, nil, err)
	}
	s := l.getScratch()
	defer l.putScratch(s)
	full := l.fullKeys(s, sub, keys)
	vals, err := txn.GetMany(s.vals[:0], full)
	s.vals = vals
	if err != nil {
		txn.Close()
		return nil, l.opError("prefetch from", p, nil, err)
	}
	for i, k := range full {
		pf.known.put(k, vals[i])
	}
	pf.txn = txn
	return pf, nil
}

// prefetched is the Layer's store.Prefetched: the transaction that read
// the keys and what it read, or nothing (txn nil) on an engine that is
// not kv.Optimistic.
type prefetched struct {
	l       *Layer
	p       store.Partition
	txn     kv.Txn
	known   readCache
	applied bool
}

// Apply applies b as Layer.Apply does, in the prefetch's transaction when
// it kept one.
func (pf *prefetched) Apply(ctx context.Context, b *store.Batch) (store.BatchOutcome, error) {
	l := pf.l
	if pf.applied {
		return store.BatchOutcome{}, fmt.Errorf("fdblayer: apply to %s: %w: a prefetch applied twice", store.PartitionName(pf.p), store.ErrInvalid)
	}
	pf.applied = true
	txn := pf.txn
	pf.txn = nil
	if txn == nil {
		return l.Apply(ctx, pf.p, b)
	}
	if err := b.Validate(l.caps.Full()); err != nil {
		txn.Close()
		return store.BatchOutcome{}, fmt.Errorf("fdblayer: apply to %s: %w", store.PartitionName(pf.p), err)
	}
	s := l.getScratch()
	defer l.putScratch(s)
	sub, pre, err := l.batchKeys(s, pf.p, b)
	switch {
	case err != nil:
		err = fmt.Errorf("fdblayer: apply: %w", err)
	case l.notNested(ctx, "apply to", pf.p) != nil:
		err = l.notNested(ctx, "apply to", pf.p)
	case l.fenced(ctx, "apply to", pf.p) != nil:
		err = l.fenced(ctx, "apply to", pf.p)
	case ctx.Err() != nil:
		err = l.applyError(pf.p, nil, ctx.Err())
	}
	if err != nil {
		txn.Close()
		return store.BatchOutcome{}, err
	}
	return l.retry(ctx, txn, s, pf.p, b, sub, pre, &pf.known)
}

// Close ends the prefetch's transaction, if it kept one, writing nothing.
func (pf *prefetched) Close() {
	if pf.txn != nil {
		pf.txn.Close()
		pf.txn = nil
	}
	pf.known.reset()
}
