// Package store is the contract every handler programs against: a
// partitioned, ordered key/value store with atomic guarded batches.
//
// A [Store] holds many partitions. Each partition is an independent ordered
// keyspace: the same key in two partitions names two rows, and a scan never
// leaves its partition. A guarded batch (preconditions plus writes) is
// applied atomically inside one partition: every precondition is checked
// against the snapshot the writes commit on, and either every write lands
// or none does.
//
// A store may offer extensions, which callers ask for with a type
// assertion and do without when it has none: [DueIndex] (the due index a
// scheduler lists), [ScanAppender] (scan pages read into the caller's
// memory), [Transactor] (a function's reads and the batch built from
// them in one transaction; [Transact] and [TransactOnce] use it when they
// can) and [Committer] (the guarded batches of several partitions in one
// atomic commit, within Capabilities' MaxCommitBatches, MaxCommitOps and
// MaxCommitBytes; [Commit] and [TransactMany] use it, and commit one
// partition at a time without it).
//
// A commit whose result is unknown may have landed: [ErrUnknownResult]
// says what that means for a batch and its guards.
//
// Implementations live elsewhere (package fdblayer); store/storetest holds
// the conformance suite every implementation passes, and the fault-injecting
// wrapper that handler tests use.
package store

import (
	"context"
	"fmt"
)

// Key is a row key inside one partition, compared as bytes. Keys built by
// generated constructors are tuple-encoded, so byte order is logical order.
// A key never starts with 0xFF (no tuple does): stores keep their own
// per-partition data there, and reject such keys with ErrInvalid.
type Key []byte

// Value is a row value. A present value is never nil (an empty value is a
// non-nil, zero-length slice); nil means absent wherever a Value can be
// absent.
type Value []byte

// KeyValue is one row of a scan page.
type KeyValue struct {
	Key   Key
	Value Value
}

// Partition names one partition. Generated partition identities implement
// it; so can an importing project's own.
type Partition interface {
	// AppendTuple appends the FoundationDB tuple-layer encoding of the
	// partition's identity to dst and returns the extended slice. The
	// encoding of one partition is never a prefix of another's. It fails
	// with an error wrapping ErrInvalid when the identity cannot encode
	// (an empty or over-long name, a control character).
	AppendTuple(dst []byte) ([]byte, error)
	// Kind names the partition's kind ("ref", "namespace", ...) for
	// metrics and logs. It never contains identity data.
	Kind() string
}

// Store is a partitioned ordered key/value store with atomic guarded
// batches. Every method is safe for concurrent use, takes a context that
// bounds it, and fails with errors wrapping [ErrInvalid], [ErrCorrupt],
// [ErrUnavailable] or [ErrUnknownResult].
//
// Byte slices passed in are not retained past the call. Byte slices
// returned are owned by the caller.
type Store interface {
	// Get reads one row. ok is false when the key is absent.
	Get(ctx context.Context, p Partition, key Key) (value Value, ok bool, err error)

	// GetMany reads several rows from one consistent snapshot. The result
	// has one entry per key, in order; an absent key's entry is nil.
	GetMany(ctx context.Context, p Partition, keys []Key) ([]Value, error)

	// Scan reads rows with keys in [start, end) of partition p, in key
	// order, strictly after the cursor when after is non-nil, at most limit
	// rows (limit >= 1), and no more bytes after the first row than
	// Capabilities().MaxScanBytes: a page may end early, short of limit,
	// with the range going on. Only a nil Next cursor says the range is
	// exhausted; otherwise passing it back resumes after the page's last
	// row, whatever was inserted or deleted meanwhile (the next page may
	// then be empty, with Next nil). A page holds at least one row when
	// the range has one. A cursor issued for another partition or range,
	// or malformed, fails with ErrInvalid: never a silent restart.
	Scan(ctx context.Context, p Partition, start, end Key, after Cursor, limit int) (ScanPage, error)

	// Apply applies a guarded batch atomically; see Batch. The outcome is
	// Committed, PreconditionFailed (naming the first failed precondition,
	// nothing written) or DeadlinePassed (nothing written). A batch that
	// fails Validate(Capabilities().Full()) returns ErrInvalid before any
	// I/O: ReservedBatchOps is room a batch builder keeps for operations
	// it adds later (a hook's), not a limit of Apply.
	//
	// When the commit's result is unknown, Apply fails with
	// [ErrUnknownResult], or retries the batch and reports what the retry
	// found; either way the batch may land twice, and its guards decide
	// what that does (see ErrUnknownResult).
	Apply(ctx context.Context, p Partition, b *Batch) (BatchOutcome, error)

	// Capabilities reports the limits batches are validated against.
	Capabilities() Capabilities

	// Stats reports the approximate size of partition p.
	Stats(ctx context.Context, p Partition) (PartitionStats, error)

	// Probe checks that the store answers, bounded by ctx; it fails with
	// ErrUnavailable when it does not.
	Probe(ctx context.Context) error
}

// Cursor is an opaque, versioned scan position issued by Scan. It is
// only valid for the partition and range it was issued for.
type Cursor []byte

// ScanPage is one page of a Scan.
type ScanPage struct {
	// Entries are the page's rows in key order.
	Entries []KeyValue
	// Next resumes the scan after the last entry; nil when the range is
	// exhausted. A page shorter than its limit does not say the range
	// ended: only a nil Next does.
	Next Cursor
}

// ScanAppender is implemented by stores that can read a scan page into
// memory the caller provides and reuses: a caller that reads many pages
// and is done with each before it reads the next (a relay draining its
// queue) then allocates no page anew, and what its reads cost the garbage
// collector stays flat. Callers ask for it with a type assertion, as
// DueIndex callers do, and fall back to Scan.
type ScanAppender interface {
	// AppendScan reads the page Scan would read with the same arguments,
	// and fails as Scan does. It appends the page's rows to rows and their
	// keys' and values' bytes to buf, as append does (a new array only
	// when buf has no room), and returns the page, whose Entries are rows
	// extended, and buf extended. The bytes of the rows it appends alias
	// the returned buf, which stays the caller's: the store does not
	// retain rows or buf. Each key and value is capped to its length, so
	// that appending to one cannot overwrite another. On error it returns
	// an empty page and buf as passed.
	AppendScan(ctx context.Context, p Partition, start, end Key, after Cursor, limit int, rows []KeyValue, buf []byte) (ScanPage, []byte, error)
}

// PartitionStats is the approximate size of one partition.
type PartitionStats struct {
	// ApproximateBytes estimates the bytes of keys and values stored in
	// the partition (FoundationDB's estimated range size on that engine).
	ApproximateBytes int64
}

// PartitionName formats p for error messages and logs: its String when it
// implements fmt.Stringer, else its kind and its identity's tuple
// (kind("orders", 1)), else its kind alone.
func PartitionName(p Partition) string {
	if p == nil {
		return "<nil partition>"
	}
	if s, ok := p.(fmt.Stringer); ok {
		return s.String()
	}
	if b, err := p.AppendTuple(nil); err == nil {
		return p.Kind() + formatIdentity(b)
	}
	return p.Kind()
}
