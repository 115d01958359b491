package relay_test

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
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A writer queues a relay row in its own batch (which also creates the
// relay timer); RunDue fires the relay, which applies the row to the
// target partition and completes the timer.
func ExampleHandler() {
	ctx := context.Background()
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clock.NewManual(time.UnixMilli(1_000))})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	src := refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}
	index := refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")}

	o, err := outbox.Read(ctx, store.ReaderOf(s, src))
	if err != nil {
		panic(err)
	}
	ob, err := outbox.NewBuilder(s, time.UnixMilli(1_000), o)
	if err != nil {
		panic(err)
	}
	if _, err := ob.Relay(context.Background(), index, []gen.RelayPut{{Key: []byte("head"), Value: []byte("abc123")}}, nil); err != nil {
		panic(err)
	}
	b := store.NewBatch()
	if err := ob.Finish(b); err != nil {
		panic(err)
	}
	if _, err := s.Apply(ctx, src, b); err != nil {
		panic(err)
	}

	rh, err := relay.NewHandler(relay.HandlerConfig{Target: s})
	if err != nil {
		panic(err)
	}
	reg, err := timers.NewRegistry(rh)
	if err != nil {
		panic(err)
	}
	rep, err := timers.RunDue(ctx, s, src, reg, time.UnixMilli(1_000), timers.RunConfig{})
	if err != nil {
		panic(err)
	}
	head, _, err := s.Get(ctx, index, store.Key("head"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("fired %d, head %s, timer done: %v\n", rep.Fired, head, rep.NextDue.IsZero())
	// Output: fired 1, head abc123, timer done: true
}
