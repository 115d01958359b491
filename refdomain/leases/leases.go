// Package leases is the reference domain's lease table as a
// watermark.Table: a coordinator partition (refdomain.CoordinatorPartition)
// holds a lease row per ref shard (refdomain.LeasedShardKey, valued
// refdomain.LeasedShard, whose RelayWatermarkMs is the running maximum of
// the shard's relay watermark), and the table's markers
// (refdomain.LeaseRecoveryKey, valued refdomain.LeaseRecovery, and
// refdomain.LeaseReconcileKey). Namespace partitions hold markers of their
// own too. It is one table among any a service declares
// (watermark.NewTable), written beside the reference domain's generated
// package the way an importing service writes its own.
//
//	t, err := leases.NewTable()
//	w, err := t.Watermark(ctx, s, refdomain.CoordinatorPartition{NS: ns}, time.Now())
//	page, err := t.ActiveShards(ctx, s, coordinator, nil, 100) // refdomain.RefPartition shards
package leases

import (
	"time"

	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// Table is the reference domain's lease table.
type Table = watermark.Table[refdomain.CoordinatorPartition, refdomain.LeasedShardKey, refdomain.LeasedShard, refdomain.LeaseRecovery, refdomain.RefPartition]

// Checkpoint resumes a watermark scan of a coordinator's lease table.
type Checkpoint = watermark.Checkpoint[refdomain.CoordinatorPartition]

// ShardsPage is one page of Table.ActiveShards.
type ShardsPage = watermark.ShardsPage[refdomain.RefPartition]

// config describes the reference domain's lease table.
func config() watermark.TableConfig[refdomain.CoordinatorPartition, refdomain.LeasedShardKey, refdomain.LeasedShard, refdomain.LeaseRecovery, refdomain.RefPartition] {
	start, end := refdomain.ClassRange(refdomain.TagLeasedShardKey)
	return watermark.TableConfig[refdomain.CoordinatorPartition, refdomain.LeasedShardKey, refdomain.LeasedShard, refdomain.LeaseRecovery, refdomain.RefPartition]{
		ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		LeaseStart:     start,
		LeaseEnd:       end,
		ParseLeaseKey:  refdomain.ParseLeasedShardKey,
		DecodeLease:    refdomain.DecodeLeasedShard,
		RelayWatermark: func(l refdomain.LeasedShard) time.Time { return store.DecodeTime(l.RelayWatermarkMs) },
		Shard:          Shard,
		RecoveryKey:    refdomain.AppendLeaseRecoveryKey(nil),
		DecodeRecovery: refdomain.DecodeLeaseRecovery,
		RecoveryTime:   RecoveryTime,
		ReconcileKey:   refdomain.AppendLeaseReconcileKey(nil),
		HoldsMarkers:   HoldsMarkers,
	}
}

// NewTable returns the reference domain's lease table. The description is
// fixed and valid, so it fails only if the generated package changed
// under it (watermark.NewTable's errors, wrapping store.ErrInvalid).
func NewTable() (*Table, error) { return watermark.NewTable(config()) }

// Shard returns the ref shard a lease row of coordinator leases: the ref
// partition of the key's repository and ref, in the coordinator's
// namespace.
func Shard(coordinator refdomain.CoordinatorPartition, key refdomain.LeasedShardKey) refdomain.RefPartition {
	return refdomain.RefPartition{NS: coordinator.NS, Repo: key.Repo, ShardRef: key.ShardRef}
}

// RecoveryTime applies refdomain.LeaseRecovery's recovery-time rule: a
// marker of a first activation (ActivationOnly true) has none; any other
// marker's is its ResumedAtMs.
func RecoveryTime(r refdomain.LeaseRecovery) (time.Time, bool) {
	if r.ActivationOnly != nil && *r.ActivationOnly {
		return time.Time{}, false
	}
	return store.DecodeTime(r.ResumedAtMs), true
}

// HoldsMarkers reports whether p, besides the coordinator partitions,
// holds lease markers of its own: the namespace partitions do.
func HoldsMarkers(p store.Partition) bool {
	_, ok := p.(refdomain.NamespacePartition)
	return ok
}
