// Package schema is the schema of a small job dispatcher, the lease table
// the library's watermark tests run on: a region's dispatcher partition
// leases the region's queue partitions, one lease row per queue carrying
// the running maximum of the queue's relay watermark, and holds the
// table's restore and reconciliation markers. It differs from the
// reference domain's lease table in every name and shape the watermark is
// told about (an integer lease key, another recovery rule, markers in the
// dispatcher only). Generated into ../dispatchgen.
//
//mk:namespace dispatch
package schema

//go:generate go run ../../../../cmd/codegen -schema . -out ../dispatchgen -pkg dispatchgen

// Region names a region.
//
//mk:identity min=1 max=32
type Region string

// Partition is a dispatch partition.
//
//mk:union partition
type Partition struct {
	Queue      *QueuePartition      `mk:"tag=1,kind=queue"`
	Dispatcher *DispatcherPartition `mk:"tag=2,kind=dispatcher"`
}

// QueuePartition holds one job queue of a region: its jobs and the relay
// rows they queue.
type QueuePartition struct {
	Region Region
	Queue  uint32
}

// DispatcherPartition holds a region's lease table: a lease per queue,
// the restore marker and the reconcile marker.
type DispatcherPartition struct {
	Region Region
}

// QueueLeaseKey holds the dispatcher's lease of one queue of its region
// (a QueueLeaseV1).
//
//mk:key tag=100 value=QueueLeaseV1
type QueueLeaseKey struct {
	Queue uint32
}

// RestoreKey holds the dispatcher's restore marker (a RestoreV1).
//
//mk:key tag=101 value=RestoreV1
type RestoreKey struct{}

// ReconciledKey holds the time the dispatcher's lease table was last
// reconciled after a restore (the library's U64Value, milliseconds).
//
//mk:key tag=102
type ReconciledKey struct{}

// QueueLeaseV1 is a worker's lease of a queue, with the running maximum
// of the queue's relay watermark (RelayedThroughMs).
//
//mk:record version=1
type QueueLeaseV1 struct {
	Worker           string `mk:"max=64"`
	ExpiresAtMs      uint64
	RelayedThroughMs uint64
}

// RestoreV1 marks that the dispatcher's lease table was restored from
// Backup at RestoredAtMs. Recovery-time rule: a marker whose Initial is
// true records the table's first start, not a restore, and has no
// recovery time; any other marker's recovery time is RestoredAtMs.
//
//mk:record version=1
type RestoreV1 struct {
	Initial      bool
	RestoredAtMs uint64
	Backup       string `mk:"max=128"`
}
