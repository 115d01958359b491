// Package kv is the contract between fdblayer's Layer and the engines it
// runs on: the smallest ordered, transactional key/value store the Layer
// needs. An engine is a driver in a package of its own, so that a program
// links only the engines it opens:
//
//   - fdblayer/memengine: in memory, for tests and benchmarks;
//   - fdblayer/boltengine: one bbolt file, embedded and durable;
//   - fdblayer/fdbengine: a FoundationDB cluster (a module of its own: it
//     needs cgo and libfdb_c);
//   - fdbsim's MVCCEngine: FoundationDB's transaction semantics in
//     process, for tests.
//
// A custom engine implements [Engine], its transactions [ReadTxn] and
// [Txn], and optionally [RangesReader], [Distributed] and [Optimistic];
// it reports [FDBLimits] (or smaller limits) so that data and batches
// that fit it also fit FoundationDB, and returns [ErrClosed] once closed.
// Test it as this module's engines are tested: run store/storetest's
// conformance suite on a Layer over it (fdblayer.Open).
//
// Keys and values are raw bytes compared with bytes.Compare; the Layer
// alone knows partitions, batches and cursors.
package kv

import "context"

// Engine is an ordered, transactional key/value store: transactions with
// point reads, bounded forward range reads, sets and clears, plus a size
// estimate and a liveness probe. All methods are safe for concurrent use;
// a transaction is used by one goroutine at a time.
type Engine interface {
	// Begin starts a read-write transaction bound to ctx: when ctx ends the
	// transaction fails, and an engine that can cancel work in flight does.
	// Begin may wait for other write transactions to finish.
	Begin(ctx context.Context) (Txn, error)

	// BeginRead starts a read-only transaction bound to ctx.
	BeginRead(ctx context.Context) (ReadTxn, error)

	// Limits reports the largest key, value and transaction the engine
	// accepts. The Layer derives its capabilities from them so that a
	// batch that passes validation always fits.
	Limits() Limits

	// EstimateRangeSize estimates the bytes of keys and values stored in
	// [begin, end).
	EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error)

	// Probe reports whether the engine answers, bounded by ctx.
	Probe(ctx context.Context) error

	// Close releases the engine. Transactions must have ended first.
	Close() error
}

// ReadTxn is a read-only transaction: every read sees one consistent
// snapshot. Slices it returns are only valid until the transaction is
// closed (or reset by OnError) and must not be modified.
type ReadTxn interface {
	// GetMany reads keys and appends one value per key to dst, in order:
	// nil for an absent key, a non-nil (possibly empty) slice for a present
	// one. Every read is issued before any is waited on.
	GetMany(dst [][]byte, keys [][]byte) ([][]byte, error)

	// GetRange appends to dst the rows with keys in [begin, end), in key
	// order: at most limit of them (limit >= 1) and, when maxBytes > 0,
	// none after the first row with which the rows' keys and values come
	// to more than maxBytes bytes (that row is appended: it tells the
	// caller the range goes on).
	GetRange(dst []KeyValue, begin, end []byte, limit, maxBytes int) ([]KeyValue, error)

	// OnError decides what to do about err, returned by this transaction.
	// It returns nil when the caller should retry: the engine has waited
	// its backoff and reset the transaction to a fresh snapshot with no
	// writes. Otherwise it returns the error to give up with. The caller's
	// own retry budget bounds how often it asks.
	OnError(err error) error

	// Close ends the transaction, discarding writes not committed. It is
	// safe to call after Commit and more than once.
	Close()
}

// Txn is a read-write transaction. Reads see the snapshot the transaction
// began on and need not see its own writes: the Layer issues every read
// before its first write.
type Txn interface {
	ReadTxn

	// Set writes key = value at commit. The key is copied; value must stay
	// unchanged until the transaction ends.
	Set(key, value []byte)

	// Clear deletes key at commit; an absent key is fine.
	Clear(key []byte)

	// Commit applies every Set and Clear atomically, in order. An error
	// that leaves it unknown whether the writes landed wraps
	// store.ErrUnknownResult; any other error means nothing was written.
	// Either way the caller passes the error to OnError to learn whether to
	// retry.
	Commit() error
}

// KeyValue is one row of a range read.
type KeyValue struct {
	Key   []byte
	Value []byte
}

// RangeRead is one range of a RangesReader's GetRanges: the rows with keys
// in [Begin, End), at most Limit of them (Limit >= 1), as GetRange reads
// them without a byte budget.
type RangeRead struct {
	Begin, End []byte
	Limit      int
}

// RangesReader is implemented by read transactions that read several
// ranges at once, as GetMany reads several keys: every read is issued
// before any is waited on, so that they cost one round trip, not one
// each. GetRanges returns one slice of rows per range, in order, valid
// as GetRange's are. The Layer uses it where it reads ranges that do not
// depend on each other (the due index's buckets) and reads them one after
// another on a transaction without it.
type RangesReader interface {
	GetRanges(reads []RangeRead) ([][]KeyValue, error)
}

// Distributed is implemented by engines whose keys many servers share
// (FoundationDB's, and fdbsim's MVCCEngine, which stands for it): the
// Layer spreads its due index over hashed buckets on them (see
// fdblayer.DueHashBuckets), and keeps one on the others. Every Layer over
// one store must see the same answer.
type Distributed interface {
	// Distributed reports whether the engine's keys are spread over
	// servers.
	Distributed() bool
}

// Optimistic is implemented by engines whose transactions never wait for
// each other (fdbengine's, and fdbsim's MVCCEngine, which stands for it):
// each reads at its own version, and a write after its reads makes its
// commit conflict. An open transaction holds a read version there, no
// lock, so the Layer may keep one open while its caller waits for other
// calls (fdblayer's Layer.Prefetch); on the memory and bbolt engines,
// whose write transaction holds the one writer's lock from Begin, it
// never does. A wrapper of an engine forwards it.
type Optimistic interface {
	// Optimistic reports whether transactions never wait for each other.
	Optimistic() bool
}

// ReadOnly is implemented by engines that may be open for reading only
// (boltengine's, with Config.ReadOnly): their Begin fails. A Layer over
// such an engine writes nothing of its own (its gate checks the store's
// formats and writes no process row). A wrapper of an engine forwards it.
type ReadOnly interface {
	// ReadOnly reports whether the engine is open for reading only. It is
	// constant for the engine's life.
	ReadOnly() bool
}

// GroupCommitter is implemented by engines whose write transactions run
// one at a time and whose every commit costs a sync to disk (boltengine's):
// the Layer then commits the guarded batches of Apply and Commit calls
// that wait for the writer together, in one write transaction and one
// sync (fdblayer's group commit), each batch's guards and result its own.
// A wrapper of an engine forwards it.
type GroupCommitter interface {
	// GroupCommits reports whether commits should share a transaction.
	GroupCommits() bool
}
