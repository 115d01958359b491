package relay_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Reference: a target whose apply fails is blocked for the rest of the
// cycle, its rows kept; the other targets proceed; the next cycle starts
// from the head with nothing blocked and delivers it.
func TestFailedTargetIsBlockedWhileOthersProceedAndUnblockedNextCycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		var rows []row
		for i := range 6 {
			rows = append(rows, put(ta, "k", fmt.Sprint("a", i)), put(tb, "k", fmt.Sprint("b", i)))
		}
		e.queue(t, rows...) // ta: 1,3,5,7,9,11; tb: 2,4,...,12
		e.target.FailWhen(applyMethod, isApplyTo(tb), nil)
		applies := countApplies(e.target)

		// Fire 1 (window: rows 1..4): ta delivered, tb blocked.
		rep := e.step(t)
		require.Equal(t, 1, rep.Fired)
		assert.Equal(t, gen.RelayScanV1{CycleEnd: 12, Cursor: 4, Blocked: ids(tb)}, e.scanState(t))
		assert.Equal(t, []uint64{2, 4, 5, 6, 7, 8, 9, 10, 11, 12}, e.queued(t))
		assert.Contains(t, e.logs.String(), "relay target apply failed")
		tbApplies := applies()

		// Fires 2 to 4 finish the cycle without trying tb again (the
		// window of fire 2 starts at the cursor's row, 4, still queued).
		e.step(t)
		e.step(t)
		assert.Equal(t, uint64(11), e.scanState(t).Cursor)
		e.step(t)
		assert.Equal(t, []uint64{2, 4, 6, 8, 10, 12}, e.queued(t))
		assert.Equal(t, "a5", e.get(t, ta, "k"))
		assert.Equal(t, tbApplies+2, applies(), "two ta batches, no tb apply")
		st := e.scanState(t)
		assert.Equal(t, st.CycleEnd, st.Cursor, "the cycle is over")
		assert.Equal(t, ids(tb), st.Blocked)
		due, ok := e.timerDue(t)
		require.True(t, ok, "blocked rows keep the timer")
		assert.Equal(t, e.now().Add(timers.RetryBackoff), due, "fire 4 delivered nothing: it backs off")

		// The next cycle starts from the head, nothing blocked.
		e.target.Clear()
		assert.Equal(t, 2, e.drain(t, 10))
		assert.Empty(t, e.queued(t))
		assert.Equal(t, "b5", e.get(t, tb, "k"))
		e.requireAppliedOnce(t, tb, 2, 4, 6, 8, 10, 12)
		e.requireAppliedOnce(t, ta, 1, 3, 5, 7, 9, 11)
	}, withBudget(relay.Budget{MaxRows: 1}))
}

// Reference: a fire that delivers nothing (every target blocked) waits
// RetryBackoff.
func TestFireThatDeliversNothingBacksOff(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "v"))
		e.target.FailWhen(storetest.MethodGet, nil, nil)
		e.run(t)
		due, ok := e.timerDue(t)
		require.True(t, ok)
		assert.Equal(t, e.now().Add(timers.RetryBackoff), due)
		assert.Contains(t, e.logs.String(), "relay watermark read failed")
		assert.Equal(t, ids(ta), e.scanState(t).Blocked)
		assert.Equal(t, []uint64{1}, e.queued(t))
	})
}

// Reference: at MAX_BLOCKED_TARGETS the fire stops at the first row of the
// target that would pass the cap, keeps it, and ends the cycle; the next
// fire restarts from the head with an empty blocked set; nothing is lost.
func TestBlockedTargetCapEndsTheCycleAndLosesNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		bad := func(i int) store.Partition {
			return refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("bad%02d", i))}
		}
		var rows []row
		for i := range relay.MaxBlockedTargets + 2 {
			rows = append(rows, put(bad(i), "k", "v"))
		}
		rows = append(rows, put(ta, "k", "a"))
		e.queue(t, rows...)
		failBad := func(c storetest.Call) bool {
			// The relay addresses its targets by identity: parse it.
			p, err := refdomain.ParsePartition(ids(c.Partition)[0])
			ns, ok := p.(refdomain.NamespacePartition)
			return isApply(c) && err == nil && ok && strings.HasPrefix(ns.NS.String(), "bad")
		}
		e.target.FailWhen(applyMethod, failBad, nil)

		rep := e.run(t)
		require.Equal(t, 1, rep.Fired)
		st := e.scanState(t)
		require.Len(t, st.Blocked, relay.MaxBlockedTargets)
		assert.Equal(t, st.CycleEnd, st.Cursor, "the cap ends the cycle")
		assert.Len(t, e.queued(t), relay.MaxBlockedTargets+3, "every row kept")
		_, ok := e.timerDue(t)
		require.True(t, ok)

		// While the targets keep failing, each fire restarts from the head
		// and stops at the cap again: no row is ever skipped.
		e.step(t)
		st = e.scanState(t)
		assert.Len(t, st.Blocked, relay.MaxBlockedTargets)
		assert.Len(t, e.queued(t), relay.MaxBlockedTargets+3)
		assert.Equal(t, "", e.get(t, ta, "k"), "ta's row lies past the cap")

		e.target.Clear()
		e.drain(t, 5)
		assert.Empty(t, e.queued(t))
		for i := range relay.MaxBlockedTargets + 2 {
			assert.Equal(t, "v", e.get(t, bad(i), "k"))
		}
		assert.Equal(t, "a", e.get(t, ta, "k"))
	})
}

// Reference: a row too large for one target batch is never split: its
// target stalls, with the reason logged, and the other targets proceed.
func TestRowTooLargeForOneTargetBatchStallsItsTarget(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		big := row{target: ta}
		for i := range 20 {
			big.puts = append(big.puts, gen.RelayPut{Key: []byte{'k', byte(i)}, Value: []byte("v")})
		}
		e.queue(t, big, put(ta, "after", "x"), put(tb, "k", "b"))

		e.run(t)
		assert.Contains(t, e.logs.String(), "relay row cannot fit one target batch; delivery to this target is stalled")
		assert.Equal(t, "b", e.get(t, tb, "k"), "other targets proceed")
		assert.Equal(t, "", e.get(t, ta, "after"), "rows after the stalled one wait")
		assert.Equal(t, []uint64{1, 2}, e.queued(t))
		assert.Equal(t, ids(ta), e.scanState(t).Blocked)
		for range 3 {
			e.step(t)
		}
		assert.Equal(t, []uint64{1, 2}, e.queued(t), "stalled cycle after cycle, never split")
		assert.Equal(t, uint64(0), e.highWater(t, ta))
	}, withTargetStore(fdblayer.Config{MaxBatchOps: 10}))
}

// A row whose single write breaks a per-row target limit (a key longer
// than the target store allows) stalls its target the same way.
func TestRowOverATargetKeyLimitStallsItsTarget(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		long := strings.Repeat("k", 2_000) // within the source's limit
		e.queue(t, put(ta, long, "v"), put(tb, "k", "b"))
		require.Less(t, e.tinner.Capabilities().MaxKeyBytes, len(long))

		e.run(t)
		assert.Contains(t, e.logs.String(), "delivery to this target is stalled")
		assert.Equal(t, "b", e.get(t, tb, "k"))
		assert.Equal(t, []uint64{1}, e.queued(t))
		assert.Equal(t, ids(ta), e.scanState(t).Blocked)
	}, withTargetStore(fdblayer.Config{MaxPartitionBytes: 9_000}))
}
