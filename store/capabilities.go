package store

import "fmt"

// DefaultMaxBatchOps is the operation cap of a batch (preconditions plus
// writes) unless a store is configured otherwise. FoundationDB itself bounds a transaction by
// bytes (10,000,000) and time (5 s), not by operation count; the cap keeps
// batches far from both and keeps handler bounds portable.
const DefaultMaxBatchOps = 100

// Capabilities are the limits a store validates batches against. Every
// limit is inclusive: a batch exactly at a limit is valid.
type Capabilities struct {
	// MaxBatchOps bounds preconditions plus writes of one batch.
	MaxBatchOps int
	// ReservedBatchOps of MaxBatchOps are kept for an extension of the
	// batch (a hook's writes): builders validate against these
	// capabilities, which allow MaxBatchOps minus this; Apply validates
	// against Full(), which allows MaxBatchOps.
	ReservedBatchOps int
	// MaxKeyBytes bounds one key, after the partition's prefix is taken
	// off the engine's own key limit.
	MaxKeyBytes int
	// MaxValueBytes bounds one value.
	MaxValueBytes int
	// MaxBatchBytes bounds the key and value bytes of one batch.
	MaxBatchBytes int
	// MaxScanBytes bounds the bytes of keys and values one Scan page holds
	// after its first row, counted as the store holds them (a store may
	// count a key with its partition's prefix): a page that would pass it
	// ends early, with a Next cursor, so that only Next == nil ends a scan.
	// A page holds at least one row when the range has one, however large.
	// 0: pages are bounded by rows only.
	MaxScanBytes int
	// MaxTransactReadBytes bounds the bytes the reads of one Transactor
	// transaction hold together (see Transactor). 0: no bound beyond
	// MaxScanBytes per page.
	MaxTransactReadBytes int
	// MaxCommitBatches bounds the batches of one commit of several
	// partitions (Committer), and MaxCommitOps and MaxCommitBytes their
	// operations and bytes, Batch.Ops and Batch.Bytes summed over the
	// commit: a commit within them fits one transaction of the engine
	// (FoundationDB's 10,000,000 bytes, with every key counted with its
	// partition's prefix). A commit of one batch is bounded as Apply's
	// batch is. 0: the store commits one partition at a time.
	MaxCommitBatches int
	MaxCommitOps     int
	MaxCommitBytes   int
}

// Full returns the capabilities with no operations reserved: the most one
// batch may hold on this store.
func (c Capabilities) Full() Capabilities {
	c.ReservedBatchOps = 0
	return c
}

func (c Capabilities) checkRow(what string, i int, key Key, value Value) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: %s %d has an empty key", ErrInvalid, what, i)
	}
	if len(key) > c.MaxKeyBytes {
		return fmt.Errorf("%w: %s %d key has %d bytes, limit %d", ErrInvalid, what, i, len(key), c.MaxKeyBytes)
	}
	if len(value) > c.MaxValueBytes {
		return fmt.Errorf("%w: %s %d value has %d bytes, limit %d", ErrInvalid, what, i, len(value), c.MaxValueBytes)
	}
	return nil
}
