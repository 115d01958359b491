package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: concurrent target lanes, the outcome of sequential
// delivery.
//
// Each target's rows are delivered by one lane: its target batches one
// after another, in sequence order, each guarded by the high-water mark it
// read. Lanes of different targets touch disjoint keys, so a fire runs up
// to Budget.Concurrency of them at once. What delivery to a target may do
// depends on the targets before it, in order of first sequence: whether it
// is attempted at all (an earlier target's pause, or the blocked-target
// cap, stops the fire first), whether it gets one of MaxTargets slots, how
// many calls MaxTargetCalls leaves it. A lane starts while lanes before it
// are still in flight only when no outcome of theirs could change any of
// that: they can take a slot each, fail (and so block, or reach the cap),
// and, if they hold no slot or a bounded call allowance, pause. Otherwise
// it waits until every lane before it was accounted. Results are accounted
// strictly in order, as sequential delivery accounts them. So the targets
// attempted, the slots, the call limits, the pause point, the blocked
// targets and the cap are exactly those of sequential delivery, whatever
// the concurrency and whatever order the lanes finish in: concurrency
// changes when target batches are applied, never which. Near a budget or
// the cap, and with MaxTargetCalls set, lanes therefore run one after
// another; so do they on a target store that does not overlap calls made
// side by side (store.OverlapsCalls; see Budget.Concurrency), where they
// would only contend for its writer and the CPU.

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

// launch is one group a dispatch gave a lane: the lane's parameters and,
// once done, its result.
type launch struct {
	group int
	limit int  // target store calls allowed (-1: no bound)
	apply bool // the group holds a slot of MaxTargets
	lane  *lane
	done  bool
	res   targetResult
	// panicked holds what the lane panicked with (and where), nil if it
	// did not.
	panicked any
}

// tally is the accounting of the launches accounted so far, as
// sequential delivery has it after delivering their groups.
type tally struct {
	calls, selected     int
	pauseAt, overflowAt uint64
}

// lane is the memory one lane builds its target batches in, and the
// state of the attempt it runs (see attempt): its transaction's function
// is a method value bound once, so that an attempt allocates no closure.
type lane struct {
	batch store.Batch
	fn    store.TransactFunc // transact

	// The attempt's parameters.
	f         *fire
	g         *group
	limit     int
	apply     bool
	declared  []store.Key
	prefixEnd int
	from      targetResult // the result before the attempt
	// What the function's last run found.
	run  targetResult
	read bool // it read the snapshot
	next attemptNext
	end  int // the prefix its batch delivers
}

// newLane returns a lane with its function bound.
func newLane() *lane {
	ln := &lane{}
	ln.fn = ln.transact
	return ln
}

// laneRunner runs a fire's lanes beside the fire's own goroutine (tests
// substitute one that schedules them deterministically).
type laneRunner interface {
	// Go runs lane(ctx) concurrently with the caller; id names it to Wait.
	Go(ctx context.Context, id int, lane func(ctx context.Context))
	// Wait blocks until a lane started by Go has returned and returns its
	// id; each lane's id is returned once.
	Wait() int
}

// goRunner is the default laneRunner: a goroutine per lane.
type goRunner struct{ done chan int }

// Go starts lane on a goroutine of its own.
func (r *goRunner) Go(ctx context.Context, id int, lane func(ctx context.Context)) {
	go func() {
		lane(ctx)
		r.done <- id
	}()
}

// Wait returns the id of a lane that returned.
func (r *goRunner) Wait() int { return <-r.done }

// hwValueBytes is the length of an encoded U64Value high-water mark.
const hwValueBytes = 9

// dispatch delivers each group in order of first sequence, up to
// Budget.Concurrency groups at once, with the outcome of delivering them
// one after another (see the design note). Targets blocked earlier in the
// cycle are passed over. Reaching the target or call budget pauses at the
// next row not attempted, without blocking anything; a failed target is
// blocked, and when the blocked-target cap is reached the fire stops at
// its first undelivered row instead. A lane's panic is raised again on the
// caller's goroutine once the lanes in flight have returned.
func (f *fire) dispatch(ctx context.Context) {
	f.delivered = append(f.delivered[:0], make([]bool, len(f.rows))...)
	d := dispatcher{f: f, n: f.budget.Concurrency, perTarget: -1, total: -1}
	if f.budget.MaxTargetCalls > 0 {
		d.perTarget = max(f.budget.MaxTargetCalls, 2)
		d.total = d.perTarget * f.budget.MaxTargets
	}
	// Sized once: lanes write their launch's result in place.
	f.launches = slices.Grow(f.launches[:0], len(f.groups))
	for len(f.lanes) < min(d.n, len(f.groups)) {
		f.lanes = append(f.lanes, newLane())
	}
	f.freeLanes = append(f.freeLanes[:0], f.lanes[:min(d.n, len(f.lanes))]...)
	d.run(ctx)
}

// dispatcher starts the lanes of one dispatch and accounts their results.
type dispatcher struct {
	f                *fire
	n                int // lanes at once
	perTarget, total int // call bounds (-1: none)
	runner           laneRunner

	next      int   // the next group to consider
	accounted int   // launches accounted, in order
	cur       tally // after them
	stopped   bool  // no more launches
	panicked  any   // the first lane panic, in launch order
}

func (d *dispatcher) run(ctx context.Context) {
	f := d.f
	for {
		for d.accounted < len(f.launches) && f.launches[d.accounted].done {
			d.account(&f.launches[d.accounted])
			d.accounted++
		}
		if !d.stopped && d.next < len(f.groups) && len(f.launches)-d.accounted < d.n && d.considerNext(ctx) {
			continue
		}
		if d.accounted == len(f.launches) {
			break
		}
		l := &f.launches[d.runner.Wait()]
		l.done = true
		f.freeLanes = append(f.freeLanes, l.lane)
	}
	if d.panicked != nil {
		panic(d.panicked)
	}
	f.pauseAt, f.overflowAt = d.cur.pauseAt, d.cur.overflowAt
}

// considerNext decides about the next group as sequential delivery would:
// it passes over a target blocked earlier in the cycle, stops the fire, or
// starts a lane for the group. It reports false, deciding nothing, when
// the lanes in flight could still change the decision.
func (d *dispatcher) considerNext(ctx context.Context) bool {
	f := d.f
	g := &f.groups[d.next]
	first := g.rows[0].Seq
	// A pause or the cap the lanes accounted reached stops the fire
	// whatever the lanes in flight do.
	if d.cur.overflowAt != 0 || d.cur.pauseAt != 0 && first >= d.cur.pauseAt {
		d.stopped = true
		return true
	}
	if g.wasBlocked {
		d.next++
		return true
	}
	i := len(f.launches)
	if inFlight := i - d.accounted; inFlight > 0 && d.uncertain(inFlight) {
		return false
	}
	limit := -1
	if d.perTarget >= 0 {
		limit = max(min(d.perTarget, d.total-d.cur.calls), 0)
	}
	if limit == 0 {
		d.cur.pauseAt, d.stopped = first, true
		return true
	}
	d.next++
	// Certain: every lane in flight may take a slot, and still one is left.
	apply := d.cur.selected+i-d.accounted < f.budget.MaxTargets
	ln := f.freeLanes[len(f.freeLanes)-1]
	f.freeLanes = f.freeLanes[:len(f.freeLanes)-1]
	f.launches = append(f.launches, launch{group: d.next - 1, limit: limit, apply: apply, lane: ln})
	if d.n == 1 {
		// One lane at a time: on this goroutine, as sequential delivery.
		f.launches[i].res = f.deliverTarget(ctx, ln, g, limit, apply)
		f.launches[i].done = true
		f.freeLanes = append(f.freeLanes, ln)
		return true
	}
	if d.runner == nil {
		d.runner = f.runner(d.n)
	}
	res, panicked := &f.launches[i].res, &f.launches[i].panicked
	d.runner.Go(ctx, i, func(ctx context.Context) {
		// The lane writes only its own result; the fire's goroutine reads
		// it after Wait returned the lane's id.
		defer func() {
			if v := recover(); v != nil {
				*panicked = fmt.Sprintf("%v\n[relay target lane]\n%s", v, debug.Stack())
			}
		}()
		*res = f.deliverTarget(ctx, ln, g, limit, apply)
	})
	return true
}

// uncertain reports whether the inFlight lanes not yet accounted could
// change what sequential delivery decides for the next group: each may
// take a slot of MaxTargets, spend calls up to its limit, fail (and so
// reach the blocked-target cap) and, when it holds no slot or a bounded
// call allowance, pause the fire before the group.
func (d *dispatcher) uncertain(inFlight int) bool {
	f := d.f
	if d.perTarget >= 0 {
		return true
	}
	if d.cur.selected < f.budget.MaxTargets && d.cur.selected+inFlight >= f.budget.MaxTargets {
		return true
	}
	if len(f.scan.Blocked)+f.newBlocks+inFlight > MaxBlockedTargets {
		return true
	}
	for i := d.accounted; i < len(f.launches); i++ {
		// Only apply: the lane may be writing its result.
		if !f.launches[i].apply {
			return true
		}
	}
	return false
}

// account adds a finished launch to the tally, as sequential delivery
// does after delivering its group: the calls and the slot it spent, its
// rows delivered, and the target blocked, the fire paused or the cap
// reached. After a lane's panic nothing more is accounted, and nothing
// more launched.
func (d *dispatcher) account(l *launch) {
	f := d.f
	if l.panicked != nil && d.panicked == nil {
		d.panicked = l.panicked
	}
	if d.panicked != nil {
		d.stopped = true
		return
	}
	g := &f.groups[l.group]
	res := l.res
	d.cur.calls += res.calls
	if res.selected {
		d.cur.selected++
	}
	for _, c := range g.costs[:res.completed] {
		f.delivered[c.win] = true
	}
	f.nDelivered += res.completed
	switch {
	case res.failed:
		if len(f.scan.Blocked)+f.newBlocks >= MaxBlockedTargets {
			d.cur.overflowAt = g.rows[res.completed].Seq
			d.stopped = true
			return
		}
		g.failed = true
		f.newBlocks++
	case res.completed < len(g.rows):
		// A healthy target cut by a budget resumes at its own first
		// unattempted row on the next fire.
		if at := g.rows[res.completed].Seq; d.cur.pauseAt == 0 || at < d.cur.pauseAt {
			d.cur.pauseAt = at
		}
	}
}

// runner returns the lane runner of a dispatch of n lanes: the handler's
// test runner, or goroutines reporting on the scratch's channel.
func (f *fire) runner(n int) laneRunner {
	if f.h.newLanes != nil {
		return f.h.newLanes()
	}
	if cap(f.laneDone) < n {
		f.laneDone = make(chan int, n)
	}
	f.goRunner.done = f.laneDone
	return &f.goRunner
}

// deliverTarget delivers g's rows in target batches, built in ln, and
// returns the prefix applied or found duplicate; progress stays when a
// later batch fails. limit bounds its target store calls (-1: none): a
// batch's snapshot read and its apply count one each, although on a
// store.Transactor the two are one transaction (see attempt); with apply
// false it only reads the mark and counts duplicates. Each batch gets one
// more try after a failed guard (a concurrent delivery), on a fresh
// snapshot. Lanes run it concurrently for different groups: it reads only
// what the fire does not change while they run.
func (f *fire) deliverTarget(ctx context.Context, ln *lane, g *group, limit int, apply bool) (res targetResult) {
	rows := g.rows
	for res.completed < len(rows) {
		committed := false
	attempts:
		for try := 1; try <= 2; try++ {
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
			var next attemptNext
			res, next = f.attempt(ctx, ln, g, limit, apply, res, declared, end, try)
			switch next {
			case attemptDone:
				return res
			case attemptCommitted:
				committed = true
				break attempts
			}
		}
		if !committed {
			res.failed = true
			return res
		}
	}
	return res
}

// attemptNext is what deliverTarget does after an attempt.
type attemptNext uint8

const (
	attemptDone      attemptNext = iota // return the result
	attemptCommitted                    // the batch landed: deliver the next rows
	attemptAgain                        // try again (a failed guard, or the mark moved past the prefix)
)

// attempt reads the target's mark (with the hook's declared keys) and
// applies the batch of rows [res.completed, prefixEnd) past it, the
// batch guarded by the mark it read, in one store.TransactOnce: one
// transaction on a store.Transactor (a read version, the snapshot read and
// the commit, the guard costing no read of its own), the read and an Apply
// on another store. The function may run again (the Transactor's retry of
// a conflict): it derives everything from res and what it reads, and
// rebuilds ln.batch each time. try is the attempt's number for the batch
// in this fire (1, then 2 after a failed guard): with a tracer that
// records, the attempt is a span of its own (see startDelivery).
func (f *fire) attempt(ctx context.Context, ln *lane, g *group, limit int, apply bool, res targetResult, declared []store.Key, prefixEnd, try int) (targetResult, attemptNext) {
	tr, ok := f.h.tracer.Active()
	if !ok {
		run, next, _ := f.transactOnce(ctx, ln, g, limit, apply, res, declared, prefixEnd)
		return run, next
	}
	ctx, span := f.startDelivery(ctx, tr, g, res.completed, prefixEnd, try)
	run, next, cause := f.transactOnce(ctx, ln, g, limit, apply, res, declared, prefixEnd)
	endDelivery(span, res, run, next, cause)
	return run, next
}

// transactOnce is attempt's transaction; cause says why the target is to
// be blocked, when it is.
func (f *fire) transactOnce(ctx context.Context, ln *lane, g *group, limit int, apply bool, res targetResult, declared []store.Key, prefixEnd int) (targetResult, attemptNext, error) {
	ln.f, ln.g, ln.limit, ln.apply, ln.declared, ln.prefixEnd, ln.from = f, g, limit, apply, declared, prefixEnd, res
	ln.run, ln.read, ln.next, ln.end = res, false, attemptDone, 0
	out, err := store.TransactOnce(ctx, f.h.target, g.target, ln.fn)
	run := ln.run
	ln.f, ln.g, ln.declared = nil, nil, nil
	switch {
	case err != nil && !ln.read:
		f.log.Warn("relay: relay watermark read failed", "source", f.src, "target", g.target, "error", err)
		run.failed, run.selected = true, true
		return run, attemptDone, err
	case err != nil:
		f.log.Warn("relay: relay target apply failed", "source", f.src, "target", g.target, "error", err)
		run.failed = true
		return run, attemptDone, err
	case out.Outcome == 0:
		return run, ln.next, nil // nothing to apply
	case out.Committed():
		run.completed = ln.end
		return run, attemptCommitted, nil
	case out.Outcome == store.PreconditionFailed:
		// Another delivery moved the mark: read it again.
		return run, attemptAgain, nil
	default:
		f.log.Warn("relay: relay target apply failed", "source", f.src, "target", g.target, "outcome", out.String())
		run.failed = true
		return run, attemptDone, errors.New(out.String())
	}
}

// transact is the function of the lane's attempt: it reads the snapshot
// through r, passes the rows at or below the mark, and returns the batch
// of the rest of the prefix, or nil when there is nothing to apply (all
// duplicates, no slot, the call budget spent, the mark past the prefix,
// or a hook or size failure).
func (ln *lane) transact(ctx context.Context, r store.Reader) (*store.Batch, error) {
	f, g, rows := ln.f, ln.g, ln.g.rows
	run := ln.from
	ln.read, ln.next = false, attemptDone
	defer func() { ln.run = run }()
	run.calls++
	observed, hw, snapshot, err := f.snapshot(ctx, r, ln.declared)
	if err != nil {
		return nil, err
	}
	ln.read = true
	for run.completed < len(rows) && rows[run.completed].Seq <= hw {
		run.completed++
	}
	if run.completed == len(rows) || !ln.apply {
		return nil, nil
	}
	if run.completed >= ln.prefixEnd {
		ln.next = attemptAgain
		return nil, nil
	}
	run.selected = true
	var ok bool
	if ln.end, ok = f.prepare(ctx, &ln.batch, g, ln.prefixEnd, observed, run.completed, snapshot); !ok {
		run.failed = true
		return nil, nil
	}
	// The hook's additions share the apply's atomicity and size.
	if ln.limit >= 0 && run.calls >= ln.limit {
		return nil, nil
	}
	run.calls++
	return &ln.batch, nil
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

// snapshot reads, through r, the target's high-water mark, with the
// declared keys in the same snapshot when there are any. observed is the
// mark's raw value (nil: absent), hw its sequence.
func (f *fire) snapshot(ctx context.Context, r store.Reader, declared []store.Key) (observed store.Value, hw uint64, snap []store.KeyValue, err error) {
	if len(declared) == 0 {
		if observed, _, err = r.Get(ctx, f.rh); err != nil {
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
		values, err := r.GetMany(ctx, keys)
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

// prepare builds, in b, the target batch for the largest prefix of
// rows [start, prefixEnd) that fits with the observed guard and the hook's
// additions, halving on hook capacity or validation errors. ok is false,
// the reason logged, when none fits.
func (f *fire) prepare(ctx context.Context, b *store.Batch, g *group, prefixEnd int, observed store.Value, start int, snap []store.KeyValue) (end int, ok bool) {
	end = start + f.fitting(g.costs[start:prefixEnd], len(f.rh)+len(observed))
	if end == start {
		f.stalled(g, g.rows[start].Seq)
		return 0, false
	}
	for {
		rows := g.rows[start:end]
		buildBatch(b, f.rh, rows, observed)
		if err := f.hook.BeforeApply(ctx, g.target, rows, snap, b); err != nil {
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
		if err := b.Validate(caps); err != nil {
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

// buildBatch resets b to the target batch of rows: the high-water guard
// on rh, the rows' puts and deletes in order, and the new mark.
func buildBatch(b *store.Batch, rh store.Key, rows []Row, observed store.Value) {
	*b = store.Batch{Preconditions: b.Preconditions[:0], Writes: b.Writes[:0]}
	b.Require(store.Guard(rh, observed))
	for i := range rows {
		rec := &rows[i].Record
		for _, p := range rec.Puts {
			b.Writes = append(b.Writes, store.Put(p.Key, p.Value))
		}
		for _, k := range rec.Deletes {
			b.Writes = append(b.Writes, store.Delete(k))
		}
	}
	b.Put(rh, encodeU64(rows[len(rows)-1].Seq))
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
