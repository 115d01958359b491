package bench

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// The baseline applies the batches the relay applies (the target batches
// with their high-water guards and marks, the source deletions with their
// guards and scan states) directly, in the same order, with no relay
// logic: no reads, no decoding, no sizing, no timer. plan computes them
// outside the timed region by simulating the relay's fires on the queued
// rows, and TestBaselineMatchesTheRelaysBatches checks that they are the
// relay's. The simulation covers what the benchmarks do: every target
// reachable in one fire, nothing blocked, no hook, rows of putsPerRow puts.

// step is one Apply of the baseline.
type step struct {
	p store.Partition
	b *store.Batch
}

// plan returns the batches the relay applies in its next fires fires (0:
// until the queue is empty) when each fire reads window rows.
func (f *fixture) plan(tb testing.TB, window, fires int) []step {
	tb.Helper()
	ctx := f.ctx
	seqValue, _, err := f.s.Get(ctx, sourcePartition, store.Key(gen.AppendOutboxSequenceKey(nil)))
	if err != nil {
		tb.Fatal(err)
	}
	seq, err := gen.DecodeU64Value(seqValue)
	if err != nil {
		tb.Fatal(err)
	}
	scanKey := store.Key(gen.AppendRelayScanKey(nil))
	scanValue, _, err := f.s.Get(ctx, sourcePartition, scanKey)
	if err != nil {
		tb.Fatal(err)
	}
	state := gen.RelayScanV1{}
	if scanValue != nil {
		if state, err = gen.DecodeRelayScanV1(scanValue); err != nil {
			tb.Fatal(err)
		}
	}
	srcID, err := sourcePartition.AppendTuple(nil)
	if err != nil {
		tb.Fatal(err)
	}
	rh, err := gen.AppendRelayHighWaterKey(nil, srcID)
	if err != nil {
		tb.Fatal(err)
	}
	marks := map[string]store.Value{} // by target identity
	for _, t := range f.targets {
		id, err := t.AppendTuple(nil)
		if err != nil {
			tb.Fatal(err)
		}
		if marks[string(id)], _, err = f.s.Get(ctx, t, rh); err != nil {
			tb.Fatal(err)
		}
	}
	// The rows the fires can reach, and one more to tell whether a window
	// ends its cycle.
	limit := 1 << 30
	if fires > 0 {
		limit = fires*window + 1
	}
	start, end := gen.ClassRange(gen.TagRelayKey)
	var rows []store.KeyValue
	var after store.Cursor
	for len(rows) < limit {
		page, err := f.s.Scan(ctx, sourcePartition, start, end, after, min(limit-len(rows), 10_000))
		if err != nil {
			tb.Fatal(err)
		}
		rows = append(rows, page.Entries...)
		if after = page.Next; after == nil {
			break
		}
	}
	seqs := make([]uint64, len(rows))
	for i, kv := range rows {
		k, err := gen.ParseRelayKey(kv.Key)
		if err != nil {
			tb.Fatal(err)
		}
		seqs[i] = k.Seq
	}

	caps := f.s.Capabilities()
	perTargetBatch := min(relay.MaxRelayWrites, caps.MaxBatchOps-2) / putsPerRow
	// A checkpoint batch leaves room for what the timer run adds to the
	// last one, which rides on the fire's outcome (see relay's
	// checkpoint): 7 operations.
	perCheckpoint := (caps.MaxBatchOps - caps.ReservedBatchOps - 2 - 7) / 2
	var steps []step
	next := 0 // the first row not yet relayed
	for fire := 0; (fires == 0 || fire < fires) && next < len(rows); fire++ {
		if state.Cursor >= state.CycleEnd {
			state = gen.RelayScanV1{CycleEnd: seq.Value}
		}
		// The window: up to window rows of the cycle. It ends the cycle
		// when no row of the cycle lies past it.
		w := next
		for w < len(rows) && w-next < window && seqs[w] <= state.CycleEnd {
			w++
		}
		win, winSeqs := rows[next:w], seqs[next:w]
		exhausted := w == len(rows) || seqs[w] > state.CycleEnd
		if fires > 0 && w == len(rows) && len(rows) == limit {
			tb.Fatalf("plan: %d rows read cannot tell whether the window ends its cycle", limit)
		}
		next = w

		// Target batches: per target in order of first row, in prefixes,
		// each target addressed by the identity its rows name.
		var order []store.Identity
		groups := map[string][]int{}
		recs := make([]gen.RelayV1, len(win))
		for i, kv := range win {
			if recs[i], err = gen.DecodeRelayV1(kv.Value); err != nil {
				tb.Fatal(err)
			}
			t := string(recs[i].Target)
			if _, ok := groups[t]; !ok {
				id, err := store.ParseIdentity(recs[i].Target)
				if err != nil {
					tb.Fatal(err)
				}
				order = append(order, id)
			}
			groups[t] = append(groups[t], i)
		}
		for _, id := range order {
			t := string(ids(tb, id))
			idx := groups[t]
			for i := 0; i < len(idx); i += perTargetBatch {
				j := min(i+perTargetBatch, len(idx))
				b := store.NewBatch().Require(store.Guard(rh, marks[t]))
				for _, r := range idx[i:j] {
					for _, p := range recs[r].Puts {
						b.Put(p.Key, p.Value)
					}
				}
				mark := u64(tb, winSeqs[idx[j-1]])
				b.Put(rh, mark)
				marks[t] = mark
				steps = append(steps, step{id, b})
			}
		}
		// Checkpoints: every row delivered, split as the source's
		// operation cap needs.
		flush := func(dels []store.KeyValue) {
			encoded, err := gen.EncodeRelayScanV1(state)
			if err != nil {
				tb.Fatal(err)
			}
			b := store.NewBatch().Require(store.Guard(scanKey, scanValue)).Put(scanKey, encoded)
			for _, kv := range dels {
				b.Require(store.Equals(kv.Key, kv.Value)).Delete(kv.Key)
			}
			scanValue = encoded
			steps = append(steps, step{sourcePartition, b})
		}
		var dels []store.KeyValue
		for i, kv := range win {
			if len(dels) == perCheckpoint {
				flush(dels)
				dels = nil
			}
			state.Cursor = winSeqs[i]
			dels = append(dels, kv)
		}
		if exhausted {
			state.Cursor = state.CycleEnd
		}
		flush(dels)
	}
	return steps
}

func u64(tb testing.TB, v uint64) store.Value {
	out, err := gen.EncodeU64Value(gen.U64Value{Value: v})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// applyAll applies the baseline's batches; each must commit.
func (f *fixture) applyAll(tb testing.TB, steps []step) {
	for _, s := range steps {
		out, err := f.s.Apply(f.ctx, s.p, s.b)
		if err != nil || !out.Committed() {
			tb.Fatalf("baseline apply to %s: %v %v", store.PartitionName(s.p), out, err)
		}
	}
}

// The baseline applies exactly the batches the relay applies, on identical
// data: two fixtures fed the same rows, one relayed (its applies
// captured), one planned; as BenchmarkRelayVsBaseline drains the queue and
// as BenchmarkRelayBacklog fires a few times into a longer queue, across
// cycles.
func TestBaselineMatchesTheRelaysBatches(t *testing.T) {
	backlog := benchBudget
	backlog.MaxRows = 50
	tests := []struct {
		name    string
		targets int
		budget  relay.Budget
		initial int // rows queued first
		queue   int // rows queued each round
		fires   int // fires each round (0: until the queue is empty)
		rounds  int
	}{
		{"drain/targets=1", 1, benchBudget, 0, 1_000, 0, 2},
		{"drain/targets=10", 10, benchBudget, 0, 1_000, 0, 2},
		{"drain/targets=100", 100, benchBudget, 0, 1_000, 0, 2},
		// Cycles end in mid-round: 1,900 queued, 5 fires of 200 rows a
		// round, 1,000 rows queued after each.
		{"backlog", 10, backlog, 900, 1_000, 5, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex // target batches are applied concurrently
			var captured []step
			capture := func(s store.Store) store.Store {
				f := storetest.NewFaults(s)
				f.BeforeApply(func(_ context.Context, p store.Partition, b *store.Batch) error {
					if p != sourcePartition || requires(b, store.Key(gen.AppendRelayScanKey(nil))) {
						mu.Lock()
						captured = append(captured, step{p, withoutTimer(deepClone(b))})
						mu.Unlock()
					}
					return nil
				})
				return f
			}
			relayed := newFixture(t, testengine.Memory, tt.targets, tt.budget, capture)
			planned := newFixture(t, testengine.Memory, tt.targets, tt.budget, nil)
			relayed.queue(t, tt.initial)
			planned.queue(t, tt.initial)
			for round := range tt.rounds {
				captured = nil
				planned.now = relayed.now // rows are stamped with it
				relayed.queue(t, tt.queue)
				planned.queue(t, tt.queue)
				steps := planned.plan(t, 4*tt.budget.MaxRows, tt.fires)
				if tt.fires == 0 {
					relayed.drain(t)
				} else {
					for range tt.fires {
						relayed.fire(t)
					}
				}
				planned.applyAll(t, steps)
				if len(captured) != len(steps) {
					t.Fatalf("round %d: relay applied %d batches, baseline %d", round, len(captured), len(steps))
				}
				// The targets' batches are applied concurrently: compare
				// each partition's batches, in their order.
				gotBy, plannedBy := byPartition(captured), byPartition(steps)
				for p, want := range plannedBy {
					got := gotBy[p]
					if len(got) != len(want) {
						t.Fatalf("round %d: %s: relay applied %d batches, baseline %d", round, p, len(got), len(want))
					}
					for i := range want {
						if !sameStep(got[i], want[i]) {
							t.Fatalf("round %d: %s: batch %d differs:\nrelay    %v\nbaseline %v", round, p, i, got[i].b, want[i].b)
						}
					}
				}
				if r, p := relayed.queued(t), planned.queued(t); r != p {
					t.Fatalf("round %d: %d rows left queued by the relay, %d by the baseline", round, r, p)
				}
			}
		})
	}
}

// byPartition groups steps by partition name, each partition's in order.
func byPartition(steps []step) map[string][]step {
	out := map[string][]step{}
	for _, s := range steps {
		out[store.PartitionName(s.p)] = append(out[store.PartitionName(s.p)], s)
	}
	return out
}

// withoutTimer removes from a captured batch what the timer run adds to
// the checkpoint riding on a fire's outcome (the timer row's and its
// reference entry's guards and writes, Done's guard on the outbox
// sequence, the wake time): the baseline applies no timer.
func withoutTimer(b *store.Batch) *store.Batch {
	timerOp := func(k store.Key) bool {
		_, errT := gen.ParseTimerKey(k)
		_, errR := gen.ParseTimerRefKey(k)
		return errT == nil || errR == nil || bytes.Equal(k, gen.AppendOutboxSequenceKey(nil))
	}
	b.Preconditions = slices.DeleteFunc(b.Preconditions, func(c store.Precondition) bool { return timerOp(c.Key) })
	b.Writes = slices.DeleteFunc(b.Writes, func(w store.Write) bool { return timerOp(w.Key) })
	b.Wakeup = nil
	return b
}

// deepClone copies b with its keys and values: the relay reuses its
// buffers from one fire to the next (a store keeps no byte slice passed
// in past the call), so a capture that outlives the Apply must copy them.
func deepClone(b *store.Batch) *store.Batch {
	c := b.Clone()
	for i := range c.Preconditions {
		p := &c.Preconditions[i]
		p.Key, p.Value = bytes.Clone(p.Key), bytes.Clone(p.Value)
	}
	for i := range c.Writes {
		w := &c.Writes[i]
		w.Key, w.Value = bytes.Clone(w.Key), bytes.Clone(w.Value)
	}
	return c
}

func requires(b *store.Batch, key store.Key) bool {
	for _, c := range b.Preconditions {
		if bytes.Equal(c.Key, key) {
			return true
		}
	}
	return false
}

func sameStep(a, b step) bool {
	if a.p != b.p || len(a.b.Preconditions) != len(b.b.Preconditions) || len(a.b.Writes) != len(b.b.Writes) {
		return false
	}
	for i, c := range a.b.Preconditions {
		d := b.b.Preconditions[i]
		if c.Op != d.Op || !bytes.Equal(c.Key, d.Key) || !bytes.Equal(c.Value, d.Value) {
			return false
		}
	}
	for i, w := range a.b.Writes {
		x := b.b.Writes[i]
		if w.Op != x.Op || !bytes.Equal(w.Key, x.Key) || !bytes.Equal(w.Value, x.Value) {
			return false
		}
	}
	return true
}

// ids returns p's tuple identity.
func ids(tb testing.TB, p store.Partition) []byte {
	b, err := p.AppendTuple(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
