package timers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// openV1Fixture opens a copy of testdata/due-v1.bbolt: 40 partitions
// whose timers (kind 1000; 30 due at 10,000 ms, 10 at 20,000, each with
// one a day later) were written by the code before the due index had
// buckets (testdata/due-v1.go.txt, run at e64c5c8), so every due index
// entry is of that layout. distributed opens it through
// fdbsim.AsDistributed, with DueHashBuckets buckets.
func openV1Fixture(t *testing.T, clk clock.Clock, distributed bool) (*fdblayer.Layer, []store.Partition) {
	t.Helper()
	src, err := os.Open("testdata/due-v1.bbolt")
	require.NoError(t, err)
	defer src.Close()
	path := filepath.Join(t.TempDir(), "due-v1.bbolt")
	dst, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	bolt, err := boltengine.Open(path, boltengine.Config{})
	require.NoError(t, err)
	var e kv.Engine = bolt
	if distributed {
		e = fdbsim.AsDistributed(bolt)
	}
	l, err := fdblayer.Open(e, fdblayer.Config{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	var ps []store.Partition
	for i := range 40 {
		ps = append(ps, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("v1-%02d", i))})
	}
	return l, ps
}

// timerCount counts the timer rows of ps.
func timerCount(t *testing.T, l *fdblayer.Layer, ps []store.Partition) int {
	t.Helper()
	n := 0
	start, end := gen.ClassRange(gen.TagTimerKey)
	for _, p := range ps {
		page, err := l.Scan(context.Background(), p, start, end, nil, 100)
		require.NoError(t, err)
		n += len(page.Entries)
	}
	return n
}

// A store written before the due index had buckets, opened by this code,
// loses no timer: its entries are listed (as the last bucket), every due
// partition fires, each entry moves to its bucket when its partition's
// wake time changes, and MigrateDueIndex (or the same pages as a
// migration, evolve.DueIndexMigration, through an evolve.Runner) moves the
// ones not yet touched.
func TestAStoreOfTheFirstDueLayoutLosesNoTimer(t *testing.T) {
	for _, tc := range []struct {
		migrateFirst string // "", "MigrateDueIndex" or "Runner"
		distributed  bool   // fdbsim.AsDistributed: DueHashBuckets buckets, not bbolt's one
	}{{"", false}, {"MigrateDueIndex", false}, {"Runner", false}, {"", true}, {"MigrateDueIndex", true}, {"Runner", true}} {
		migrateFirst := tc.migrateFirst
		t.Run(fmt.Sprintf("migrate-first=%v/distributed=%v", migrateFirst, tc.distributed), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewManual(time.UnixMilli(10_000))
			l, ps := openV1Fixture(t, clk, tc.distributed)
			require.Equal(t, 80, timerCount(t, l, ps))
			es, err := l.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1000})
			require.NoError(t, err)
			require.Len(t, es, 40)
			for _, e := range es {
				require.Equal(t, l.DueBuckets()-1, e.Bucket, "every entry is of the first layout")
			}
			require.NoError(t, timerstest.CheckDueIndex(ctx, l, ps))
			runner, err := evolve.NewRunner(l, evolve.RunnerConfig{Owner: "test", Clock: clk, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			switch migrateFirst {
			case "MigrateDueIndex":
				moved, err := l.MigrateDueIndex(ctx)
				require.NoError(t, err)
				require.Equal(t, 40, moved)
				require.NoError(t, timerstest.CheckDueIndex(ctx, l, ps))
			case "Runner":
				rep, err := runner.Run(ctx, evolve.DueIndexMigration(l))
				require.NoError(t, err)
				require.True(t, rep.Checkpoint.IsDone())
				require.Equal(t, uint64(40), rep.Checkpoint.Rewritten)
				require.NoError(t, timerstest.CheckDueIndex(ctx, l, ps))
			}

			h := &recorder{kind: 1000}
			s, err := timers.NewScheduler(timers.SchedulerConfig{Store: l, Registry: registry(t, h), Clock: clk,
				Workers: 3, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			rep, err := s.Tick(ctx)
			require.NoError(t, err)
			assert.Equal(t, 30, rep.Claimed)
			require.NoError(t, timerstest.CheckDueIndex(ctx, l, ps))
			clk.Set(time.UnixMilli(20_000))
			rep, err = s.Tick(ctx)
			require.NoError(t, err)
			assert.Equal(t, 10, rep.Claimed)
			require.NoError(t, timerstest.CheckDueIndex(ctx, l, ps))
			assert.Len(t, h.seen(), 40, "every due timer fired once")
			assert.Equal(t, 40, timerCount(t, l, ps), "the ones a day later wait")

			es, err = l.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1000})
			require.NoError(t, err)
			require.Len(t, es, 40)
			for _, e := range es {
				assert.Less(t, e.Bucket, l.DueBuckets()-1, "moved to its bucket")
				assert.True(t, e.At.After(time.Unix(0, 0).Add(24*time.Hour)), "due a day after the epoch: %v", e.At)
			}
			moved, err := l.MigrateDueIndex(ctx)
			require.NoError(t, err)
			assert.Zero(t, moved)
			again, err := runner.Rerun(ctx, evolve.DueIndexMigration(l))
			require.NoError(t, err)
			assert.Zero(t, again.Checkpoint.Rewritten, "nothing of the first layout is left")
		})
	}
}
