package timers_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The sequence that lost queued relay rows: a Scheduler claims a source
// partition and fires its relay timer; the relay, finding nothing left,
// returns Done guarded by the outbox sequence; before that outcome lands a
// producer appends a row (the timer exists, so it writes no timer and
// leaves the parked wake time alone); Done fails its guard. The run must
// leave the partition due at the timer's due time, so that the next tick
// fires the relay again and delivers the row.
func TestARacedOutcomeLeavesItsTimerDue(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		seqKey := store.Key("sequence")
		e.apply(t, p, store.NewBatch().Put(seqKey, store.Value("1")))
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "relay", DueAt: now.Add(-10 * time.Millisecond)})

		// The relay stand-in: Done, guarded by the sequence it read.
		var delivered []string
		h := &recorder{kind: kindA, outcome: func(c *timers.Ctx, _ timers.DueTimer) timers.Fired {
			v, _, err := c.Store.Get(context.Background(), c.Partition, seqKey)
			require.NoError(t, err)
			delivered = append(delivered, string(v))
			return timers.Done{Batch: store.NewBatch().Require(store.Equals(seqKey, v))}
		}}
		// The producer appends once, between the fire and its outcome.
		appended := false
		e.faults.BeforeApply(func(_ context.Context, q store.Partition, b *store.Batch) error {
			if appended || len(b.Preconditions) == 0 || string(b.Preconditions[0].Key) != string(seqKey) {
				return nil
			}
			appended = true
			e.apply(t, q, store.NewBatch().Put(seqKey, store.Value("2")))
			return nil
		})
		s := e.scheduler(t, "me", registry(t, h), nil)

		rep := e.tick(t, s) // checks the due index invariant too
		assert.Equal(t, 1, rep.Timers.Raced)
		w, ok := e.wake(t, p)
		require.True(t, ok, "the raced timer keeps its partition in the due index")
		assert.LessOrEqual(t, w, now.Add(-10*time.Millisecond))
		_, leased := e.lease(t, p)
		assert.False(t, leased)

		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired, "the next tick fires the relay again")
		assert.Equal(t, []string{"1", "2"}, delivered, "and it sees the appended row")
		_, ok = e.wake(t, p)
		assert.False(t, ok)
	})
}

// A worker that dies after a timer far ahead was written into the
// partition it was firing (so the parked wake time was lowered, and the
// parked listing no longer sees it) leaves the partition due by its
// lease's expiry: another worker then fires the timer it never finished.
func TestAWorkerDyingAfterATimerWriteLeavesItsPartitionDueAtItsLeaseExpiry(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "due", DueAt: now.Add(-10 * time.Millisecond)})
		dead := false
		h := &recorder{kind: kindA, during: func(c *timers.Ctx, dt timers.DueTimer) {
			if dt.Reference != "due" || dead {
				return
			}
			e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "next-week", DueAt: now.Add(7 * 24 * time.Hour)})
			dead = true // from here on, every call of the worker fails
		}}
		e.faults.FailWhen(storetest.MethodApply, func(storetest.Call) bool { return dead }, nil)
		e.faults.FailWhen(storetest.MethodNextWake, func(storetest.Call) bool { return dead }, nil)
		a := e.scheduler(t, "a", registry(t, h), nil)
		_, err := a.Tick(e.ctx)
		require.Error(t, err, "the worker died")
		e.checkDueIndex(t)
		w, _ := e.wake(t, p)
		leaseEnd := now.Add(leaseDuration)
		assert.Equal(t, leaseEnd, w, "lowered to the lease's expiry, not to next week")

		e.faults.Clear()
		b := e.scheduler(t, "b", registry(t, h), nil)
		e.clock.Set(leaseEnd)
		rep := e.tick(t, b)
		assert.Equal(t, 1, rep.Recovered)
		assert.Equal(t, 1, rep.Timers.Fired, "the unfinished timer fires")
		w, _ = e.wake(t, p)
		assert.Equal(t, now.Add(7*24*time.Hour), w)
	})
}
