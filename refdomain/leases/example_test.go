package leases_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/leases"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// A coordinator leasing three ref shards, with relay watermarks 40, 90 and
// 70 ms: its watermark, its shards, and the fence of a restored table,
// which fails reads closed until its recovery is reconciled.
func ExampleNewTable() {
	ctx := context.Background()
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	coord := refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("tenant")}
	b := store.NewBatch()
	for i, w := range []uint64{40, 90, 70} {
		key, err := refdomain.AppendLeasedShardKey(nil, refdomain.MustRepoName(fmt.Sprint("repo", i)), refdomain.MustShardRef("refs/heads/main"))
		if err != nil {
			panic(err)
		}
		row, err := refdomain.EncodeLeasedShard(refdomain.LeasedShard{Epoch: 1, AckedEpoch: 1, ExpiresAtMs: 500, SweepDueMs: 500, RelayWatermarkMs: w})
		if err != nil {
			panic(err)
		}
		b.Put(key, row)
	}
	if _, err := s.Apply(ctx, coord, b); err != nil {
		panic(err)
	}

	t, err := leases.NewTable()
	if err != nil {
		panic(err)
	}
	w, err := t.Watermark(ctx, s, coord, time.UnixMilli(100))
	fmt.Println("watermark:", w.UnixMilli(), err)
	page, err := t.ActiveShards(ctx, s, coord, nil, 2)
	fmt.Println("shards:", page.Shards, page.Next != nil, err)

	// A restore of the lease table writes a recovery marker.
	marker, _ := refdomain.EncodeLeaseRecovery(refdomain.LeaseRecovery{ResumedAtMs: 120})
	if _, err := s.Apply(ctx, coord, store.NewBatch().Put(refdomain.AppendLeaseRecoveryKey(nil), marker)); err != nil {
		panic(err)
	}
	_, err = t.Watermark(ctx, s, coord, time.UnixMilli(130))
	fmt.Println("recovering:", errors.Is(err, watermark.ErrRecovering))

	// Once the lease and index tables are rebuilt:
	if err := t.MarkReconciled(ctx, s, coord, time.UnixMilli(150)); err != nil {
		panic(err)
	}
	w, err = t.Watermark(ctx, s, coord, time.UnixMilli(160))
	fmt.Println("watermark:", w.UnixMilli(), err)
	// Output:
	// watermark: 40 <nil>
	// shards: [ref(tenant,repo0,refs/heads/main) ref(tenant,repo1,refs/heads/main)] true <nil>
	// recovering: true
	// watermark: 40 <nil>
}
