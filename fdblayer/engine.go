package fdblayer

import (
	"context"
	"math"
	"time"
)

// Engine is the smallest ordered, transactional key/value store the Layer
// needs: transactions with point reads, bounded forward range reads, sets
// and clears, plus a size estimate and a liveness probe. Keys and values are
// raw bytes compared with bytes.Compare; the Layer alone knows partitions,
// batches and cursors.
//
// Three engines here implement it: MemoryEngine (tests, benchmarks),
// BoltEngine (embedded, durable: the default) and FDBEngine
// (FoundationDB, build tag fdb); package fdbsim adds MVCCEngine
// (FoundationDB's transaction semantics in process: overlapping
// transactions that conflict, for concurrency tests). All
// methods are safe for concurrent use; a transaction is used by one
// goroutine at a time.
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

// Optimistic is implemented by engines whose transactions never wait for
// each other (FDBEngine, and fdbsim's MVCCEngine, which stands for it):
// each reads at its own version, and a write after its reads makes its
// commit conflict. An open transaction holds a read version there, no
// lock, so the Layer may keep one open while its caller waits for other
// calls (Layer.Prefetch); on the memory and bbolt engines, whose write
// transaction holds the one writer's lock from Begin, it never does. A
// wrapper of an engine forwards it.
type Optimistic interface {
	// Optimistic reports whether transactions never wait for each other.
	Optimistic() bool
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

// getRanges reads reads in txn: at once when it is a RangesReader, else
// one range after another.
func getRanges(txn ReadTxn, reads []RangeRead) ([][]KeyValue, error) {
	if rr, ok := txn.(RangesReader); ok {
		return rr.GetRanges(reads)
	}
	out := make([][]KeyValue, len(reads))
	for i, r := range reads {
		rows, err := txn.GetRange(nil, r.Begin, r.End, r.Limit, 0)
		if err != nil {
			return nil, err
		}
		out[i] = rows
	}
	return out, nil
}

// KeyValue is one row of a range read.
type KeyValue struct {
	Key   []byte
	Value []byte
}

// Limits are the bounds an engine accepts. Each is inclusive.
type Limits struct {
	// MaxKeyBytes bounds one full key (root prefix, partition identity and
	// user key together).
	MaxKeyBytes int
	// MaxValueBytes bounds one value.
	MaxValueBytes int
	// MaxTxnBytes bounds the bytes one transaction affects, counted as
	// FoundationDB counts them: mutations plus read and write conflict
	// ranges.
	MaxTxnBytes int
}

// FoundationDB's documented limits: keys up to 10,000 bytes, values up to
// 100,000 bytes, transactions up to 10,000,000 bytes. Every engine reports
// them, so that data and batches that work on the memory and bbolt engines
// also fit FoundationDB.
const (
	FDBMaxKeyBytes   = 10_000
	FDBMaxValueBytes = 100_000
	FDBMaxTxnBytes   = 10_000_000
)

// fdbLimits returns FoundationDB's limits as Limits.
func fdbLimits() Limits {
	return Limits{MaxKeyBytes: FDBMaxKeyBytes, MaxValueBytes: FDBMaxValueBytes, MaxTxnBytes: FDBMaxTxnBytes}
}

// fdbTimeoutMs is the transaction timeout, in ms, that FoundationDB gets
// for a context deadline d away: at least 1 (0 would mean no timeout, and
// a passed deadline must still end the transaction), at most INT_MAX, the
// option's documented range (about 24.8 days; the context ends a
// transaction with a later deadline).
func fdbTimeoutMs(d time.Duration) int64 {
	return min(max(d.Milliseconds(), 1), math.MaxInt32)
}
