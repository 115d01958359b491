package outbox_test

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// A writer reads the outbox state, appends rows inside its own batch, and
// applies it; a failed guard means another writer got there first: read
// again and rebuild.
func ExampleBuilder() {
	ctx := context.Background()
	s, err := fdblayer.Open(fdblayer.NewMemoryEngine(), fdblayer.WithClock(clock.NewManualMs(1_000)))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	source := refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}
	index := refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}

	for {
		o, err := outbox.Read(ctx, s, source)
		if err != nil {
			panic(err)
		}
		ob, err := outbox.NewBuilder(s.Capabilities(), 1_000, o)
		if err != nil {
			panic(err)
		}
		b := store.NewBatch().Put(store.Key("head"), store.Value("abc123")) // the writer's own change
		seq, err := ob.Relay(index, []gen.RelayPut{{Key: []byte("head"), Value: []byte("abc123")}}, nil)
		if err != nil {
			panic(err)
		}
		if err := ob.Finish(b); err != nil {
			panic(err)
		}
		out, err := s.Apply(ctx, source, b)
		if err != nil {
			panic(err)
		}
		if out.Committed() {
			fmt.Println("queued relay row", seq)
			return
		}
	}
	// Output: queued relay row 1
}
