package timers_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// countCommits counts, on e's faults wrapper, the calls that write: an
// Apply, a Commit, or a TransactOnce or TransactManyOnce whose function
// returned something to write.
func countCommits(e *schedEnv) *atomic.Int64 {
	var n atomic.Int64
	count := func(c storetest.Call) bool {
		if c.Batch != nil && (c.Batch.Ops() > 0 || c.Batch.Wakeup != nil) || len(c.Batches) > 0 {
			if c.Partition != timers.MembersPartition {
				n.Add(1)
			}
		}
		return false
	}
	for _, m := range []storetest.Method{storetest.MethodApply, storetest.MethodCommit, storetest.MethodTransact, storetest.MethodTransactMany} {
		e.faults.FailWhen(m, count, nil)
	}
	return &n
}

// TestBatchedClaimsShareCommits: one worker fires 40 partitions of one
// due timer each in claims of 16, 16 and 8 partitions and as many shared
// commits of their outcomes and releases: 6 commits where one partition
// at a time takes 80. Each timer fires once, and the due index invariant
// holds.
func TestBatchedClaimsShareCommits(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		const n = 40
		for i := range n {
			e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		}
		commits := countCommits(e)
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) { c.Workers = 1 })
		rep := e.tick(t, s)
		assert.Equal(t, n, rep.Claimed)
		assert.Equal(t, n, rep.Timers.Fired)
		assert.Len(t, h.seen(), n)
		assert.Equal(t, int64(6), commits.Load(), "3 claims and 3 shared commits")
		for i := range n {
			w, ok := e.wake(t, part(i))
			assert.False(t, ok, "%v still wakes at %v", part(i), w)
			_, leased := e.lease(t, part(i))
			assert.False(t, leased)
		}
		assert.Empty(t, h.overlapping(), "the runs of a batch take turns")
	})
}

// TestBatchedClaimsKeepFailuresApart: in a batch, a partition whose
// outcome's guard fails (a writer changed its timer during the fire)
// loses only its own outcome: the others' commit, and it fires again; a
// partition whose claim fails (its scan) fails alone, the batch claiming
// each partition on its own.
func TestBatchedClaimsKeepFailuresApart(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		for i := range 4 {
			e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		}
		// While p001's outcome waits for the shared commit, another
		// writer moves its timer: the outcome's guard fails.
		moved := false
		e.faults.BeforeApply(func(ctx context.Context, p store.Partition, b *store.Batch) error {
			if moved || store.PartitionName(p) != store.PartitionName(part(1)) || !deletes(b, gen.AppendSchedulerLeaseKey(nil)) {
				return nil
			}
			moved = true
			e.schedule(t, part(1), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-2 * time.Millisecond)})
			return nil
		})
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) { c.Workers = 1 })
		rep := e.tick(t, s)
		require.True(t, moved)
		assert.Equal(t, 4, rep.Claimed)
		assert.Equal(t, 3, rep.Timers.Fired, "p001's outcome raced")
		assert.Equal(t, 1, rep.Timers.Raced)

		// p001 is due again; now p002's claim fails to read its timers.
		e.schedule(t, part(2), timers.Timer{Kind: kindA, Reference: "again", DueAt: now.Add(-time.Millisecond)})
		e.faults.Clear()
		e.faults.FailWhen(storetest.MethodScan, func(c storetest.Call) bool {
			return store.PartitionName(c.Partition) == store.PartitionName(part(2))
		}, nil)
		rep, err := s.Tick(e.ctx)
		require.ErrorIs(t, err, storetest.ErrInjected)
		e.checkDueIndex(t)
		assert.Equal(t, 1, rep.Errors, "p002 alone")
		assert.Equal(t, 1, rep.Claimed, "p001")
		assert.Equal(t, 1, rep.Timers.Fired)
		e.faults.Clear()
		e.clock.Set(now.Add(timers.RetryBackoff))
		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired, "p002, after its backoff")
	})
}

// TestBatchedClaimsDroppedReleaseCaught: a shared commit that drops a
// partition's wake change from its release leaves that partition parked
// without a lease, which the due index invariant check catches: the
// checks this package's tests and the models run bite on claims in
// batches.
func TestBatchedClaimsDroppedReleaseCaught(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		restore := timers.DropReleaseOfLast()
		defer restore()
		var ps []store.Partition
		for i := range 3 {
			ps = append(ps, part(i))
			e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		}
		s := e.scheduler(t, "me", registry(t, &recorder{kind: kindA}), func(c *timers.SchedulerConfig) { c.Workers = 1 })
		_, err := s.Tick(e.ctx)
		require.NoError(t, err)
		err = timerstest.CheckDueIndex(e.ctx, e.layer, ps)
		require.Error(t, err, "a release dropped from a shared commit")
		assert.Contains(t, err.Error(), "parked without a scheduler lease")
		e.exempt(ps...)
	})
}

// TestClaimBatchValidated: a negative ClaimBatch is invalid.
func TestClaimBatchValidated(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		_, err := timers.NewScheduler(timers.SchedulerConfig{Store: e.faults, Registry: registry(t), ClaimBatch: -1})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Contains(t, err.Error(), "ClaimBatch")
	})
}
