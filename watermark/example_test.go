package watermark_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// exampleStore is a memory store whose coordinator leases three shards,
// with relay watermarks 40, 90 and 70 ms.
func exampleStore(coord refdomain.CoordinatorPartition) *fdblayer.Layer {
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
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
	if _, err := s.Apply(context.Background(), coord, b); err != nil {
		panic(err)
	}
	return s
}

// Watermark scans a coordinator's whole lease table; a restored table
// fails it closed until its recovery is reconciled.
func ExampleWatermark() {
	ctx := context.Background()
	coord := refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("tenant")}
	s := exampleStore(coord)
	defer s.Close()

	w, err := watermark.Watermark(ctx, s, coord, time.UnixMilli(100))
	fmt.Println("watermark:", w.UnixMilli(), err)

	// A restore of the lease table writes a recovery marker.
	marker, _ := refdomain.EncodeLeaseRecovery(refdomain.LeaseRecovery{ResumedAtMs: 120})
	if _, err := s.Apply(ctx, coord, store.NewBatch().Put(refdomain.AppendLeaseRecoveryKey(nil), marker)); err != nil {
		panic(err)
	}
	_, err = watermark.Watermark(ctx, s, coord, time.UnixMilli(130))
	fmt.Println("recovering:", errors.Is(err, watermark.ErrRecovering))

	// Once the lease and index tables are rebuilt:
	if err := watermark.MarkLeaseTableReconciled(ctx, s, coord, time.UnixMilli(150)); err != nil {
		panic(err)
	}
	w, err = watermark.Watermark(ctx, s, coord, time.UnixMilli(160))
	fmt.Println("watermark:", w.UnixMilli(), err)
	// Output:
	// watermark: 40 <nil>
	// recovering: true
	// watermark: 40 <nil>
}

// Step reads one page per call; a caller bounded per request carries the
// encoded checkpoint to its next request.
func ExampleStep() {
	ctx := context.Background()
	coord := refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("tenant")}
	s := exampleStore(coord)
	defer s.Close()

	var carried []byte // what one request hands the next
	for request := 1; ; request++ {
		var checkpoint *watermark.Checkpoint
		if carried != nil {
			var err error
			if checkpoint, err = watermark.Decode(carried); err != nil {
				panic(err)
			}
		}
		next, w, err := watermark.Step(ctx, s, coord, time.UnixMilli(int64(100+request)), checkpoint, 2)
		if err != nil {
			panic(err)
		}
		if next == nil {
			fmt.Printf("request %d: watermark %d\n", request, w.UnixMilli())
			return
		}
		fmt.Printf("request %d: minimum so far %d, ceiling %d\n", request, next.Minimum().UnixMilli(), next.Ceiling().UnixMilli())
		if carried, err = next.Encode(); err != nil {
			panic(err)
		}
	}
	// Output:
	// request 1: minimum so far 40, ceiling 101
	// request 2: watermark 40
}
