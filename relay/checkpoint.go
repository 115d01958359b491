package relay

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: a checkpoint is one or more source batches, each guarded by
// the scan state the previous one wrote (the first by the state the fire
// read), each deleting delivered rows guarded by their exact values and
// writing the scan state up to the last row it covers. A batch that lost
// a race writes nothing, and the ones before it are consistent on their
// own: their rows were delivered, and their cursor never passes a row
// that is neither delivered nor blocked.
//
// The last batch is not applied by the checkpoint: the fire's outcome
// carries it (timers.Done and timers.Reschedule apply their batch with
// the timer's own change, atomically), which saves a commit per fire. If
// that batch fails (a guard of the timer, of the outbox sequence for Done,
// of the scan state or of a row), nothing of it lands: its rows stay
// queued with their timer, delivered, and the next fire finds them at or
// below their targets' marks and deletes them then. Since it outlives the
// fire, whose scratch memory the next fire reuses, it holds its own copies
// of the keys and values it guards; and it leaves room for what the run
// adds to it (timers.HandlerCapabilities).

// checkpoint records the fire's progress in the source: it walks the
// window in order, moving the cursor over rows delivered or held by a
// blocked target, and deletes the delivered rows; it stops at the pause
// point, at the blocked-target cap (which ends the cycle, so the next fire
// restarts from the head with nothing blocked), and at the first row of a
// target that was neither delivered to nor blocked. A window read to the
// cycle's end, without a stop, ends the cycle. Delivered rows past the
// stop whose target mark already covers them are deleted too, without
// moving the cursor. The batches are split as the source's capabilities
// require, with room for the timer's change in each. It applies all but
// the last, which it returns for the fire's outcome to carry (see the
// design note), and sets f.scan to the state that batch writes. It reports
// false when a batch lost a race.
func (f *fire) checkpoint(ctx context.Context, t timers.DueTimer) (*store.Batch, bool, error) {
	caps := timers.HandlerCapabilities(f.sourceCaps, t)
	caps.MaxBatchBytes = max(caps.MaxBatchBytes, 0)
	ck := checkpointer{f: f, caps: caps, observed: f.scanValue, state: f.scan, dels: f.dels[:0]}
	defer func() { f.dels = ck.dels }()
	var err error
	if ck.stateBytes, err = ck.encodedLen(ck.state); err != nil {
		return nil, false, err
	}
	interrupted, overflow := false, false
	for i := range f.rows {
		q := &f.rows[i]
		if f.overflowAt != 0 && q.seq >= f.overflowAt {
			overflow = true
			break
		}
		if f.pauseAt != 0 && q.seq >= f.pauseAt {
			interrupted = true
			break
		}
		g := &f.groups[q.group]
		delivered := f.delivered[i]
		block := !delivered && !g.inBlocked
		if block {
			if !g.failed {
				interrupted = true
				break
			}
			if len(ck.state.Blocked) >= MaxBlockedTargets {
				overflow = true
				break
			}
		}
		var del *queued
		if delivered {
			del = q
		}
		ok, err := ck.advance(ctx, q.seq, g, block, del)
		if err != nil || !ok {
			return nil, false, err
		}
	}
	stoppedAfter := ck.state.Cursor
	if overflow || !f.corrupt && !interrupted && f.exhausted {
		// The cycle is over: the next fire starts from the head, nothing
		// blocked. (On overflow the row that would pass the cap is kept.)
		ck.state.Cursor = ck.state.CycleEnd
	}
	for i := range f.rows {
		if q := &f.rows[i]; q.seq > stoppedAfter && f.delivered[i] {
			ok, err := ck.add(ctx, q)
			if err != nil || !ok {
				return nil, false, err
			}
		}
	}
	last, err := ck.last()
	if err != nil {
		return nil, false, err
	}
	f.scan = ck.state
	return last, true, nil
}

// checkpointer accumulates one checkpoint batch at a time: the guarded
// scan state and guarded row deletions, sized by running sums.
type checkpointer struct {
	f        *fire
	caps     store.Capabilities
	observed store.Value // the scan state's stored value (nil: absent)
	state    gen.RelayScanV1
	// stateBytes is the length of state encoded: only Blocked changes it
	// (the cursor is a fixed-width field).
	stateBytes int
	dels       []*queued
	delBytes   int  // the deletions' guard and delete bytes
	delFit     bool // every deletion's key and value within the per-row limits
}

// encode encodes a scan state.
func (ck *checkpointer) encode(state gen.RelayScanV1) (store.Value, error) {
	v, err := gen.EncodeRelayScanV1(state)
	if err != nil {
		return nil, fmt.Errorf("relay: encode the scan state of %s: %w", ck.f.src, err)
	}
	return v, nil
}

// encodedLen is the length of state encoded.
func (ck *checkpointer) encodedLen(state gen.RelayScanV1) (int, error) {
	v, err := ck.encode(state)
	return len(v), err
}

// fits reports whether the pending batch, with state encoded in
// stateBytes and one more deletion (nil: none), passes Validate(caps).
func (ck *checkpointer) fits(stateBytes int, extra *queued) bool {
	caps := &ck.caps
	ops := 2 + 2*len(ck.dels)
	size := 2*len(scanKey) + len(ck.observed) + stateBytes + ck.delBytes
	ok := ck.delFit || len(ck.dels) == 0
	if extra != nil {
		ops += 2
		size += 2*len(extra.key) + len(extra.value)
		ok = ok && rowFits(caps, extra)
	}
	return ok && len(scanKey) <= caps.MaxKeyBytes && len(ck.observed) <= caps.MaxValueBytes &&
		stateBytes <= caps.MaxValueBytes && ops <= caps.MaxBatchOps-caps.ReservedBatchOps && size <= caps.MaxBatchBytes
}

func rowFits(caps *store.Capabilities, q *queued) bool {
	return len(q.key) > 0 && len(q.key) <= caps.MaxKeyBytes && len(q.value) <= caps.MaxValueBytes
}

// advance moves the cursor to seq (blocking g's target when block) and
// adds del's deletion, first applying the pending batch, under the state
// before this row, when they would not fit it. It reports false when that
// batch lost a race.
func (ck *checkpointer) advance(ctx context.Context, seq uint64, g *group, block bool, del *queued) (bool, error) {
	next := ck.state
	next.Cursor = seq
	stateBytes := ck.stateBytes
	if block {
		at, _ := slices.BinarySearchFunc(next.Blocked, g.id, bytes.Compare)
		next.Blocked = slices.Insert(slices.Clone(next.Blocked), at, bytes.Clone(g.id))
		var err error
		if stateBytes, err = ck.encodedLen(next); err != nil {
			return false, err
		}
	}
	if !ck.fits(stateBytes, del) {
		if len(ck.dels) == 0 {
			// Nothing to flush first: the fire
			// retries (only capabilities too small for a scan state and
			// one deletion get here).
			return false, nil
		}
		if ok, err := ck.flush(ctx); err != nil || !ok {
			return false, err
		}
		if !ck.fits(stateBytes, del) {
			return false, ck.invalid(next, del)
		}
	}
	ck.state, ck.stateBytes = next, stateBytes
	if block {
		g.inBlocked = true
	}
	ck.push(del)
	return true, nil
}

// add adds a deletion without moving the cursor, first applying the
// pending batch when it would not fit.
func (ck *checkpointer) add(ctx context.Context, del *queued) (bool, error) {
	if !ck.fits(ck.stateBytes, del) {
		if len(ck.dels) == 0 {
			return false, nil
		}
		if ok, err := ck.flush(ctx); err != nil || !ok {
			return false, err
		}
		if !ck.fits(ck.stateBytes, del) {
			return false, ck.invalid(ck.state, del)
		}
	}
	ck.push(del)
	return true, nil
}

func (ck *checkpointer) push(del *queued) {
	if del == nil {
		return
	}
	if len(ck.dels) == 0 {
		ck.delFit = true
	}
	ck.dels = append(ck.dels, del)
	ck.delBytes += 2*len(del.key) + len(del.value)
	ck.delFit = ck.delFit && rowFits(&ck.caps, del)
}

// invalid builds the batch that cannot fit even alone and returns why.
func (ck *checkpointer) invalid(state gen.RelayScanV1, del *queued) error {
	encoded, err := ck.encode(state)
	if err != nil {
		return err
	}
	b := store.NewBatch().Require(store.Guard(scanKey, ck.observed)).Put(scanKey, encoded)
	if del != nil {
		b.Require(store.Equals(del.key, del.value)).Delete(del.key)
	}
	if err := b.Validate(ck.caps); err != nil {
		return fmt.Errorf("relay: checkpoint of %s: %w", ck.f.src, err)
	}
	return fmt.Errorf("relay: checkpoint of %s does not fit one batch: %w", ck.f.src, store.ErrInvalid)
}

// last returns the pending batch, unapplied, in memory of its own: the
// scan state, guarded by the value the previous batch wrote (or the fire
// read), and the deletions, each guarded by a copy of the row's value,
// with room for the outbox sequence's guard.
func (ck *checkpointer) last() (*store.Batch, error) {
	encoded, err := ck.encode(ck.state)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, q := range ck.dels {
		n += len(q.key) + len(q.value)
	}
	arena := make([]byte, 0, n)
	b := &store.Batch{
		Preconditions: make([]store.Precondition, 0, 2+len(ck.dels)),
		Writes:        make([]store.Write, 0, 1+len(ck.dels)),
	}
	b.Require(store.Guard(scanKey, ck.observed)).Put(scanKey, encoded)
	for _, q := range ck.dels {
		k := len(arena)
		arena = append(arena, q.key...)
		v := len(arena)
		arena = append(arena, q.value...)
		key := store.Key(arena[k:v:v])
		b.Require(store.Equals(key, arena[v:len(arena):len(arena)])).Delete(key)
	}
	return b, nil
}

// flush applies the pending batch: the scan state, guarded by the value
// the previous batch wrote (or the fire read), and the deletions, each
// guarded by the row's exact value. It reports false when a guard failed
// (or the batch's deadline passed); nothing was written then.
func (ck *checkpointer) flush(ctx context.Context) (bool, error) {
	f := ck.f
	encoded, err := ck.encode(ck.state)
	if err != nil {
		return false, err
	}
	b := &f.ckpt
	*b = store.Batch{Preconditions: b.Preconditions[:0], Writes: b.Writes[:0]}
	b.Require(store.Guard(scanKey, ck.observed)).Put(scanKey, encoded)
	for _, q := range ck.dels {
		b.Require(store.Equals(q.key, q.value)).Delete(q.key)
	}
	// fits, which counts as Validate does, admitted every part of this
	// batch; Apply validates it again.
	out, err, ok := f.early.apply(ctx, b)
	if !ok {
		out, err = f.c.Store.Apply(ctx, f.c.Partition, b)
	}
	if err != nil {
		return false, fmt.Errorf("relay: checkpoint of %s: %w", f.src, err)
	}
	if !out.Committed() {
		f.log.Info("relay: relay checkpoint raced; retrying", "source", f.src, "outcome", out.String())
		return false, nil
	}
	ck.observed = encoded
	ck.dels, ck.delBytes, ck.delFit = ck.dels[:0], 0, true
	return true, nil
}
