package timers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// countApplies counts e's Apply calls with something to write.
func countApplies(e *env) *int {
	n := new(int)
	e.faults.FailWhen(storetest.MethodApply, func(c storetest.Call) bool {
		if c.Batch != nil && c.Batch.Ops() > 0 {
			*n++
		}
		return false
	}, nil)
	return n
}

// A page of 64 due timers commits its outcomes in as few batches as the
// store's 100 operations allow (each Done is 4), where each once took a
// commit of its own.
func TestAPagesOutcomesCommitTogether(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		for i := range 64 {
			e.schedule(t, timers.Timer{Kind: kindA, Reference: fmt.Sprintf("t%02d", i), DueAt: now.Add(-time.Millisecond)})
		}
		applies := countApplies(e)
		h := &handler{kind: kindA, fire: done}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 64, rep.Fired)
		assert.Equal(t, 3, *applies, "64 outcomes of 4 operations in batches of at most 100")
		rows, _ := e.timersIn(t)
		assert.Empty(t, rows)
	})
}

// A later timer's guard on a key an earlier timer of the same batch
// writes is decided against that write: one that the write satisfies
// joins the batch (the store would have checked it against the state
// before the write), one that it breaks goes to the next batch, fails
// there as it would have in sequence, and only that timer stays due.
func TestGuardsOnKeysAnEarlierOutcomeWritesAreDecidedAgainstTheWrite(t *testing.T) {
	x, y := store.Key("x"), store.Key("y")
	forEachEngine(t, now, func(t *testing.T, e *env) {
		e.apply(t, store.NewBatch().Put(y, store.Value("old")))
		for i, ref := range []string{"a-deletes-x", "b-requires-x-absent", "c-puts-y", "d-requires-y-new", "e-requires-y-old", "f-independent"} {
			e.schedule(t, timers.Timer{Kind: kindA, Reference: ref, DueAt: now.Add(time.Duration(i-10) * time.Millisecond)})
		}
		e.apply(t, store.NewBatch().Put(x, store.Value("here")))
		applies := countApplies(e)
		h := &handler{kind: kindA, fire: func(_ context.Context, _ *timers.Ctx, dt timers.DueTimer) (timers.Fired, error) {
			b := store.NewBatch().Put(store.Key("done/"+dt.Reference), nil)
			switch dt.Reference {
			case "a-deletes-x":
				b.Delete(x)
			case "b-requires-x-absent":
				b.Require(store.Absent(x))
			case "c-puts-y":
				b.Put(y, store.Value("new"))
			case "d-requires-y-new":
				b.Require(store.Equals(y, store.Value("new")))
			case "e-requires-y-old":
				b.Require(store.Equals(y, store.Value("old"))) // what it read: c's write breaks it
			}
			return timers.Done{Batch: b}, nil
		}}
		rep := e.run(t, registry(t, h), timers.RunConfig{})
		assert.Equal(t, 5, rep.Fired)
		assert.Equal(t, 1, rep.Raced)
		assert.Equal(t, 3, *applies, "a to d in one batch; e with f, failing for e; f again without it")
		rows, _ := e.timersIn(t)
		require.Len(t, rows, 1)
		assert.Equal(t, "e-requires-y-old", rows[0].Reference)
		assert.Equal(t, now.Add(-6*time.Millisecond), rep.NextDue, "the raced timer stays due (e, scheduled 4th)")
	})
}

// Before a handler fires, the outcomes of other kinds' timers commit, so
// that it reads them: kinds meet through the rows their batches write.
func TestAHandlerSeesTheOutcomesOfOtherKinds(t *testing.T) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		key := store.Key("queued")
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "a1", DueAt: now.Add(-3 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindA, Reference: "a2", DueAt: now.Add(-3 * time.Millisecond)})
		e.schedule(t, timers.Timer{Kind: kindB, Reference: "b", DueAt: now.Add(-2 * time.Millisecond)})
		applies := countApplies(e)
		a := &handler{kind: kindA, fire: func(context.Context, *timers.Ctx, timers.DueTimer) (timers.Fired, error) {
			return timers.Done{Batch: store.NewBatch().Put(key, store.Value("by a"))}, nil
		}}
		var seen store.Value
		b := &handler{kind: kindB, fire: func(ctx context.Context, c *timers.Ctx, _ timers.DueTimer) (timers.Fired, error) {
			v, _, err := c.Store.Get(ctx, c.Partition, key)
			seen = v
			return timers.Done{Batch: store.NewBatch().Require(store.Equals(key, v))}, err
		}}
		rep := e.run(t, registry(t, a, b), timers.RunConfig{})
		assert.Equal(t, 3, rep.Fired)
		assert.Equal(t, store.Value("by a"), seen)
		assert.Equal(t, 2, *applies, "kind A's two outcomes together, then kind B's")
	})
}
