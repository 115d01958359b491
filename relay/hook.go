package relay

import (
	"context"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Row is one queued relay row as a Hook sees it. Its byte slices alias the
// fire's read buffers: they are valid during the hook call only and must
// not be modified.
type Row struct {
	// Source is the partition the row was queued in (the relay timer's).
	Source store.Partition
	// Seq is the row's source sequence.
	Seq uint64
	// Record is the decoded row; Record.Target is the target's tuple
	// identity, the bytes of the target partition a hook is given.
	Record gen.RelayV1
}

// Hook extends the relay's target batches atomically: whatever it adds to
// a batch lands together with the rows' writes and the high-water mark,
// or not at all. The rows a hook is shown are
// consecutive undelivered rows of one target, in sequence order; a call
// may be repeated with fewer rows. Any error blocks the target for the
// rest of the cycle, except ErrHookCapacity from BeforeApply, which asks
// for fewer rows.
//
// A hook's target is a store.Identity: the partition the rows name, of
// any schema, addressed by its tuple identity (parse it, with the target
// schema's generated ParsePartition, to see its fields).
//
// A Hook is called concurrently: by the lanes of one fire, which deliver
// to different targets at once (Budget.Concurrency; the calls for one
// target come one at a time, in sequence order), and by several fires at
// once. It must be safe for concurrent use.
type Hook interface {
	// ReadKeys names the target keys BeforeApply needs to see for rows.
	// The relay reads them, with the high-water key, in one snapshot; with
	// more than MaxHookReadKeys keys in all (duplicates count once) it asks
	// again with half the rows.
	ReadKeys(target store.Partition, rows []Row) ([]store.Key, error)
	// BeforeApply may add preconditions and writes to b, the target batch
	// for rows: the high-water guard, the rows' writes and the new
	// high-water mark. observed is the snapshot of the high-water key
	// (first) and the keys ReadKeys named (sorted, without duplicates), a
	// nil Value for an absent key; it is empty when ReadKeys named none.
	// It must not modify what b already holds, nor retain b or observed.
	// It runs inside the transaction that reads observed and applies b
	// (store.TransactOnce, one transaction on a store.Transactor): it must
	// be short, and must not call the target store (a call with ctx fails
	// with store.ErrInvalid on the Layer). It may run again for the same
	// rows when the store retries the transaction.
	// The result must pass the target's Capabilities().Full() with
	// ReservedOps(target, rows) operations reserved; a batch that does not
	// is retried with half the rows.
	BeforeApply(ctx context.Context, target store.Partition, rows []Row, observed []store.KeyValue, b *store.Batch) error
	// ReservedOps is how many of the target's batch operations to keep
	// free for rows, beyond what BeforeApply added.
	ReservedOps(target store.Partition, rows []Row) int
}

// NoHook is the Hook that adds nothing: the default.
type NoHook struct{}

// ReadKeys names no key.
func (NoHook) ReadKeys(store.Partition, []Row) ([]store.Key, error) { return nil, nil }

// BeforeApply adds nothing.
func (NoHook) BeforeApply(context.Context, store.Partition, []Row, []store.KeyValue, *store.Batch) error {
	return nil
}

// ReservedOps reserves nothing.
func (NoHook) ReservedOps(store.Partition, []Row) int { return 0 }
