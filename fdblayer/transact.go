package fdblayer

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: one transaction for read-then-write.
//
// TransactOnce runs the caller's function inside one engine transaction:
// its reads go through txnReader, at the transaction's snapshot, and the
// batch it returns is checked and committed in the same transaction, by
// the code Apply commits with (commitBatch). Every engine makes the reads
// count: fdbsim.MVCCEngine and FoundationDB record a read conflict range per read
// and fail the commit (1020) when a later commit wrote into one, and the
// memory and bbolt engines hold their single writer's lock from Begin to
// the commit, so nothing can write in between. A conflict resets the
// transaction (OnError) and the function runs again on a fresh snapshot,
// within the retry limit, as Apply retries. The values the function read
// are kept (readCache), so that a precondition on a key it read, the
// usual guard, costs no second read: a read-then-write of one row is one
// read version, one read and one commit, as in FoundationDB's own
// Database.Transact.

// heldTxnKey marks the context a TransactOnce hands its function, so
// that the Layer refuses a call made with it rather than wait for the
// transaction the caller itself holds.
type heldTxnKey struct{}

// notNested fails with store.ErrInvalid when ctx is one a TransactOnce of
// l handed its function: a call of the Layer from inside the function,
// which on the memory and bbolt engines would wait for the function's own
// transaction forever.
func (l *Layer) notNested(ctx context.Context, what string, p store.Partition) error {
	if held, _ := ctx.Value(heldTxnKey{}).(*Layer); held != l {
		return nil
	}
	name := "fdblayer: " + what
	if p != nil {
		name += " " + store.PartitionName(p)
	}
	return fmt.Errorf("%s: %w: called from inside a TransactOnce function of the same store, whose transaction it would wait for", name, store.ErrInvalid)
}

var _ store.Transactor = (*Layer)(nil)

// TransactOnce implements store.Transactor: it runs fn in one engine
// transaction of partition p, reads through the store.Reader fn gets
// (also a store.WakeReader) at the transaction's snapshot, and commits
// the batch fn returns in the same transaction, checking its
// preconditions at that snapshot: a precondition on a key fn read is
// evaluated on what fn read, without reading it again. A row fn read that
// another writer changes before the commit fails the commit (on fdbsim.MVCCEngine
// and FoundationDB; the memory and bbolt engines let no writer in between),
// and fn runs again on a fresh snapshot, as do retryable engine errors of
// its reads, within the retry limit and ctx; past them TransactOnce fails
// as Apply does (store.ErrUnavailable with ErrRetriesExhausted, or
// store.ErrUnknownResult when an earlier commit may have landed). After an
// unknown commit result fn runs again, on a state where its batch may have
// landed. The outcomes are Apply's; fn's error is returned as it is, and a
// nil or empty batch returns the zero BatchOutcome, both with nothing
// written.
//
// fn's reads are bounded: each Scan page by Capabilities().MaxScanBytes
// and by what the run's earlier reads left of MaxTransactReadBytes, and a
// read once the run's reads hold MaxTransactReadBytes fails with
// store.ErrInvalid. The batch is validated as Apply validates it
// (store.ErrInvalid, nothing written).
//
// fn runs while the transaction is open; on the memory and bbolt engines
// it holds the store's only writer, so it must be short. A call of the
// Layer made with the context fn was given fails with store.ErrInvalid
// instead of waiting for that transaction. TransactOnce fails with
// store.ErrInvalid, before any I/O, for a nil fn or a partition that
// cannot encode. While the Layer's gate is fenced (see Apply) a batch fn
// returns fails with evolve.ErrNewerFormat, written nothing; fn's reads
// alone succeed. It is safe for concurrent use.
func (l *Layer) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	if fn == nil {
		return store.BatchOutcome{}, fmt.Errorf("fdblayer: transact on %s: %w: nil function", store.PartitionName(p), store.ErrInvalid)
	}
	// s holds p's subspace and what the run read (s.cache); its other
	// buffers serve the run's reads and, once fn returned, the commit.
	s := l.getScratch()
	defer l.putScratch(s)
	sub, err := l.appendSubspace(s.sub[:0], p)
	s.sub = sub
	if err != nil {
		return store.BatchOutcome{}, fmt.Errorf("fdblayer: transact: %w", err)
	}
	if err := l.notNested(ctx, "transact on", p); err != nil {
		return store.BatchOutcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.BatchOutcome{}, l.opError("transact on", p, nil, err)
	}
	txn, err := l.engine.Begin(ctx)
	if err != nil {
		return store.BatchOutcome{}, l.opError("transact on", p, nil, err)
	}
	defer txn.Close()
	r := &txnReader{l: l, txn: txn, p: p, sub: sub, s: s, cache: &s.cache}
	r.ctx = heldCtx{Context: ctx, l: l}
	fnCtx := context.Context(&r.ctx)
	var unknown error
	for attempt := 0; ; attempt++ {
		r.open()
		b, fnErr := fn(fnCtx, r)
		err := r.close() // an engine error of fn's reads: retry
		committing := false
		if err == nil {
			if fnErr != nil {
				return store.BatchOutcome{}, fnErr
			}
			var (
				out     store.BatchOutcome
				invalid bool
			)
			out, committing, invalid, err = l.commitFunc(ctx, txn, s, p, b, r.cache)
			switch {
			case invalid:
				return out, err
			case err == nil && out.Outcome == store.DeadlinePassed && unknown != nil:
				return out, l.opError("transact on", p, unknown, fmt.Errorf("deadline passed at %v on a retry", out.Now))
			case err == nil:
				return out, nil
			}
		}
		if err := l.giveUp(ctx, txn, "transact on", p, attempt, committing, err, &unknown); err != nil {
			return store.BatchOutcome{}, err
		}
	}
}

// heldCtx is the context a TransactOnce hands its function: ctx's values
// and cancellation, and the Layer whose transaction the function runs in
// under heldTxnKey (see notNested), as context.WithValue would give. It
// is a field of the run's txnReader, so that the two cost one allocation.
type heldCtx struct {
	context.Context
	l *Layer
}

func (c *heldCtx) Value(key any) any {
	if _, ok := key.(heldTxnKey); ok {
		return c.l
	}
	return c.Context.Value(key)
}

// commitFunc checks and commits b, the batch a TransactOnce function
// returned, in txn, where known holds what the function read. invalid
// reports an error of b's own (it fails validation): nothing to retry.
// A nil or empty b commits nothing.
func (l *Layer) commitFunc(ctx context.Context, txn kv.Txn, s *scratch, p store.Partition, b *store.Batch, known *readCache) (out store.BatchOutcome, committing, invalid bool, err error) {
	if b == nil || b.Ops() == 0 && b.Wakeup == nil {
		return store.BatchOutcome{}, false, false, nil
	}
	if err := l.fenced(ctx, "transact on", p); err != nil {
		return out, false, true, err
	}
	if err := b.Validate(l.caps.Full()); err != nil {
		return out, false, true, fmt.Errorf("fdblayer: transact on %s: %w", store.PartitionName(p), err)
	}
	sub, pre, err := l.batchKeys(s, p, b)
	if err != nil {
		return out, false, true, fmt.Errorf("fdblayer: transact: %w", err)
	}
	if !b.Deadline.IsZero() {
		if now := l.clock.Now(); now.After(b.Deadline) {
			return store.BatchOutcome{Outcome: store.DeadlinePassed, Now: now}, false, false, nil
		}
	}
	out, committing, err = l.commitBatch(ctx, txn, s, b, sub, pre, known)
	return out, committing, false, err
}

// txnReader is the store.Reader (and store.WakeReader) of a TransactOnce
// function: reads in the function's transaction, their values copied for
// the caller and kept for the batch's preconditions, their bytes counted
// against the run's budget. A mutex makes it safe for concurrent use,
// which engine transactions are not.
type txnReader struct {
	l   *Layer
	txn kv.Txn
	p   store.Partition
	sub []byte  // p's subspace
	ctx heldCtx // the context fn is given

	mu    sync.Mutex
	s     *scratch
	live  bool       // fn is running
	cache *readCache // what the run read (s.cache)
	spent int        // bytes the run's reads hold
	err   error      // the run's first engine error: the transaction must be reset
}

var (
	_ store.Reader     = (*txnReader)(nil)
	_ store.WakeReader = (*txnReader)(nil)
)

// open starts a run: nothing read yet.
func (r *txnReader) open() {
	r.mu.Lock()
	r.live, r.spent, r.err = true, 0, nil
	r.cache.reset()
	r.mu.Unlock()
}

// close ends a run and returns its first engine error; later reads fail.
func (r *txnReader) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live = false
	return r.err
}

func (r *txnReader) Partition() store.Partition { return r.p }

// Format is the Layer's format of namespace (store.Formats).
func (r *txnReader) Format(namespace string) uint32 { return r.l.Format(namespace) }

// begin checks that a read may run: fn is running, no engine error ended
// the run's transaction, the budget is not spent, ctx has not ended. r.mu
// is held.
func (r *txnReader) begin(ctx context.Context, what string) error {
	// The name is built only for an error: a read that may run is the
	// common case, and a partition's name costs allocations.
	name := func() string { return "fdblayer: transaction " + what + " " + store.PartitionName(r.p) }
	switch max := r.l.caps.MaxTransactReadBytes; {
	case !r.live:
		return fmt.Errorf("%s: %w: the Reader was used after its function returned", name(), store.ErrInvalid)
	case r.err != nil:
		return wrapError(name(), store.ErrUnavailable, r.err)
	case r.spent >= max:
		return fmt.Errorf("%s: %w: the transaction's reads hold %d bytes, limit %d (MaxTransactReadBytes)", name(), store.ErrInvalid, r.spent, max)
	}
	if err := ctx.Err(); err != nil {
		return wrapError(name(), store.ErrUnavailable, err)
	}
	return nil
}

// fail records an engine error of a read: the transaction must be reset
// before anything else reads or commits in it. r.mu is held.
func (r *txnReader) fail(what string, err error) error {
	if r.err == nil {
		r.err = err
	}
	return wrapError("fdblayer: transaction "+what+" "+store.PartitionName(r.p), store.ErrUnavailable, err)
}

// Get reads one row as Layer.Get does, in the transaction.
func (r *txnReader) Get(ctx context.Context, key store.Key) (store.Value, bool, error) {
	keys := [1]store.Key{key}
	r.mu.Lock()
	defer r.mu.Unlock()
	vals, err := r.get(ctx, keys[:])
	if err != nil || vals[0] == nil {
		return nil, false, err
	}
	return append(make(store.Value, 0, len(vals[0])), vals[0]...), true, nil
}

// GetMany reads rows as Layer.GetMany does, in the transaction.
func (r *txnReader) GetMany(ctx context.Context, keys []store.Key) ([]store.Value, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vals, err := r.get(ctx, keys)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return []store.Value{}, nil
	}
	return copyValues(vals), nil
}

// get reads keys in the transaction, keeps what it read, and returns the
// engine's values (valid until the transaction ends). r.mu is held.
func (r *txnReader) get(ctx context.Context, keys []store.Key) ([][]byte, error) {
	for i, k := range keys {
		if err := r.l.checkKey(k); err != nil {
			return nil, fmt.Errorf("fdblayer: transaction get from %s: key %d: %w", store.PartitionName(r.p), i, err)
		}
	}
	if err := r.begin(ctx, "get from"); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	full := r.l.fullKeys(r.s, append(r.s.buf[:0], r.sub...), keys)
	vals, err := r.txn.GetMany(r.s.vals[:0], full)
	r.s.vals = vals
	if err != nil {
		return nil, r.fail("get from", err)
	}
	for i, k := range full {
		r.cache.put(k, vals[i])
		r.spent += len(k) + len(vals[i])
	}
	return vals, nil
}

// NextWake reads the partition's wake time in the transaction.
func (r *txnReader) NextWake(ctx context.Context) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin(ctx, "next wake of"); err != nil {
		return time.Time{}, false, err
	}
	key := append(append(r.s.key[:0], r.sub...), partitionEnd)
	r.s.key = key
	vals, err := r.txn.GetMany(r.s.vals[:0], [][]byte{key})
	r.s.vals = vals
	if err != nil {
		return time.Time{}, false, r.fail("next wake of", err)
	}
	at, _, err := decodeWake(vals[0])
	if err != nil {
		return time.Time{}, false, fmt.Errorf("fdblayer: transaction next wake of %s: %w", store.PartitionName(r.p), err)
	}
	r.cache.put(key, vals[0])
	r.spent += len(key) + len(vals[0])
	return store.DecodeTime(at), at != 0, nil
}

// Scan reads a page as Layer.Scan does, in the transaction, within what
// the run's earlier reads left of its budget.
func (r *txnReader) Scan(ctx context.Context, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.live {
		// Before pageQuery writes to r.s, which serves the commit once fn
		// returned.
		return store.ScanPage{}, r.begin(ctx, "scan")
	}
	q, err := r.l.pageQuery(r.s, r.p, append(r.s.buf[:0], r.sub...), start, end, after, limit)
	if err != nil {
		return store.ScanPage{}, err
	}
	if err := r.begin(ctx, "scan"); err != nil {
		return store.ScanPage{}, err
	}
	if q.empty() {
		return store.ScanPage{}, nil
	}
	budget := min(r.l.caps.MaxScanBytes, r.l.caps.MaxTransactReadBytes-r.spent)
	page, _, got, err := q.read(r.txn, r.s, budget, nil, nil)
	if err != nil {
		return store.ScanPage{}, r.fail("scan", err)
	}
	for _, row := range got {
		r.cache.put(row.Key, row.Value)
	}
	r.spent += rowsBytes(got)
	return page, nil
}

// readCache holds what a TransactOnce run (or a prefetch) read, by engine
// key: the values as the engine returned them (valid until the
// transaction ends; nil for an absent key read by GetMany). Rows a scan
// did not return are not known absent: a scan says nothing about keys it
// passed. A few keys are searched in order, with copies of the keys in
// one buffer; past cacheLinear of them, a map indexes them too. So a run
// that reads a row or two (a mark, a cursor) keeps them without an
// allocation once the cache's buffers have grown, and the Layer's pooled
// scratch keeps them from one run to the next.
type readCache struct {
	keys    [][]byte // copies, in arena
	vals    [][]byte
	arena   []byte
	index   map[string]int // keys' positions, when indexed
	indexed bool
}

// cacheLinear is the most keys a readCache searches in order.
const cacheLinear = 8

// reset empties the cache, keeping its buffers but no engine value.
func (c *readCache) reset() {
	clear(c.vals)
	c.keys, c.vals, c.arena = c.keys[:0], c.vals[:0], c.arena[:0]
	clear(c.index)
	c.indexed = false
}

// find returns key's position, or -1.
func (c *readCache) find(key []byte) int {
	if c.indexed {
		if i, ok := c.index[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, k := range c.keys {
		if bytes.Equal(k, key) {
			return i
		}
	}
	return -1
}

func (c *readCache) put(key, value []byte) {
	if i := c.find(key); i >= 0 {
		c.vals[i] = value
		return
	}
	start := len(c.arena)
	c.arena = append(c.arena, key...)
	c.keys = append(c.keys, c.arena[start:len(c.arena):len(c.arena)])
	c.vals = append(c.vals, value)
	switch {
	case c.indexed:
		c.index[string(key)] = len(c.keys) - 1
	case len(c.keys) > cacheLinear:
		if c.index == nil {
			c.index = make(map[string]int, 2*len(c.keys))
		}
		for i, k := range c.keys {
			c.index[string(k)] = i
		}
		c.indexed = true
	}
}

// readMissing reads the keys missing, in txn with one GetMany, into
// dst[at[j]] for missing[j]: what a read served partly from memory leaves
// to the engine. On an error it returns dst as it was before the caller
// appended (dst[:n]).
func readMissing(txn kv.ReadTxn, dst [][]byte, n int, missing [][]byte, at []int) ([][]byte, error) {
	if len(missing) == 0 {
		return dst, nil
	}
	vals, err := txn.GetMany(nil, missing)
	if err != nil {
		return dst[:n], err
	}
	for j, i := range at {
		dst[i] = vals[j]
	}
	return dst, nil
}

// getMany appends each key's value to dst as txn.GetMany does, reading in
// txn, with one GetMany, only the keys the cache does not hold.
func (c *readCache) getMany(txn kv.ReadTxn, dst [][]byte, keys [][]byte) ([][]byte, error) {
	n := len(dst)
	var missing [][]byte
	var at []int
	for i, k := range keys {
		var v []byte
		j := c.find(k)
		if j >= 0 {
			v = c.vals[j]
		}
		dst = append(dst, v)
		if j < 0 {
			missing, at = append(missing, k), append(at, n+i)
		}
	}
	return readMissing(txn, dst, n, missing, at)
}
