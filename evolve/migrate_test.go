package evolve_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// A run goes from the start to the end, writing the checkpoint after each
// page: its totals, the last page's partition, who held it and when it
// finished; the metrics count each page.
func TestRunnerRunsToTheEndAndRecordsIt(t *testing.T) {
	l := openLayer(t, memengine.New())
	clk := clock.NewManual(t0)
	rec := telemetry.NewRecorder()
	var seen []uint64
	r := newRunner(t, l, "ops-1", clk, func(c *evolve.RunnerConfig) {
		c.Metrics = rec
		c.OnPage = func(cp evolve.Checkpoint) { seen = append(seen, cp.Pages) }
	})
	m := newCounter("test.count", 4)
	rep, err := r.Run(t.Context(), m)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3, 4}, seen, "OnPage sees each checkpoint")
	require.Equal(t, []uint32{0, 1, 2, 3}, m.steps())
	assert.Equal(t, 4, rep.Pages)
	assert.Equal(t, evolve.Page{Rows: 40, Rewritten: 28, Left: 4, Conflicts: 8, Partitions: 4, Partition: []byte{0x02, 'p', 0x00}}, rep.Run)
	cp, ok, err := evolve.Progress(t.Context(), l, "test.count")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, rep.Checkpoint, cp)
	assert.Equal(t, evolve.Checkpoint{
		Name: "test.count", Partition: []byte{0x02, 'p', 0x00},
		Rows: 40, Rewritten: 28, Left: 4, Conflicts: 8, Pages: 4, Partitions: 4,
		Started: t0, Updated: t0, Done: t0, Owner: "ops-1",
	}, normalize(cp))
	assert.True(t, cp.IsDone())
	assert.False(t, cp.Held(t0))
	assert.Contains(t, rep.String(), `migration "test.count" done with 4 rows left`)
	require.NoError(t, rec.Err())
	label := []telemetry.Label{{Name: telemetry.LabelMigration, Value: "test.count"}}
	assert.Equal(t, uint64(40), rec.Counter(telemetry.MetricMigrationRows, label...))
	assert.Equal(t, uint64(28), rec.Counter(telemetry.MetricMigrationRowsRewritten, label...))
	assert.Equal(t, uint64(4), rec.Counter(telemetry.MetricMigrationRowsLeft, label...))
	assert.Equal(t, uint64(4), rec.Counter(telemetry.MetricMigrationPages, label...))
	assert.Equal(t, uint64(8), rec.Counter(telemetry.MetricMigrationConflicts, label...))
	assert.Equal(t, uint64(4), rec.Counter(telemetry.MetricMigrationPartitions, label...))
	done, _ := rec.GaugeValue(telemetry.MetricMigrationDone, label...)
	assert.Equal(t, 1.0, done)

	// Done is done: another run steps nothing; Rerun starts again.
	rep, err = r.Run(t.Context(), m)
	require.NoError(t, err)
	assert.Zero(t, rep.Pages)
	assert.Len(t, m.steps(), 4)
	clk.Advance(time.Minute)
	rep, err = r.Rerun(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 2, 3, 0, 1, 2, 3}, m.steps())
	assert.Equal(t, uint64(40), rep.Checkpoint.Rows, "the totals start again")
	assert.Equal(t, t0.Add(time.Minute), rep.Checkpoint.Started.UTC())
}

// normalize puts a checkpoint's times in UTC, for comparisons.
func normalize(c evolve.Checkpoint) evolve.Checkpoint {
	for _, t := range []*time.Time{&c.Started, &c.Updated, &c.Done, &c.LeaseUntil} {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	return c
}

// A page that fails stops the run: the checkpoint keeps the pages before
// it and the error, the lease is released, and the next run, by another
// runner at once, resumes at the failed page.
func TestRunnerResumesAfterAFailedPage(t *testing.T) {
	l := openLayer(t, memengine.New())
	clk := clock.NewManual(t0)
	m := newCounter("test.resume", 5)
	m.fail = 3
	_, err := newRunner(t, l, "first", clk).Run(t.Context(), m)
	require.ErrorIs(t, err, errPage)
	cp, _, err := evolve.Progress(t.Context(), l, "test.resume")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), cp.Pages)
	assert.False(t, cp.IsDone())
	assert.False(t, cp.Held(t0), "the lease is released")
	assert.Equal(t, "first", cp.Owner)
	assert.Contains(t, cp.LastError, "the page failed")

	m.fail = -1
	rep, err := newRunner(t, l, "second", clk).Run(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 2, 3, 3, 4}, m.steps(), "the failed page runs again, the others do not")
	assert.Equal(t, 2, rep.Pages)
	assert.Equal(t, uint64(5), rep.Checkpoint.Pages)
	assert.Empty(t, rep.Checkpoint.LastError)
	assert.Equal(t, "second", rep.Checkpoint.Owner)
}

// A runner that dies holds its lease: another runner is refused, naming
// the owner and until when, until the lease lapses; then it takes the
// migration over where the dead one stopped. A runner of the same Owner
// (the process restarted) takes it over at once.
func TestRunnerWaitsForADeadRunnersLease(t *testing.T) {
	for _, sameOwner := range []bool{false, true} {
		t.Run(map[bool]string{false: "another owner", true: "same owner"}[sameOwner], func(t *testing.T) {
			l := openLayer(t, memengine.New())
			f := storetest.NewFaults(l)
			clk := clock.NewManual(t0)
			m := newCounter("test.dead", 6)
			// "Kill" the first runner between its third page and that
			// page's checkpoint: from that checkpoint on, none of its
			// writes lands.
			writes := 0
			f.FailWhen(storetest.MethodApply, func(c storetest.Call) bool {
				if c.Partition != evolve.Partition {
					return false
				}
				writes++
				return writes >= 4 // the claim, two checkpoints, then this one
			}, nil)
			_, err := newRunner(t, f, "dead", clk, func(c *evolve.RunnerConfig) { c.Lease = time.Minute }).Run(t.Context(), m)
			require.ErrorIs(t, err, storetest.ErrInjected)
			f.Clear()
			owner := "next"
			if sameOwner {
				owner = "dead"
			}
			next := newRunner(t, f, owner, clk)
			if !sameOwner {
				_, err = next.Run(t.Context(), m)
				var le *evolve.LeaseError
				require.ErrorAs(t, err, &le)
				require.ErrorIs(t, err, evolve.ErrLeased)
				assert.Equal(t, "dead", le.Owner)
				assert.Equal(t, t0.Add(time.Minute), le.Until.UTC())
				assert.Contains(t, err.Error(), `migration "test.dead" is held by dead, until 2026-03-01T12:01:00Z`)
				clk.Advance(time.Minute + time.Millisecond)
			}
			rep, err := next.Run(t.Context(), m)
			require.NoError(t, err)
			assert.Equal(t, []uint32{0, 1, 2, 2, 3, 4, 5}, m.steps(), "the page whose checkpoint was lost runs again")
			assert.Equal(t, uint64(6), rep.Checkpoint.Pages)
			assert.True(t, rep.Checkpoint.IsDone())
		})
	}
}

// Two runners racing on one migration: one advances it, the other stops
// with a *LeaseError naming it; nothing is stepped twice by both, beyond
// the page in flight when the loser learned it lost.
func TestTwoRunnersRacingOneAdvances(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			l := openLayer(t, e.open(t))
			m := newCounter("test.race", 50)
			// The pages wait until one runner lost: the winner cannot
			// finish before the other tried.
			m.block = make(chan struct{})
			start := make(chan struct{})
			type result struct {
				rep evolve.Report
				err error
			}
			results := make(chan result, 2)
			var wg sync.WaitGroup
			for _, owner := range []string{"a", "b"} {
				r := newRunner(t, l, owner, clock.NewManual(t0))
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					rep, err := r.Run(context.Background(), m)
					results <- result{rep, err}
				}()
			}
			close(start)
			first := <-results
			close(m.block)
			wg.Wait()
			close(results)
			var won, lost int
			for _, res := range append([]result{first}, <-results) {
				switch {
				case res.err == nil:
					won++
					assert.True(t, res.rep.Checkpoint.IsDone())
				default:
					lost++
					var le *evolve.LeaseError
					require.ErrorAs(t, res.err, &le)
					assert.Contains(t, []string{"a", "b"}, le.Owner)
				}
			}
			assert.Equal(t, 1, won)
			assert.Equal(t, 1, lost)
			cp, _, err := evolve.Progress(t.Context(), l, "test.race")
			require.NoError(t, err)
			assert.Equal(t, uint64(50), cp.Pages, "every page checkpointed once")
			steps := m.steps()
			assert.LessOrEqual(t, len(steps), 51, "the loser stepped at most one page")
		})
	}
}

// A runner whose lease lapsed during a slow page, and whose migration
// another runner took over, stops at its next checkpoint with a
// *LeaseError (Lost) naming the other, writing nothing over it.
func TestARunnerThatLostItsLeaseStops(t *testing.T) {
	l := openLayer(t, memengine.New())
	clk := clock.NewManual(t0)
	slow := newCounter("test.lost", 3)
	slow.block = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := newRunner(t, l, "slow", clk, func(c *evolve.RunnerConfig) { c.Lease = time.Second }).Run(context.Background(), slow)
		done <- err
	}()
	// Wait for the slow runner's claim, then let its lease lapse and
	// another runner finish the migration.
	require.Eventually(t, func() bool {
		cp, ok, _ := evolve.Progress(context.Background(), l, "test.lost")
		return ok && cp.Owner == "slow"
	}, 5*time.Second, time.Millisecond)
	clk.Advance(2 * time.Second)
	fast := newCounter("test.lost", 3)
	rep, err := newRunner(t, l, "fast", clk).Run(t.Context(), fast)
	require.NoError(t, err)
	require.True(t, rep.Checkpoint.IsDone())
	close(slow.block)
	err = <-done
	var le *evolve.LeaseError
	require.ErrorAs(t, err, &le)
	assert.True(t, le.Lost)
	assert.Equal(t, "fast", le.Owner)
	assert.Contains(t, err.Error(), "was taken over by fast")
	cp, _, err := evolve.Progress(t.Context(), l, "test.lost")
	require.NoError(t, err)
	assert.Equal(t, "fast", cp.Owner)
	assert.Equal(t, uint64(3), cp.Pages)
}

// A cancelled run stops before its next page, records why and releases
// its lease; the next run resumes.
func TestRunnerStopsWhenCancelled(t *testing.T) {
	l := openLayer(t, memengine.New())
	clk := clock.NewManual(t0)
	m := newCounter("test.cancel", 10)
	ctx, cancel := context.WithCancel(t.Context())
	m.block = make(chan struct{}, 10)
	m.block <- struct{}{}
	m.block <- struct{}{}
	go func() {
		require.Eventually(t, func() bool { return len(m.steps()) == 2 }, 5*time.Second, time.Millisecond)
		cancel()
	}()
	_, err := newRunner(t, l, "x", clk).Run(ctx, m)
	require.ErrorIs(t, err, context.Canceled)
	cp, _, err := evolve.Progress(t.Context(), l, "test.cancel")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), cp.Pages)
	assert.False(t, cp.Held(t0))
	assert.Contains(t, cp.LastError, "context canceled")
	m.block = nil
	rep, err := newRunner(t, l, "y", clk).Run(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, uint64(10), rep.Checkpoint.Pages)
}

// A checkpoint write whose commit landed but whose result was lost is
// settled by reading it back: the run goes on, and no page runs twice.
func TestRunnerSettlesAnUnknownCheckpointWrite(t *testing.T) {
	l := openLayer(t, memengine.New())
	f := storetest.NewFaults(l)
	n := 0
	f.CommitThenFailWhen(func(c storetest.Call) bool {
		n++
		return c.Partition == evolve.Partition && n%2 == 0
	})
	m := newCounter("test.unknown", 6)
	rep, err := newRunner(t, f, "x", clock.NewManual(t0)).Run(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 2, 3, 4, 5}, m.steps())
	assert.Equal(t, uint64(6), rep.Checkpoint.Pages)
}

// What a runner refuses: bad configuration, a nil migration, a name or
// cursor out of bounds, and a corrupt checkpoint, which it never
// overwrites.
func TestRunnerRefuses(t *testing.T) {
	l := openLayer(t, memengine.New())
	for _, cfg := range []evolve.RunnerConfig{
		{Owner: strings.Repeat("o", evolve.MaxOwnerBytes+1)},
		{Lease: -time.Second},
		{Lease: time.Microsecond},
	} {
		_, err := evolve.NewRunner(l, cfg)
		require.ErrorIs(t, err, store.ErrInvalid, "%+v", cfg)
	}
	_, err := evolve.NewRunner(nil, evolve.RunnerConfig{})
	require.ErrorIs(t, err, store.ErrInvalid)

	r := newRunner(t, l, "x", clock.NewManual(t0))
	_, err = r.Run(t.Context(), nil)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = r.Run(t.Context(), newCounter("", 1))
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = r.Run(t.Context(), newCounter(strings.Repeat("n", evolve.MaxNameBytes+1), 1))
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = r.Run(t.Context(), bigCursor{})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "a cursor of 16385 bytes")

	key, err := gen.AppendMigrationKey(nil, "test.corrupt")
	require.NoError(t, err)
	mustApply(t, l, evolve.Partition, store.NewBatch().Put(key, store.Value{0x01, 0xff}))
	_, err = r.Run(t.Context(), newCounter("test.corrupt", 1))
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, err = evolve.Migrations(t.Context(), l)
	require.ErrorIs(t, err, store.ErrCorrupt)
	v, _, err := l.Get(t.Context(), evolve.Partition, key)
	require.NoError(t, err)
	require.Equal(t, store.Value{0x01, 0xff}, v, "never overwritten")

	// A checkpoint a newer binary wrote (version 2) is not corrupt, and
	// not overwritten either.
	newer, err := gen.AppendMigrationKey(nil, "test.newer")
	require.NoError(t, err)
	mustApply(t, l, evolve.Partition, store.NewBatch().Put(newer, store.Value{0x02, 0x00}))
	_, err = r.Run(t.Context(), newCounter("test.newer", 1))
	require.ErrorIs(t, err, store.ErrNewerVersion)
	require.NotErrorIs(t, err, store.ErrCorrupt)
	v, _, err = l.Get(t.Context(), evolve.Partition, newer)
	require.NoError(t, err)
	require.Equal(t, store.Value{0x02, 0x00}, v, "never overwritten")
}

type bigCursor struct{}

func (bigCursor) Name() string { return "test.big" }
func (bigCursor) Step(context.Context, []byte) ([]byte, evolve.Page, error) {
	return make([]byte, evolve.MaxCursorBytes+1), evolve.Page{}, nil
}

// Migrations lists every checkpoint by name.
func TestMigrationsListsEveryCheckpoint(t *testing.T) {
	l := openLayer(t, memengine.New())
	r := newRunner(t, l, "x", clock.NewManual(t0))
	for _, name := range []string{"b.two", "a.one"} {
		_, err := r.Run(t.Context(), newCounter(name, 2))
		require.NoError(t, err)
	}
	cps, err := evolve.Migrations(t.Context(), l)
	require.NoError(t, err)
	require.Len(t, cps, 2)
	assert.Equal(t, "a.one", cps[0].Name)
	assert.Equal(t, "b.two", cps[1].Name)
	_, ok, err := evolve.Progress(t.Context(), l, "c.none")
	require.NoError(t, err)
	assert.False(t, ok)
	if errors.Is(err, store.ErrInvalid) {
		t.Fatal(err)
	}
}

// A checkpoint write that fails (the store, not a crash) stops the run,
// which releases its lease and records why: another runner resumes at
// once, running again the page whose checkpoint was lost.
func TestRunnerReleasesItsLeaseWhenACheckpointFails(t *testing.T) {
	l := openLayer(t, memengine.New())
	f := storetest.NewFaults(l)
	clk := clock.NewManual(t0)
	writes := 0
	f.FailWhen(storetest.MethodApply, func(c storetest.Call) bool {
		if c.Partition != evolve.Partition {
			return false
		}
		writes++
		return writes == 3 // the claim, a checkpoint, then this one
	}, nil)
	m := newCounter("test.release", 4)
	_, err := newRunner(t, f, "first", clk, func(c *evolve.RunnerConfig) { c.Lease = time.Hour }).Run(t.Context(), m)
	require.ErrorIs(t, err, storetest.ErrInjected)
	cp, _, err := evolve.Progress(t.Context(), l, "test.release")
	require.NoError(t, err)
	assert.False(t, cp.Held(t0), "released")
	assert.Contains(t, cp.LastError, "injected fault")
	rep, err := newRunner(t, f, "second", clk).Run(t.Context(), m)
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 1, 2, 3}, m.steps())
	assert.True(t, rep.Checkpoint.IsDone())
}
