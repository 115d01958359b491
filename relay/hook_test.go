package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// indexKeys names, per row, the target keys "idx/<put key>/<i>" for i <
// perRow.
func indexKeys(perRow int) func(store.Partition, []relay.Row) ([]store.Key, error) {
	return func(_ store.Partition, rows []relay.Row) ([]store.Key, error) {
		var keys []store.Key
		for _, r := range rows {
			for i := range perRow {
				keys = append(keys, store.Key(fmt.Sprintf("idx/%s/%d", r.Record.Puts[0].Key, i)))
			}
		}
		return keys, nil
	}
}

// Reference: the hook's read keys are read with the high-water key in one
// snapshot (the mark first, then the keys sorted, duplicates once) and
// handed to BeforeApply, whose additions land atomically with the batch.
func TestHookSeesItsReadKeysInOneSnapshotWithTheMark(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "b", "1"), put(ta, "a", "2"))
		e.apply(t, ta, store.NewBatch().Put(store.Key("idx/a/0"), store.Value("seen")))
		e.audit.readKeys = func(_ store.Partition, rows []relay.Row) ([]store.Key, error) {
			keys := []store.Key{hwKey(t)} // the mark counts once
			for _, r := range rows {
				keys = append(keys, store.Key("idx/"+string(r.Record.Puts[0].Key)+"/0"), store.Key("idx/a/0"))
			}
			return keys, nil
		}
		e.audit.beforeApply = func(_ store.Partition, _ []relay.Row, observed []store.KeyValue, b *store.Batch) error {
			b.Put(store.Key("hook"), store.Value(fmt.Sprint(len(observed))))
			return nil
		}
		gets := e.target.Calls(storetest.MethodGetMany)

		e.run(t)
		assert.Equal(t, 1, e.target.Calls(storetest.MethodGetMany)-gets, "one snapshot")
		calls := e.audit.applyCalls()
		require.Len(t, calls, 1)
		assert.Equal(t, []store.KeyValue{
			{Key: hwKey(t), Value: nil},
			{Key: store.Key("idx/a/0"), Value: store.Value("seen")},
			{Key: store.Key("idx/b/0"), Value: nil},
		}, calls[0].observed)
		assert.Equal(t, "3", e.get(t, ta, "hook"), "the hook's write landed")
		assert.Equal(t, uint64(2), e.highWater(t, ta))
	})
}

// Reference: more than MaxHookReadKeys keys (the mark included) halve the
// rows of the batch; a single row over the cap blocks its target.
func TestHookReadKeysOverTheCapHalveTheRows(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		var rows []row
		for i := range 4 {
			rows = append(rows, put(ta, fmt.Sprint("k", i), "v"))
		}
		rows = append(rows, put(tb, "lone", "v"))
		e.queue(t, rows...)
		var mu sync.Mutex
		asked := map[string][]int{} // by target: the targets are delivered concurrently
		perRow := map[string]int{string(ids(ta)[0]): 3, string(ids(tb)[0]): relay.MaxHookReadKeys}
		e.audit.readKeys = func(target store.Partition, rows []relay.Row) ([]store.Key, error) {
			mu.Lock()
			asked[string(ids(target)[0])] = append(asked[string(ids(target)[0])], len(rows))
			mu.Unlock()
			return indexKeys(perRow[string(ids(target)[0])])(target, rows)
		}

		e.run(t)
		// ta: 4 rows need 12+1 keys, 2 rows 6+1; tb's one row 9+1.
		assert.Equal(t, map[string][]int{string(ids(ta)[0]): {4, 2, 2}, string(ids(tb)[0]): {1}}, asked)
		var batches [][]uint64
		for _, c := range e.audit.applyCalls() {
			batches = append(batches, c.seqs)
		}
		assert.Equal(t, [][]uint64{{1, 2}, {3, 4}}, batches)
		assert.Equal(t, ids(tb), e.scanState(t).Blocked)
		assert.Contains(t, e.logs.String(), "relay hook needs too many read keys for one row")
		assert.Equal(t, []uint64{5}, e.queued(t))
	})
}

// Reference: ErrHookCapacity from BeforeApply halves the rows of the
// batch; for a single row it blocks the target, like any hook error.
func TestHookCapacityHalvesTheBatch(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "1"), put(ta, "k", "2"), put(ta, "k", "3"), put(tb, "k", "4"))
		e.audit.beforeApply = func(target store.Partition, rows []relay.Row, _ []store.KeyValue, _ *store.Batch) error {
			if same(target, tb) || len(rows) > 1 {
				return fmt.Errorf("audit table full: %w", relay.ErrHookCapacity)
			}
			return nil
		}

		e.run(t)
		var batches [][]uint64
		for _, c := range e.audit.applyCalls() {
			if same(c.target, ta) {
				batches = append(batches, c.seqs)
			}
		}
		assert.Equal(t, [][]uint64{{1, 2, 3}, {1}, {2, 3}, {2}, {3}}, batches, "asked with halves; applied one row a batch")
		e.requireAppliedOnce(t, ta, 1, 2, 3)
		assert.Equal(t, ids(tb), e.scanState(t).Blocked)
		assert.Contains(t, e.logs.String(), "relay hook failed")
	})
}

// padHook adds pad puts to every batch and reserves reserved operations.
type padHook struct {
	relay.NoHook
	pad, reserved int
	mu            sync.Mutex
	sizes         []int
}

func (h *padHook) BeforeApply(_ context.Context, _ store.Partition, rows []relay.Row, _ []store.KeyValue, b *store.Batch) error {
	h.mu.Lock()
	h.sizes = append(h.sizes, len(rows))
	h.mu.Unlock()
	for i := range h.pad {
		b.Put(store.Key(fmt.Sprint("pad", i)), store.Value("p"))
	}
	return nil
}

func (h *padHook) ReservedOps(store.Partition, []relay.Row) int { return h.reserved }

// Reference: a batch the hook's additions (or its reserved operations)
// make invalid is retried with half the rows rather than stalling rows
// that fit on their own.
func TestInvalidHookedBatchHalvesTheRows(t *testing.T) {
	tests := []struct {
		name          string
		pad, reserved int
		wantAttempted []int
	}{
		// 24 rows of 4 puts are 96 writes, 98 operations with the mark.
		{"additions", 10, 0, []int{24, 12, 12}},
		{"reserved operations", 0, 50, []int{24, 12, 12}},
		{"reserved beyond any row", 0, 99, []int{24, 12, 6, 3, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				hook := &padHook{pad: tt.pad, reserved: tt.reserved}
				e.configure(t, func(c *relay.HandlerConfig) { c.Hook = hook })
				e.queue(t, repeat(24, put(ta, "a", "1", "b", "2", "c", "3", "d", "4"))...)
				e.run(t)
				assert.Equal(t, tt.wantAttempted, hook.sizes)
				if tt.reserved < 99 {
					assert.Equal(t, uint64(24), e.highWater(t, ta))
					assert.Empty(t, e.queued(t))
				} else {
					assert.Contains(t, e.logs.String(), "relay target batch invalid")
					assert.Equal(t, ids(ta), e.scanState(t).Blocked)
				}
			})
		})
	}
}

// Reference: a hook error blocks the target for the rest of the cycle; the
// other targets proceed.
func TestHookErrorBlocksItsTarget(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		set  func(h *auditHook)
		log  string
	}{
		{"ReadKeys", func(h *auditHook) {
			h.readKeys = func(target store.Partition, _ []relay.Row) ([]store.Key, error) {
				if same(target, ta) {
					return nil, boom
				}
				return nil, nil
			}
		}, "relay hook read keys failed"},
		{"BeforeApply", func(h *auditHook) {
			h.beforeApply = func(target store.Partition, _ []relay.Row, _ []store.KeyValue, _ *store.Batch) error {
				if same(target, ta) {
					return boom
				}
				return nil
			}
		}, "relay hook failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				tt.set(e.audit)
				e.queue(t, put(ta, "k", "1"), put(tb, "k", "2"))
				e.run(t)
				assert.Contains(t, e.logs.String(), tt.log)
				assert.Equal(t, ids(ta), e.scanState(t).Blocked)
				assert.Equal(t, "2", e.get(t, tb, "k"))
				assert.Equal(t, []uint64{1}, e.queued(t))
			})
		})
	}
}
