package fdblayer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/google/btree"

	"github.com/mkit-dev/mkitfdb/store"
)

// MemoryEngine is an ordered in-memory Engine on a B-tree, for tests and
// benchmarks. Transactions are serializable by locking: a write
// transaction holds the engine exclusively from Begin (or a retry's
// OnError) to its Commit or Close, a read transaction holds it shared
// until Close, so every transaction's reads and its commit see one
// snapshot. It reports FoundationDB's limits (FDBMaxKeyBytes, ...) and
// does not enforce them; the Layer keeps within them.
//
// A FaultFunc injects commit failures (conflicts, unknown results, delays)
// so that the Layer's retry logic is tested without FoundationDB.
//
// All methods are safe for concurrent use. A goroutine must not begin a
// transaction while it holds another one open on the same engine.
type MemoryEngine struct {
	mu     sync.RWMutex
	tree   *btree.BTreeG[memItem]
	closed bool
	fault  FaultFunc
	ops    sync.Pool // *memOps, the write buffers of ended transactions
}

// memItem is one row: its key and then its value in one allocation, kv,
// the first klen bytes being the key, and a copy of the key's first 32
// bytes. The tree holds items by value, 64 bytes each (a cache line):
// comparing one during a search touches the node, and the key's own bytes
// only when the copies tie (see lessItem), where an item behind a pointer
// costs two more cache lines. In a store much larger than the cache each
// of those is a miss, which is what made operations slower as the store
// grew. 32 bytes, not 16: a key starts with the root prefix (6 bytes by
// default) and the partition's identity, which starts with its schema's
// namespace ("\x02refdomain\x00", 11 bytes) and variant, so 16 bytes
// were the same for every partition of a schema, and every comparison
// read the keys (bench/README.md has the figures).
type memItem struct {
	kv             []byte
	klen           int
	p0, p1, p2, p3 uint64 // the key's first 32 bytes, big-endian, zero-padded (see lessItem)
}

// keyItem is the item to search for key k.
func keyItem(k []byte) memItem {
	it := memItem{kv: k, klen: len(k)}
	it.p0, it.p1, it.p2, it.p3 = keyPrefix(k)
	return it
}

// keyPrefix is k's first 32 bytes as four big-endian numbers,
// zero-padded.
func keyPrefix(k []byte) (uint64, uint64, uint64, uint64) {
	var b [32]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16]), binary.BigEndian.Uint64(b[16:24]), binary.BigEndian.Uint64(b[24:])
}

// newMemItem is the item holding key = value, in one new allocation.
func newMemItem(key, value []byte) memItem {
	kv := make([]byte, len(key)+len(value))
	copy(kv, key)
	copy(kv[len(key):], value)
	it := memItem{kv: kv, klen: len(key)}
	it.p0, it.p1, it.p2, it.p3 = keyPrefix(key)
	return it
}

func (it memItem) key() []byte   { return it.kv[:it.klen:it.klen] }
func (it memItem) value() []byte { return it.kv[it.klen:] }

// lessItem orders items by key. Keys whose first 32 bytes differ are
// ordered by the copies the items hold, without reading the keys: every
// key starts with the root prefix and its partition's tuple, so a search
// through other partitions' rows touches only the nodes, which in a store
// larger than the cache spares a miss per comparison. Zero padding keeps
// the order: where a short key ends, the longer key's next byte is either
// above zero (it sorts after, as it should) or zero (the copies tie, and
// the keys decide).
func lessItem(a, b memItem) bool {
	// Written out rather than compareItems(a, b) < 0: every search of the
	// memory engine runs it, and the call measured slower (bench/README.md).
	if a.p0 != b.p0 {
		return a.p0 < b.p0
	}
	if a.p1 != b.p1 {
		return a.p1 < b.p1
	}
	if a.p2 != b.p2 {
		return a.p2 < b.p2
	}
	if a.p3 != b.p3 {
		return a.p3 < b.p3
	}
	return bytes.Compare(a.kv[:a.klen], b.kv[:b.klen]) < 0
}

// compareItems compares the keys of a and b as lessItem orders them:
// -1, 0 or +1.
func compareItems(a, b memItem) int {
	if a.p0 != b.p0 {
		return cmp.Compare(a.p0, b.p0)
	}
	if a.p1 != b.p1 {
		return cmp.Compare(a.p1, b.p1)
	}
	if a.p2 != b.p2 {
		return cmp.Compare(a.p2, b.p2)
	}
	if a.p3 != b.p3 {
		return cmp.Compare(a.p3, b.p3)
	}
	return bytes.Compare(a.kv[:a.klen], b.kv[:b.klen])
}

// MemoryOption configures a MemoryEngine.
type MemoryOption func(*MemoryEngine)

// WithFault installs f, consulted at every write commit.
func WithFault(f FaultFunc) MemoryOption { return func(e *MemoryEngine) { e.fault = f } }

// memDegree is the B-tree's degree: nodes hold 63 to 127 items. Wider
// nodes than 32 make the tree a level shallower at 100,000 partitions, so
// a search into a part of the store the cache does not hold misses on one
// node fewer (bench/README.md compares the degrees).
const memDegree = 64

// NewMemoryEngine returns an empty memory engine.
func NewMemoryEngine(opts ...MemoryOption) *MemoryEngine {
	e := &MemoryEngine{tree: btree.NewG(memDegree, lessItem)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Fault says what one write commit of a MemoryEngine does.
type Fault uint8

const (
	// CommitNormally commits (unless the transaction's context has ended,
	// in which case nothing is written and Commit returns its error).
	CommitNormally Fault = iota
	// CommitConflict writes nothing and fails with a retryable conflict,
	// like FoundationDB's 1020 not_committed.
	CommitConflict
	// CommitThenUnknown writes, then fails with an error wrapping
	// store.ErrUnknownResult, like a 1021 commit_unknown_result for a
	// commit that landed. The error is retryable.
	CommitThenUnknown
	// UnknownWithoutCommit writes nothing and fails like CommitThenUnknown:
	// a 1021 for a commit that did not land.
	UnknownWithoutCommit
	// CommitFatal writes nothing and fails with a non-retryable error.
	CommitFatal
)

// FaultFunc decides what a write commit does. It runs inside Commit with
// the transaction's context while the transaction holds the engine
// exclusively, so it must not use the engine (nor a Layer over it); it may
// block, for instance until ctx ends, to hold a commit in flight. The
// returned then, when non-nil, runs after the engine is released and
// before Commit returns: the place to act as a concurrent writer through a
// Layer. A FaultFunc is called from the committing goroutine, one commit
// at a time.
type FaultFunc func(ctx context.Context) (f Fault, then func())

// errTxnEnded: a transaction used after Commit (without OnError) or Close.
var errTxnEnded = errors.New("fdblayer: memory engine: transaction has ended")

// Errors a MemoryEngine commit fails with under a Fault.
var (
	// ErrInjectedConflict is CommitConflict's error; OnError retries it.
	ErrInjectedConflict = errors.New("fdblayer: memory engine: injected conflict")
	// ErrInjectedUnknown is wrapped (with store.ErrUnknownResult) by the
	// errors of CommitThenUnknown and UnknownWithoutCommit; OnError
	// retries them.
	ErrInjectedUnknown = errors.New("fdblayer: memory engine: injected unknown commit result")
	// ErrInjectedFatal is CommitFatal's error; OnError gives up on it.
	ErrInjectedFatal = errors.New("fdblayer: memory engine: injected fatal error")
)

// Begin starts a write transaction, waiting for the engine to be free. It
// fails when ctx is done or the engine is closed.
func (e *MemoryEngine) Begin(ctx context.Context) (Txn, error) {
	t := &memTxn{e: e, ctx: ctx, write: true}
	if err := t.lock(); err != nil {
		return nil, err
	}
	return t, nil
}

// BeginRead starts a read transaction. It fails when ctx is done or the
// engine is closed.
func (e *MemoryEngine) BeginRead(ctx context.Context) (ReadTxn, error) {
	t := &memTxn{e: e, ctx: ctx}
	if err := t.lock(); err != nil {
		return nil, err
	}
	return t, nil
}

// Limits reports FoundationDB's limits.
func (e *MemoryEngine) Limits() Limits { return fdbLimits() }

// EstimateRangeSize counts the bytes of keys and values in [begin, end)
// exactly.
func (e *MemoryEngine) EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error) {
	t, err := e.BeginRead(ctx)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	return treeRangeBytes(e.tree, begin, end), nil
}

// treeRangeBytes counts the bytes of keys and values in [begin, end) of tr.
func treeRangeBytes(tr *btree.BTreeG[memItem], begin, end []byte) int64 {
	var n int64
	tr.AscendRange(keyItem(begin), keyItem(end), func(it memItem) bool {
		n += int64(len(it.kv))
		return true
	})
	return n
}

// Probe fails when ctx is done or the engine is closed.
func (e *MemoryEngine) Probe(ctx context.Context) error {
	t, err := e.BeginRead(ctx)
	if err != nil {
		return err
	}
	t.Close()
	return nil
}

// Close closes the engine; later transactions fail with ErrClosed. The
// data is dropped.
func (e *MemoryEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.closed = true
	e.tree.Clear(false)
	return nil
}

// memTxn is a MemoryEngine transaction; write says which lock it holds.
type memTxn struct {
	e      *MemoryEngine
	ctx    context.Context
	write  bool
	locked bool
	ops    *memOps // pending writes; nil until the first
}

// memOps is a write buffer, reused across transactions.
type memOps struct{ w []memWrite }

// memWrite is one pending write; del marks a Clear.
type memWrite struct {
	item memItem
	del  bool
}

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
		return ErrClosed
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
	return treeGetMany(t.e.tree, dst, keys), nil
}

// treeGetMany appends to dst the value in tr of each key, nil when absent.
func treeGetMany(tr *btree.BTreeG[memItem], dst [][]byte, keys [][]byte) [][]byte {
	for _, k := range keys {
		it, ok := tr.Get(keyItem(k))
		if !ok {
			dst = append(dst, nil)
			continue
		}
		dst = append(dst, it.value())
	}
	return dst
}

func (t *memTxn) GetRange(dst []KeyValue, begin, end []byte, limit, maxBytes int) ([]KeyValue, error) {
	if err := t.usable(); err != nil {
		return dst, err
	}
	return treeGetRange(t.e.tree, dst, begin, end, limit, maxBytes), nil
}

// treeGetRange appends to dst the rows of tr in [begin, end), as far as
// rangeStop lets it.
func treeGetRange(tr *btree.BTreeG[memItem], dst []KeyValue, begin, end []byte, limit, maxBytes int) []KeyValue {
	n, size := 0, 0
	tr.AscendRange(keyItem(begin), keyItem(end), func(it memItem) bool {
		dst = append(dst, KeyValue{Key: it.key(), Value: it.value()})
		n, size = n+1, size+len(it.kv)
		return !rangeStop(n, size, limit, maxBytes)
	})
	return dst
}

// Set copies key and value into one allocation, which the tree keeps.
func (t *memTxn) Set(key, value []byte) { t.add(memWrite{item: newMemItem(key, value)}) }

func (t *memTxn) Clear(key []byte) {
	t.add(memWrite{item: keyItem(bytes.Clone(key)), del: true})
}

func (t *memTxn) add(w memWrite) {
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
	fault, then := CommitNormally, func() {}
	if t.e.fault != nil {
		var th func()
		fault, th = t.e.fault(t.ctx)
		if th != nil {
			then = th
		}
	}
	var err error
	switch fault {
	case CommitNormally:
		// The fault may have held the commit until the context ended.
		if err = t.ctx.Err(); err != nil {
			err = fmt.Errorf("fdblayer: memory engine: commit interrupted: %w", err)
		} else {
			t.applyOps()
		}
	case CommitConflict:
		err = ErrInjectedConflict
	case CommitThenUnknown:
		t.applyOps()
		err = fmt.Errorf("%w: %w", store.ErrUnknownResult, ErrInjectedUnknown)
	case UnknownWithoutCommit:
		err = fmt.Errorf("%w: %w", store.ErrUnknownResult, ErrInjectedUnknown)
	case CommitFatal:
		err = ErrInjectedFatal
	default:
		err = fmt.Errorf("fdblayer: memory engine: unknown fault %d", fault)
	}
	t.dropOps()
	t.unlock()
	then()
	return err
}

func (t *memTxn) applyOps() {
	if t.ops != nil {
		applyWrites(t.e.tree, t.ops.w)
	}
}

// applyWrites applies ws to tr in order.
func applyWrites(tr *btree.BTreeG[memItem], ws []memWrite) {
	for _, w := range ws {
		if w.del {
			tr.Delete(w.item)
		} else {
			tr.ReplaceOrInsert(w.item)
		}
	}
}

// OnError retries the injected conflicts and unknown results at once
// (there is no contention to back off from): it takes the engine again
// and drops pending writes. Every other error is returned.
func (t *memTxn) OnError(err error) error {
	if !errors.Is(err, ErrInjectedConflict) && !errors.Is(err, ErrInjectedUnknown) {
		return err
	}
	t.dropOps()
	if t.locked {
		return nil
	}
	return t.lock()
}

func (t *memTxn) Close() {
	t.dropOps()
	if t.locked {
		t.unlock()
	}
}
