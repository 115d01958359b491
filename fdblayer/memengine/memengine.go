// Package memengine is an in-memory [kv.Engine] on a B-tree, for tests
// and benchmarks: fdblayer.Open(memengine.New(), fdblayer.Config{}) is a
// store.Store whose data lives as long as the engine.
package memengine

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/google/btree"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
)

// Engine is an ordered in-memory [kv.Engine] on a B-tree. Transactions
// are serializable by locking: a write transaction holds the engine
// exclusively from Begin to its Commit or Close, a read transaction holds
// it shared until Close, so every transaction's reads and its commit see
// one snapshot. It reports FoundationDB's limits ([kv.FDBLimits]) and
// does not enforce them; the Layer keeps within them.
//
// Package fdbsim injects commit failures (conflicts, unknown results,
// delays) into it (InjectFaults), so that the Layer's retry logic is
// tested without FoundationDB.
//
// All methods are safe for concurrent use. A goroutine must not begin a
// transaction while it holds another one open on the same engine.
type Engine struct {
	mu     sync.RWMutex
	tree   *btree.BTreeG[memkv.Item]
	closed bool
	ops    sync.Pool // *memOps, the write buffers of ended transactions
}

var _ kv.Engine = (*Engine)(nil)

// New returns an empty memory engine.
func New() *Engine {
	return &Engine{tree: btree.NewG(memkv.Degree, memkv.Less)}
}

// errTxnEnded: a transaction used after Commit (without OnError) or Close.
var errTxnEnded = errors.New("memengine: transaction has ended")

// Begin starts a write transaction, waiting for the engine to be free. It
// fails when ctx is done or the engine is closed.
func (e *Engine) Begin(ctx context.Context) (kv.Txn, error) {
	t := &memTxn{e: e, ctx: ctx, write: true}
	if err := t.lock(); err != nil {
		return nil, err
	}
	return t, nil
}

// BeginRead starts a read transaction. It fails when ctx is done or the
// engine is closed.
func (e *Engine) BeginRead(ctx context.Context) (kv.ReadTxn, error) {
	t := &memTxn{e: e, ctx: ctx}
	if err := t.lock(); err != nil {
		return nil, err
	}
	return t, nil
}

// Limits reports FoundationDB's limits.
func (e *Engine) Limits() kv.Limits { return kv.FDBLimits() }

// EstimateRangeSize counts the bytes of keys and values in [begin, end)
// exactly.
func (e *Engine) EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error) {
	t, err := e.BeginRead(ctx)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	return treeRangeBytes(e.tree, begin, end), nil
}

// treeRangeBytes counts the bytes of keys and values in [begin, end) of tr.
func treeRangeBytes(tr *btree.BTreeG[memkv.Item], begin, end []byte) int64 {
	var n int64
	tr.AscendRange(memkv.KeyItem(begin), memkv.KeyItem(end), func(it memkv.Item) bool {
		n += int64(it.Size())
		return true
	})
	return n
}

// Probe fails when ctx is done or the engine is closed.
func (e *Engine) Probe(ctx context.Context) error {
	t, err := e.BeginRead(ctx)
	if err != nil {
		return err
	}
	t.Close()
	return nil
}

// Close closes the engine; later transactions fail with [kv.ErrClosed].
// The data is dropped. A second Close returns kv.ErrClosed.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return kv.ErrClosed
	}
	e.closed = true
	e.tree.Clear(false)
	return nil
}

// memTxn is an Engine transaction; write says which lock it holds.
type memTxn struct {
	e      *Engine
	ctx    context.Context
	write  bool
	locked bool
	ops    *memOps // pending writes; nil until the first
}

// memOps is a write buffer, reused across transactions.
type memOps struct{ w []memkv.Write }

func (t *memTxn) lock() error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	if t.write {
		t.e.mu.Lock()
	} else {
		t.e.mu.RLock()
	}
	if t.e.closed {
		t.unlock()
		return kv.ErrClosed
	}
	t.locked = true
	return nil
}

func (t *memTxn) unlock() {
	if t.write {
		t.e.mu.Unlock()
	} else {
		t.e.mu.RUnlock()
	}
	t.locked = false
}

func (t *memTxn) usable() error {
	if !t.locked {
		return errTxnEnded
	}
	return t.ctx.Err()
}

// GetMany returns the stored slices themselves: they are never modified
// (a Set stores a fresh copy), so they outlive the transaction.
func (t *memTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	if err := t.usable(); err != nil {
		return dst, err
	}
	return memkv.GetMany(t.e.tree, dst, keys), nil
}

func (t *memTxn) GetRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) ([]kv.KeyValue, error) {
	if err := t.usable(); err != nil {
		return dst, err
	}
	return treeGetRange(t.e.tree, dst, begin, end, limit, maxBytes), nil
}

// treeGetRange appends to dst the rows of tr in [begin, end), as far as
// memkv.RangeStop lets it.
func treeGetRange(tr *btree.BTreeG[memkv.Item], dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) []kv.KeyValue {
	n, size := 0, 0
	tr.AscendRange(memkv.KeyItem(begin), memkv.KeyItem(end), func(it memkv.Item) bool {
		dst = append(dst, kv.KeyValue{Key: it.Key(), Value: it.Value()})
		n, size = n+1, size+it.Size()
		return !memkv.RangeStop(n, size, limit, maxBytes)
	})
	return dst
}

// Set copies key and value into one allocation, which the tree keeps.
func (t *memTxn) Set(key, value []byte) { t.add(memkv.Write{Item: memkv.NewItem(key, value)}) }

func (t *memTxn) Clear(key []byte) {
	t.add(memkv.Write{Item: memkv.KeyItem(bytes.Clone(key)), Del: true})
}

func (t *memTxn) add(w memkv.Write) {
	if t.ops == nil {
		if ops, ok := t.e.ops.Get().(*memOps); ok {
			t.ops = ops
		} else {
			t.ops = &memOps{}
		}
	}
	t.ops.w = append(t.ops.w, w)
}

// dropOps forgets the pending writes and recycles their buffer.
func (t *memTxn) dropOps() {
	if t.ops == nil {
		return
	}
	clear(t.ops.w)
	t.ops.w = t.ops.w[:0]
	t.e.ops.Put(t.ops)
	t.ops = nil
}

// Commit applies the writes in order and releases the engine; after it
// only OnError (to retry) or Close may be called.
func (t *memTxn) Commit() error {
	if err := t.usable(); err != nil {
		return err
	}
	t.applyOps()
	t.dropOps()
	t.unlock()
	return nil
}

func (t *memTxn) applyOps() {
	if t.ops != nil {
		memkv.Apply(t.e.tree, t.ops.w)
	}
}

// OnError returns err: a memory engine's transaction never conflicts,
// so nothing it fails with is worth a retry.
func (t *memTxn) OnError(err error) error { return err }

func (t *memTxn) Close() {
	t.dropOps()
	if t.locked {
		t.unlock()
	}
}
