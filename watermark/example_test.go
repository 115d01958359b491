package watermark_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// exampleStore is a memory store whose dispatcher leases three queues,
// with relay watermarks 40, 90 and 70 ms.
func exampleStore(dispatcher dispatchgen.DispatcherPartition) *fdblayer.Layer {
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	b := store.NewBatch()
	for i, w := range []uint64{40, 90, 70} {
		row, err := dispatchgen.EncodeQueueLeaseV1(dispatchgen.QueueLeaseV1{Worker: "w1", ExpiresAtMs: 500, RelayedThroughMs: w})
		if err != nil {
			panic(err)
		}
		b.Put(dispatchgen.AppendQueueLeaseKey(nil, uint32(i)), row)
	}
	if _, err := s.Apply(context.Background(), dispatcher, b); err != nil {
		panic(err)
	}
	return s
}

// A service describes its lease table with its schema's generated
// functions (here a dispatcher that leases job queues) and reads the
// watermark of a coordinator; a restored table fails it closed until its
// recovery is reconciled.
func ExampleNewTable() {
	start, end := dispatchgen.ClassRange(dispatchgen.TagQueueLeaseKey)
	leases, err := watermark.NewTable(watermark.TableConfig[dispatchgen.DispatcherPartition, dispatchgen.QueueLeaseKey, dispatchgen.QueueLeaseV1, dispatchgen.RestoreV1, dispatchgen.QueuePartition]{
		ParsePartition: timers.PartitionParser(dispatchgen.ParsePartition),
		LeaseStart:     start,
		LeaseEnd:       end,
		ParseLeaseKey:  dispatchgen.ParseQueueLeaseKey,
		DecodeLease:    dispatchgen.DecodeQueueLeaseV1,
		RelayWatermark: func(l dispatchgen.QueueLeaseV1) time.Time { return store.DecodeTime(l.RelayedThroughMs) },
		Shard: func(d dispatchgen.DispatcherPartition, k dispatchgen.QueueLeaseKey) dispatchgen.QueuePartition {
			return dispatchgen.QueuePartition{Region: d.Region, Queue: k.Queue}
		},
		RecoveryKey:    dispatchgen.AppendRestoreKey(nil),
		DecodeRecovery: dispatchgen.DecodeRestoreV1,
		RecoveryTime: func(r dispatchgen.RestoreV1) (time.Time, bool) {
			return store.DecodeTime(r.RestoredAtMs), !r.Initial
		},
		ReconcileKey: dispatchgen.AppendReconciledKey(nil),
	})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	dispatcher := dispatchgen.DispatcherPartition{Region: dispatchgen.MustRegion("north")}
	s := exampleStore(dispatcher)
	defer s.Close()

	w, err := leases.Watermark(ctx, s, dispatcher, time.UnixMilli(100))
	fmt.Println("watermark:", w.UnixMilli(), err)
	page, err := leases.ActiveShards(ctx, s, dispatcher, nil, 10)
	fmt.Println("shards:", page.Shards, err)

	// A restore of the lease table writes a recovery marker.
	marker, _ := dispatchgen.EncodeRestoreV1(dispatchgen.RestoreV1{RestoredAtMs: 120, Backup: "nightly"})
	if _, err := s.Apply(ctx, dispatcher, store.NewBatch().Put(dispatchgen.AppendRestoreKey(nil), marker)); err != nil {
		panic(err)
	}
	_, err = leases.Watermark(ctx, s, dispatcher, time.UnixMilli(130))
	fmt.Println("recovering:", errors.Is(err, watermark.ErrRecovering))

	// Once the lease and index tables are rebuilt:
	if err := leases.MarkReconciled(ctx, s, dispatcher, time.UnixMilli(150)); err != nil {
		panic(err)
	}
	w, err = leases.Watermark(ctx, s, dispatcher, time.UnixMilli(160))
	fmt.Println("watermark:", w.UnixMilli(), err)
	// Output:
	// watermark: 40 <nil>
	// shards: [queue(north,0) queue(north,1) queue(north,2)] <nil>
	// recovering: true
	// watermark: 40 <nil>
}

// Step reads one page per call; a caller bounded per request carries the
// encoded checkpoint to its next request. (table is the dispatcher's lease
// table, as ExampleNewTable builds it.)
func ExampleTable_Step() {
	ctx := context.Background()
	dispatcher := dispatchgen.DispatcherPartition{Region: dispatchgen.MustRegion("north")}
	s := exampleStore(dispatcher)
	defer s.Close()

	var carried []byte // what one request hands the next
	for request := 1; ; request++ {
		var cp *watermark.Checkpoint[dispatchgen.DispatcherPartition]
		if carried != nil {
			var err error
			if cp, err = table.DecodeCheckpoint(carried); err != nil {
				panic(err)
			}
		}
		next, w, err := table.Step(ctx, s, dispatcher, time.UnixMilli(int64(100+request)), cp, 2)
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
