package outbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// A writer reads the outbox state, appends rows inside its own batch, and
// applies it, here as one store.Transact step: a failed guard means
// another writer got there first, and Transact runs the step again, which
// reads afresh and rebuilds. The step guards its own change (the head is
// absent), so a re-run after an unknown commit result finds its work done.
func ExampleBuilder() {
	ctx := context.Background()
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clock.NewManual(time.UnixMilli(1_000))})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	source := refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}
	index := refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}

	var seq uint64
	_, err = store.Transact(ctx, s, source, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		if _, done, err := r.Get(ctx, store.Key("head")); err != nil || done {
			return nil, err
		}
		o, err := outbox.Read(ctx, r)
		if err != nil {
			return nil, err
		}
		ob, err := outbox.NewBuilder(s, time.UnixMilli(1_000), o)
		if err != nil {
			return nil, err
		}
		// The writer's own change, and the relay row that carries it.
		b := store.NewBatch().Require(store.Absent(store.Key("head"))).Put(store.Key("head"), store.Value("abc123"))
		if seq, err = ob.Relay(context.Background(), index, []gen.RelayPut{{Key: []byte("head"), Value: []byte("abc123")}}, nil); err != nil {
			return nil, err
		}
		return b, ob.Finish(b)
	}, store.TransactConfig{})
	if err != nil {
		panic(err)
	}
	fmt.Println("queued relay row", seq)
	// Output: queued relay row 1
}
