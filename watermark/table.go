package watermark

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: the table is the service's, the watermark the library's.
//
// A lease table belongs to a service's schema, as an outcome source's
// records do (outcome.SourceConfig): its partitions, its key class, its
// lease record and its recovery marker are generated types the library
// cannot name. The service describes them in a TableConfig with its
// generated codec functions and its rules, and the Table reads them
// through that description only. What the library owns it keeps: the
// checkpoint (gen.WatermarkCheckpoint), the reconcile marker's value
// (gen.U64Value, written by MarkReconciled) and every rule of the scan
// and of the fence.

// TableConfig describes a lease table of a service's schema, the way
// outcome.SourceConfig describes a record class: the schema's generated
// codec functions and its rules. A coordinator partition (of type C)
// holds a lease row per shard (a partition of type S) at a key of one key
// class (K), whose value is a lease record (R) carrying the running
// maximum of the shard's relay watermark; and the table's markers: the
// recovery marker (a record M the service writes when it restores the
// table) and the reconcile marker (the library's gen.U64Value, which
// [Table.MarkReconciled] writes). Every field is required but
// HoldsMarkers. The functions must be pure (the same result for the same
// arguments) and safe for concurrent use.
//
// The reference domain's lease table (refdomain/leases) is one:
//
//	start, end := refdomain.ClassRange(refdomain.TagLeasedShardKey)
//	watermark.TableConfig[refdomain.CoordinatorPartition, refdomain.LeasedShardKey,
//		refdomain.LeasedShard, refdomain.LeaseRecovery, refdomain.RefPartition]{
//		ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
//		LeaseStart:     start,
//		LeaseEnd:       end,
//		ParseLeaseKey:  refdomain.ParseLeasedShardKey,
//		DecodeLease:    refdomain.DecodeLeasedShard,
//		...
//	}
type TableConfig[C store.Partition, K, R, M any, S store.Partition] struct {
	// ParsePartition parses a partition identity of the schema: its
	// generated partition parser, which timers.PartitionParser adapts
	// (timers.PartitionParser(refdomain.ParsePartition)). A checkpoint
	// names its coordinator by identity; DecodeCheckpoint parses it with
	// this and refuses one that is not a C.
	ParsePartition func(identity []byte) (store.Partition, error)
	// LeaseStart and LeaseEnd bound the lease rows in a coordinator
	// partition: the range of the lease key class (the generated
	// ClassRange(Tag<Key>)). Every row in it is a lease: a key
	// ParseLeaseKey refuses, or a value DecodeLease refuses, is corrupt
	// data.
	LeaseStart, LeaseEnd store.Key
	// ParseLeaseKey parses a lease row's key: the generated Parse<Key>.
	ParseLeaseKey func(key []byte) (K, error)
	// DecodeLease decodes a lease row's value: the generated
	// Decode<Record>.
	DecodeLease func(value []byte) (R, error)
	// RelayWatermark returns the running maximum of the leased shard's
	// relay watermark that a lease carries: every relay row of the shard
	// not yet delivered was committed at or after it (the zero Time: none
	// reported yet, before every commit). It is kept to the millisecond; a
	// time before the Unix epoch makes the lease corrupt data.
	RelayWatermark func(lease R) time.Time
	// Shard returns the shard a lease row of coordinator leases: what
	// ActiveShards lists.
	Shard func(coordinator C, key K) S
	// RecoveryKey is the key of the recovery marker in a partition that
	// holds the markers (the generated Append<Key>(nil) of a key class
	// without fields). It lies outside [LeaseStart, LeaseEnd).
	RecoveryKey store.Key
	// DecodeRecovery decodes the recovery marker: the generated
	// Decode<Record>.
	DecodeRecovery func(marker []byte) (M, error)
	// RecoveryTime applies the schema's recovery-time rule to a marker:
	// the time the table was restored, kept to the millisecond, and true;
	// or false for a marker that records no recovery (a first
	// activation). While a marker has a recovery time and no
	// reconciliation later than it is recorded, the table is recovering.
	// A recovery time before the Unix epoch makes the marker corrupt data.
	RecoveryTime func(marker M) (time.Time, bool)
	// ReconcileKey is the key of the reconcile marker, whose value is the
	// library's gen.U64Value (milliseconds), which MarkReconciled writes.
	// It lies outside [LeaseStart, LeaseEnd) and differs from
	// RecoveryKey.
	ReconcileKey store.Key
	// HoldsMarkers, when set, reports whether p, a partition that is not
	// a C, holds lease markers of its own, which CheckRecovery and
	// MarkReconciled then serve (the reference domain's namespace
	// partitions). Nil: only coordinator partitions hold them.
	HoldsMarkers func(p store.Partition) bool
}

// Table is a lease table of a service's schema (see TableConfig), built by
// NewTable: the watermark's functions are its methods. It is immutable
// and safe for concurrent use.
type Table[C store.Partition, K, R, M any, S store.Partition] struct {
	c          TableConfig[C, K, R, M, S]
	markerKeys []store.Key // RecoveryKey, ReconcileKey
}

// NewTable builds a table. It fails with an error wrapping
// store.ErrInvalid, naming the field, for a missing function or key, a
// lease range that is empty, a marker key inside the lease range, or
// equal marker keys. It keeps copies of the keys.
func NewTable[C store.Partition, K, R, M any, S store.Partition](c TableConfig[C, K, R, M, S]) (*Table[C, K, R, M, S], error) {
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"ParsePartition", c.ParsePartition == nil},
		{"ParseLeaseKey", c.ParseLeaseKey == nil},
		{"DecodeLease", c.DecodeLease == nil},
		{"RelayWatermark", c.RelayWatermark == nil},
		{"Shard", c.Shard == nil},
		{"RecoveryKey", len(c.RecoveryKey) == 0},
		{"DecodeRecovery", c.DecodeRecovery == nil},
		{"RecoveryTime", c.RecoveryTime == nil},
		{"ReconcileKey", len(c.ReconcileKey) == 0},
	} {
		if f.missing {
			return nil, fmt.Errorf("watermark: TableConfig.%s is required: %w", f.name, store.ErrInvalid)
		}
	}
	if bytes.Compare(c.LeaseStart, c.LeaseEnd) >= 0 {
		return nil, fmt.Errorf("watermark: TableConfig.LeaseStart %x is not before LeaseEnd %x: an empty lease range: %w", c.LeaseStart, c.LeaseEnd, store.ErrInvalid)
	}
	inRange := func(k store.Key) bool {
		return bytes.Compare(k, c.LeaseStart) >= 0 && bytes.Compare(k, c.LeaseEnd) < 0
	}
	switch {
	case inRange(c.RecoveryKey):
		return nil, fmt.Errorf("watermark: TableConfig.RecoveryKey %x lies in the lease range [%x, %x): %w", c.RecoveryKey, c.LeaseStart, c.LeaseEnd, store.ErrInvalid)
	case inRange(c.ReconcileKey):
		return nil, fmt.Errorf("watermark: TableConfig.ReconcileKey %x lies in the lease range [%x, %x): %w", c.ReconcileKey, c.LeaseStart, c.LeaseEnd, store.ErrInvalid)
	case bytes.Equal(c.RecoveryKey, c.ReconcileKey):
		return nil, fmt.Errorf("watermark: TableConfig.ReconcileKey %x is RecoveryKey: %w", c.ReconcileKey, store.ErrInvalid)
	}
	c.LeaseStart, c.LeaseEnd = bytes.Clone(c.LeaseStart), bytes.Clone(c.LeaseEnd)
	c.RecoveryKey, c.ReconcileKey = bytes.Clone(c.RecoveryKey), bytes.Clone(c.ReconcileKey)
	return &Table[C, K, R, M, S]{c: c, markerKeys: []store.Key{c.RecoveryKey, c.ReconcileKey}}, nil
}

// fence checks that p holds lease markers: a coordinator partition, or
// one HoldsMarkers admits. what names the operation for the error.
func (t *Table[C, K, R, M, S]) fence(p store.Partition, what string) error {
	if p != nil {
		if _, ok := p.(C); ok {
			return nil
		}
		if t.c.HoldsMarkers != nil && t.c.HoldsMarkers(p) {
			return nil
		}
	}
	others := ""
	if t.c.HoldsMarkers != nil {
		others = " or one TableConfig.HoldsMarkers admits"
	}
	return fmt.Errorf("watermark: %s needs a coordinator partition%s, not %s: %w", what, others, store.PartitionName(p), store.ErrInvalid)
}

// coordinatorIdentity returns coordinator's tuple identity, refusing a
// nil one (a C that is an interface type).
func coordinatorIdentity[C store.Partition](coordinator C) ([]byte, error) {
	if any(coordinator) == nil {
		return nil, fmt.Errorf("watermark: coordinator: a nil partition: %w", store.ErrInvalid)
	}
	id, err := coordinator.AppendTuple(nil)
	if err != nil {
		return nil, fmt.Errorf("watermark: coordinator: %w", err)
	}
	return id, nil
}

// readLease decodes one row of coordinator's lease table, key and value,
// and returns the key and the lease's relay watermark as stored: a row
// that does not decode, or whose relay watermark is before the Unix
// epoch, fails with an error wrapping store.ErrCorrupt.
func (t *Table[C, K, R, M, S]) readLease(coordinator C, row store.KeyValue) (K, uint64, error) {
	key, err := t.c.ParseLeaseKey(row.Key)
	if err != nil {
		return key, 0, fmt.Errorf("watermark: lease table of %s: %w", store.PartitionName(coordinator), corrupt(err))
	}
	lease, err := t.c.DecodeLease(row.Value)
	if err != nil {
		return key, 0, fmt.Errorf("watermark: lease table of %s, shard %s: %w", store.PartitionName(coordinator), store.PartitionName(t.c.Shard(coordinator, key)), corrupt(err))
	}
	at := t.c.RelayWatermark(lease)
	ms, err := store.EncodeTime(at)
	if err != nil {
		return key, 0, fmt.Errorf("watermark: lease table of %s, shard %s: relay watermark %s before the Unix epoch: %w",
			store.PartitionName(coordinator), store.PartitionName(t.c.Shard(coordinator, key)), at.UTC().Format(time.RFC3339Nano), store.ErrCorrupt)
	}
	return key, ms, nil
}

// corrupt returns err, a decoder's error over stored bytes, wrapping
// store.ErrCorrupt: a generated decoder's already does; another's is made
// to, so that stored data that does not decode always fails closed as
// corrupt.
func corrupt(err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %w", err, store.ErrCorrupt)
}
