package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// dispatched is what delivery did with the window.
type dispatched struct {
	delivered  []bool // per window row: applied now, or found at or below the target's mark
	nDelivered int
	newBlocks  int // groups failed in this fire
	// pauseAt is the first row a healthy target did not attempt (a budget
	// cut it); overflowAt the first undelivered row of a failed target
	// that the blocked-target cap left unblocked. 0: none (no row has
	// sequence 0).
	pauseAt    uint64
	overflowAt uint64
}

// targetResult is what delivery to one target did.
type targetResult struct {
	completed int  // the group's prefix now applied or found duplicate
	failed    bool // the target is to be blocked
	selected  bool // the target took a slot of MaxTargets
	calls     int  // target store calls spent
}

// hwValueBytes is the length of an encoded U64Value high-water mark.
const hwValueBytes = 9

// dispatch delivers each group in order of first sequence. Targets
// blocked earlier in the cycle are passed over. Reaching the target or
// call budget pauses at the next row not attempted, without blocking
// anything; a failed target is blocked, and when the blocked-target cap
// is reached the fire stops at its first undelivered row instead.
func (f *fire) dispatch(ctx context.Context) {
	f.delivered = append(f.delivered[:0], make([]bool, len(f.rows))...)
	perTarget, total := -1, -1
	if f.budget.MaxTargetCalls > 0 {
		perTarget = max(f.budget.MaxTargetCalls, 2)
		total = perTarget * f.budget.MaxTargets
	}
	selected, calls := 0, 0
	for gi := range f.groups {
		g := &f.groups[gi]
		first := g.rows[0].Seq
		if f.pauseAt != 0 && first >= f.pauseAt {
			break
		}
		if g.wasBlocked {
			continue
		}
		limit := -1
		if perTarget >= 0 {
			limit = max(min(perTarget, total-calls), 0)
		}
		if limit == 0 {
			f.pauseAt = first
			break
		}
		res := f.deliverTarget(ctx, g, limit, selected < f.budget.MaxTargets)
		calls += res.calls
		if res.selected {
			selected++
		}
		for _, c := range g.costs[:res.completed] {
			f.delivered[c.win] = true
		}
		f.nDelivered += res.completed
		switch {
		case res.failed:
			if len(f.scan.Blocked)+f.newBlocks >= MaxBlockedTargets {
				f.overflowAt = g.rows[res.completed].Seq
				return
			}
			g.failed = true
			f.newBlocks++
		case res.completed < len(g.rows):
			// A healthy target cut by a budget resumes at its own first
			// unattempted row on the next fire.
			if at := g.rows[res.completed].Seq; f.pauseAt == 0 || at < f.pauseAt {
				f.pauseAt = at
			}
		}
	}
}

// deliverTarget delivers g's rows in target batches and returns the prefix
// applied or found duplicate; progress stays when a later batch fails.
// limit bounds its target store calls (-1: none); with apply false it only
// reads the mark and counts duplicates. Each batch gets one more try after
// a failed guard (a concurrent delivery), on a fresh snapshot.
func (f *fire) deliverTarget(ctx context.Context, g *group, limit int, apply bool) (res targetResult) {
	rows := g.rows
	for res.completed < len(rows) {
		committed := false
	attempts:
		for range 2 {
			if limit >= 0 && res.calls >= limit {
				return res
			}
			prefixEnd := res.completed + f.fitting(g.costs[res.completed:], len(f.rh))
			if prefixEnd == res.completed {
				f.stalled(g, rows[res.completed].Seq)
				res.failed = true
				return res
			}
			declared, end, ok := f.readKeys(g, res.completed, prefixEnd)
			if !ok {
				res.failed = true
				return res
			}
			prefixEnd = end
			res.calls++
			observed, hw, snapshot, err := f.snapshot(ctx, g.target, declared)
			if err != nil {
				f.log.Warn("relay: relay watermark read failed", "source", f.src, "target", g.target, "error", err)
				res.failed, res.selected = true, true
				return res
			}
			for res.completed < len(rows) && rows[res.completed].Seq <= hw {
				res.completed++
			}
			if res.completed == len(rows) || !apply {
				return res
			}
			if res.completed >= prefixEnd {
				continue
			}
			res.selected = true
			end, ok = f.prepare(ctx, g, prefixEnd, observed, res.completed, snapshot)
			if !ok {
				res.failed = true
				return res
			}
			// The hook's additions share the apply's atomicity and size.
			if limit >= 0 && res.calls >= limit {
				return res
			}
			res.calls++
			out, err := f.h.Target.Apply(ctx, g.target, &f.batch)
			switch {
			case err == nil && out.Committed():
				res.completed = end
				committed = true
				break attempts
			case err == nil && out.Outcome == store.PreconditionFailed:
				// Another delivery moved the mark: read it again.
			case err != nil:
				f.log.Warn("relay: relay target apply failed", "source", f.src, "target", g.target, "error", err)
				res.failed = true
				return res
			default:
				f.log.Warn("relay: relay target apply failed", "source", f.src, "target", g.target, "outcome", out.String())
				res.failed = true
				return res
			}
		}
		if !committed {
			res.failed = true
			return res
		}
	}
	return res
}

// fitting returns how many of the rows costed by costs, from the first,
// fit one target batch whose high-water guard costs guardBytes (the key,
// and the observed value if any): the batch of their writes, the guard and
// the new mark must pass Validate(target Full capabilities) and hold at
// most MaxRelayWrites row writes.
func (f *fire) fitting(costs []rowCost, guardBytes int) int {
	caps := &f.targetCaps
	if len(f.rh) > caps.MaxKeyBytes || guardBytes-len(f.rh) > caps.MaxValueBytes || hwValueBytes > caps.MaxValueBytes {
		return 0
	}
	writes, size := 0, guardBytes+len(f.rh)+hwValueBytes
	for i := range costs {
		writes += costs[i].writes
		size += costs[i].bytes
		if !costs[i].fits || writes > MaxRelayWrites || writes+2 > caps.MaxBatchOps || size > caps.MaxBatchBytes {
			return i
		}
	}
	return len(costs)
}

// stalled logs a row that cannot fit one target batch: its target is
// blocked, cycle after cycle, until the row is dealt with; it is never
// split.
func (f *fire) stalled(g *group, seq uint64) {
	f.log.Warn("relay: relay row cannot fit one target batch; delivery to this target is stalled",
		"source", f.src, "target", g.target, "seq", seq)
}

// readKeys asks the hook which keys rows [start, end) need read, halving
// the rows while they name more than MaxHookReadKeys keys with the mark.
// It returns the keys sorted, without duplicates, and the end it settled
// on; ok is false when the target is to be blocked.
func (f *fire) readKeys(g *group, start, end int) (declared []store.Key, newEnd int, ok bool) {
	for {
		keys, err := f.hook.ReadKeys(g.target, g.rows[start:end])
		if err != nil {
			f.log.Warn("relay: relay hook read keys failed", "source", f.src, "target", g.target, "error", err)
			return nil, 0, false
		}
		if len(keys) == 0 {
			return nil, end, true
		}
		keys = slices.Clone(keys)
		slices.SortFunc(keys, func(a, b store.Key) int { return bytes.Compare(a, b) })
		keys = slices.CompactFunc(keys, func(a, b store.Key) bool { return bytes.Equal(a, b) })
		n := len(keys)
		if !slices.ContainsFunc(keys, func(k store.Key) bool { return bytes.Equal(k, f.rh) }) {
			n++
		}
		if n <= MaxHookReadKeys {
			return keys, end, true
		}
		if end == start+1 {
			f.log.Warn("relay: relay hook needs too many read keys for one row", "source", f.src, "target", g.target,
				"seq", g.rows[start].Seq, "keys", n, "limit", MaxHookReadKeys)
			return nil, 0, false
		}
		end = start + (end-start)/2
	}
}

// snapshot reads the target's high-water mark, with the declared keys in
// the same snapshot when there are any. observed is the mark's raw value
// (nil: absent), hw its sequence.
func (f *fire) snapshot(ctx context.Context, target store.Partition, declared []store.Key) (observed store.Value, hw uint64, snap []store.KeyValue, err error) {
	if len(declared) == 0 {
		if observed, _, err = f.h.Target.Get(ctx, target, f.rh); err != nil {
			return nil, 0, nil, err
		}
	} else {
		keys := make([]store.Key, 1, len(declared)+1)
		keys[0] = f.rh
		for _, k := range declared {
			if !bytes.Equal(k, f.rh) {
				keys = append(keys, k)
			}
		}
		values, err := f.h.Target.GetMany(ctx, target, keys)
		if err != nil {
			return nil, 0, nil, err
		}
		if len(values) != len(keys) {
			return nil, 0, nil, fmt.Errorf("short relay snapshot: %d values for %d keys: %w", len(values), len(keys), store.ErrCorrupt)
		}
		snap = make([]store.KeyValue, len(keys))
		for i := range keys {
			snap[i] = store.KeyValue{Key: keys[i], Value: values[i]}
		}
		observed = values[0]
	}
	if observed != nil {
		u, err := gen.DecodeU64Value(observed)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("high-water mark: %w", err)
		}
		hw = u.Value
	}
	return observed, hw, snap, nil
}

// prepare builds, in f.batch, the target batch for the largest prefix of
// rows [start, prefixEnd) that fits with the observed guard and the hook's
// additions, halving on hook capacity or validation errors. ok is false,
// the reason logged, when none fits.
func (f *fire) prepare(ctx context.Context, g *group, prefixEnd int, observed store.Value, start int, snap []store.KeyValue) (end int, ok bool) {
	end = start + f.fitting(g.costs[start:prefixEnd], len(f.rh)+len(observed))
	if end == start {
		f.stalled(g, g.rows[start].Seq)
		return 0, false
	}
	for {
		rows := g.rows[start:end]
		f.buildBatch(rows, observed)
		if err := f.hook.BeforeApply(ctx, g.target, rows, snap, &f.batch); err != nil {
			if isHookCapacity(err) && end > start+1 {
				end = start + (end-start)/2
				continue
			}
			f.log.Warn("relay: relay hook failed", "source", f.src, "target", g.target, "error", err)
			return 0, false
		}
		if _, plain := f.hook.(NoHook); plain {
			// fitting proved this batch valid: the rows' writes, the guard
			// and the mark, counted as Validate counts them, with nothing
			// added or reserved. The target's Apply validates it anyway.
			return end, true
		}
		caps := f.targetCaps
		caps.ReservedBatchOps = max(f.hook.ReservedOps(g.target, rows), 0)
		if err := f.batch.Validate(caps); err != nil {
			if errors.Is(err, store.ErrInvalid) && end > start+1 {
				end = start + (end-start)/2
				continue
			}
			f.log.Warn("relay: relay target batch invalid", "source", f.src, "target", g.target, "error", err)
			return 0, false
		}
		return end, true
	}
}

// buildBatch resets f.batch to the target batch of rows: the high-water
// guard, the rows' puts and deletes in order, and the new mark.
func (f *fire) buildBatch(rows []Row, observed store.Value) {
	b := &f.batch
	*b = store.Batch{Preconditions: b.Preconditions[:0], Writes: b.Writes[:0]}
	b.Require(store.Guard(f.rh, observed))
	for i := range rows {
		rec := &rows[i].Record
		for _, p := range rec.Puts {
			b.Writes = append(b.Writes, store.Put(p.Key, p.Value))
		}
		for _, k := range rec.Deletes {
			b.Writes = append(b.Writes, store.Delete(k))
		}
	}
	b.Put(f.rh, encodeU64(rows[len(rows)-1].Seq))
}

// encodeU64 encodes a U64Value.
func encodeU64(v uint64) store.Value {
	out, err := gen.AppendU64Value(make([]byte, 0, hwValueBytes), gen.U64Value{Value: v})
	if err != nil {
		// A U64Value has no rule a uint64 can break.
		panic(fmt.Sprintf("relay: encode U64Value: %v", err))
	}
	return out
}
