package outcome_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// The outcome timers outbox.Builder created while no Delivery was
// registered wait (held, as timers of an unknown kind do); once a
// Delivery is registered, a Scheduler fires them and every outcome
// reaches the sink, in partitions of several kinds, addressed with or
// without the schema's parser.
func TestSchedulerFiresQueuedOutcomesOnceRegistered(t *testing.T) {
	for _, eng := range []testengine.Engine{testengine.Memory, testengine.Bolt} {
		for _, parse := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/parse=%v", eng.Name, parse), func(t *testing.T) {
				e := newEnvOn(t, eng, time.UnixMilli(1_000))
				parts := []store.Partition{
					partition,
					refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")},
				}
				var want []string
				for i, p := range parts {
					e.p = p
					ids := []string{fmt.Sprintf("p%d-a", i), fmt.Sprintf("s:p%d-b", i), fmt.Sprintf("p%d-c", i)}
					e.seed(ids...)
					want = append(want, ids[0], ids[2])
				}

				cfg := timers.SchedulerConfig{Store: e.s, Owner: "w1", Workers: 1, Clock: e.clock, Logger: e.log, HeldBackoff: 10 * time.Second}
				if parse {
					cfg.ParsePartition = timers.PartitionParser(refdomain.ParsePartition)
				}
				// No handler yet: the timers are held, not lost.
				cfg.Registry = &timers.Registry{}
				before, err := timers.NewScheduler(cfg)
				require.NoError(t, err)
				rep, err := before.Tick(ctx)
				require.NoError(t, err)
				assert.Equal(t, 2, rep.Timers.Held)
				require.NoError(t, timerstest.CheckDueIndex(ctx, e.s, parts))

				sink := &capture{}
				reg, err := timers.NewRegistry(delivery(t, sink))
				require.NoError(t, err)
				cfg.Registry = reg
				sched, err := timers.NewScheduler(cfg)
				require.NoError(t, err)
				e.clock.Advance(cfg.HeldBackoff)
				rep, err = sched.Tick(ctx)
				require.NoError(t, err)
				assert.Equal(t, 2, rep.Timers.Fired)
				assert.ElementsMatch(t, want, sink.ids())
				for _, p := range parts {
					e.p = p
					assert.Equal(t, uint64(0), e.backlogRows(), store.PartitionName(p))
					assert.Empty(t, e.pending())
					assert.Zero(t, e.timerRows(), "the delivery timer is done")
				}
				require.NoError(t, timerstest.CheckDueIndex(ctx, e.s, parts))
				for _, o := range sink.outcomes() {
					assert.Equal(t, audience, o.Audience)
				}
			})
		}
	}
}
