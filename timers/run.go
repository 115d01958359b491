package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: one read of the timer row and its reference entry per fire.
//
// The scan finds due timers; with it RunDue reads each due timer's
// reference entry: in the scan's transaction under a Scheduler's claim on
// a store.Transactor (the claim reads the first page so), else together
// with the timer row again, in one GetMany (one snapshot). A row gone by then was cancelled or moved by another
// writer and is skipped; a row whose reference entry is missing or names
// another due time is corrupt (every writer in this package keeps the two
// in step) and is left in place. The values read are the ones the outcome's
// guards require, so a fire lands only on exactly the timer it saw.
//
// Design note: no timer is ever left without a wake time.
//
// The invariant RunDue and the Scheduler keep, whatever races, faults or
// crashes happen: every partition that holds a timer has a due index entry
// at or before its earliest timer's due time (or is parked under a lease,
// see the Scheduler). So every timer RunDue does not delete is accounted
// for in Report.NextDue: one it moved, at its new due time; one whose
// outcome raced or whose move failed, at its own due time (it is still
// due: the next run sees what changed); one of a kind without a handler,
// or whose handler found corrupt data, is moved HeldBackoff later, like a
// Retry, so that it stays due (a handler registered later or a repair
// fires it) without waking the partition at every poll; a row that cannot
// be moved (a key that does not parse, a reference entry missing or naming
// another row) is left in place and wakes the partition HeldBackoff later.
// A run that fails part-way reports, as NextDue, at most the due time of
// the first timer it did not finish. RunDue alone lowers the wake time
// with each move (store.Batch.WakeAt); under a Scheduler's claim it leaves
// that to the claim's release (see claimHold).

// RunDue fires the due timers of partition p (DueAt <= now, to the
// millisecond), oldest
// first, each through the handler registered for its kind, until none is
// left or the budget is spent. It scans the timer class in pages, never all
// of it at once, and stops at the first timer not yet due.
//
// Each outcome lands atomically with the timer's own change, guarded by
// the timer row still holding the value the handler saw and its reference
// entry still naming that row: Done deletes both (a periodic kind's moves
// the timer to its next period), Reschedule, Retry and Snooze move the
// timer (never to a due time at or before its own) and lower the
// partition's wake time to the new due time; a failure moves it as its
// kind's RetryPolicy says, or makes it a dead letter. The outcomes of a page of
// timers of one kind commit together, in as few batches as the store's
// limits allow, as if applied one after another (see Handler). A handler
// error or panic, an unknown kind, a corrupt key or value, or a failed
// guard affect that timer only (see Report). Each timer fires at most once
// per run.
//
// RunDue fails, returning the report so far, when ctx ends or the store
// fails (a scan, a read, the read of a dead letter's key among them, or
// an apply error other than ErrInvalid for a handler's outcome): a store
// failure is never recorded as a timer's failure and spends none of its
// attempts, so that the next run records the handler's outcome as the
// handler gave it. An apply that may have landed (store.ErrUnknownResult)
// is reported as such, and the guards make running again safe. A nil
// store, partition or registry, a now before the Unix epoch or a negative
// field of cfg fails it with store.ErrInvalid before any I/O. It is safe
// for concurrent use, but two runs of one partition race each other's
// guards: a scheduler's lease keeps them apart.
func RunDue(ctx context.Context, s store.Store, p store.Partition, reg *Registry, now time.Time, cfg RunConfig) (Report, error) {
	return runDue(ctx, s, p, reg, now, cfg, nil)
}

// runDue is RunDue, under the Scheduler's claim h when h is not nil (see
// claimHold).
func runDue(ctx context.Context, s store.Store, p store.Partition, reg *Registry, now time.Time, rc RunConfig, h *claimHold) (Report, error) {
	if err := rc.check(); err != nil {
		return Report{}, err
	}
	cfg := rc.config()
	cfg.claim = h
	if s == nil || p == nil || reg == nil {
		return Report{}, fmt.Errorf("timers: run due: nil store, partition or registry: %w", store.ErrInvalid)
	}
	nowMs, err := store.EncodeTime(now)
	if err != nil {
		return Report{}, fmt.Errorf("timers: run due: %w", err)
	}
	budget := rc.Budget.withDefaults()
	r := &run{
		s:       s,
		p:       p,
		reg:     reg,
		now:     nowMs,
		budget:  budget,
		cfg:     cfg,
		log:     cfg.logger.With("partition", store.PartitionName(p)),
		started: cfg.clock.Now(),
		// Sized by what the run finds, not by the budget: a scheduler runs
		// this for every due partition, most of which hold a timer or two.
		handled: make(map[ident]struct{}),
	}
	r.c = Ctx{Store: s, Partition: p, Now: store.DecodeTime(nowMs), Clock: cfg.clock, Logger: r.log, Metrics: cfg.metrics}
	err = r.scan(ctx)
	r.report.NextDue = store.DecodeTime(r.nextDueMs)
	r.report.Elapsed = cfg.clock.Now().Sub(r.started)
	r.emit()
	return r.report, err
}

// ident is a timer's identity: at most one timer per (kind, reference).
type ident struct {
	kind      Kind
	reference string
}

// candidate is a due timer found by the scan.
type candidate struct {
	key    store.Key
	tk     gen.TimerKey
	refKey store.Key
	// entry is nil for a kind no handler is registered for: the timer is
	// moved HeldBackoff later.
	entry *kindEntry
	// value and refValue are the row's and its reference entry's values,
	// read in one snapshot (value nil: the row is gone).
	value, refValue store.Value
}

// tally counts one metric of one timer kind, emitted when the run ends.
type tally struct {
	metric *telemetry.Desc
	kind   Kind
	n      uint64
}

type run struct {
	s       store.Store
	p       store.Partition
	reg     *Registry
	now     uint64
	budget  Budget
	cfg     config
	log     *slog.Logger
	c       Ctx
	started time.Time

	fires   int
	lastDue uint64 // the due time of the last due row scanned
	handled map[ident]struct{}
	unknown []Kind
	tallies []tally
	report  Report
	// nextDueMs is Report.NextDue until the run ends (0: none).
	nextDueMs uint64

	// id is the partition's identity, for retry jitter (nil until needed).
	id []byte

	cands []candidate
	// items are the outcomes of the page's fires, not yet committed.
	items []item
	// written maps the keys a combined batch writes to their last write
	// (see group).
	written map[string]store.Write
	// single: commit one outcome a batch (the store rejected a combined
	// batch that passed Validate).
	single bool
}

// errStop ends the scan without an error: the budget is spent, or the
// first timer not yet due was reached.
var errStop = errors.New("stop")

// timerPage is one page of the timer class, read in one snapshot: the
// scanned rows and, for each due row whose key parses (up to the first
// row not yet due), its reference entry's value as read with it.
type timerPage struct {
	entries []store.KeyValue
	next    store.Cursor
	// refs[i] is the reference entry of entries[i], for the due rows whose
	// key parses (up to the first not yet due); the others' is zero.
	refs []refRead
}

// refRead is a due row's reference entry: its key and its value as read
// with the row (nil: absent).
type refRead struct {
	key   store.Key
	value store.Value
}

// readTimers reads a page of the timer class after after, at most limit
// rows, through r, and the reference entries of its due rows, with extra
// keys (a lease) read in the same GetMany: extraVals holds their values.
// oneSnapshot says r reads one snapshot (a Transactor's Reader); elsewhere
// the due rows are read again with their reference entries, so that each
// row and its entry come from one snapshot.
func readTimers(ctx context.Context, r store.Reader, oneSnapshot bool, after store.Cursor, limit int, nowMs uint64, extra ...store.Key) (pg timerPage, extraVals []store.Value, err error) {
	start, end := gen.ClassRange(gen.TagTimerKey)
	page, err := r.Scan(ctx, start, end, after, limit)
	if err != nil {
		return pg, nil, fmt.Errorf("timers: scan timers of %s: %w", store.PartitionName(r.Partition()), err)
	}
	pg = timerPage{entries: page.Entries, next: page.Next, refs: make([]refRead, len(page.Entries))}
	keys := make([]store.Key, 0, len(extra)+2*len(page.Entries))
	keys = append(keys, extra...)
	due := 0 // the due rows are the first ones whose keys parse
	for i, kv := range page.Entries {
		tk, err := gen.ParseTimerKey(kv.Key)
		if err != nil {
			continue
		}
		if tk.DueAtMs > nowMs {
			break
		}
		refKey, err := RefKey(Kind(tk.Kind), tk.Reference)
		if err != nil { // the parsed key bounds the reference: unreachable
			return pg, nil, err
		}
		if !oneSnapshot {
			keys = append(keys, kv.Key)
		}
		keys = append(keys, refKey)
		pg.refs[i].key = refKey
		due = i + 1
	}
	if len(keys) == 0 {
		return pg, nil, nil
	}
	vals, err := r.GetMany(ctx, keys)
	if err != nil {
		return pg, nil, fmt.Errorf("timers: read due timers of %s: %w", store.PartitionName(r.Partition()), err)
	}
	if len(vals) != len(keys) {
		return pg, nil, fmt.Errorf("timers: read due timers of %s: %d values for %d keys: %w",
			store.PartitionName(r.Partition()), len(vals), len(keys), store.ErrCorrupt)
	}
	extraVals, vals = vals[:len(extra)], vals[len(extra):]
	j := 0
	for i := range pg.entries[:due] {
		if pg.refs[i].key == nil {
			continue // a key that does not parse
		}
		if !oneSnapshot {
			// The row as read with its reference entry: it may have
			// changed since the scan.
			pg.entries[i].Value = vals[j]
			j++
		}
		pg.refs[i].value = vals[j]
		j++
	}
	return pg, extraVals, nil
}

func (r *run) scan(ctx context.Context) error {
	var after store.Cursor
	first := r.cfg.claim != nil && r.cfg.claim.page != nil
	for {
		if err := ctx.Err(); err != nil {
			return r.failed(fmt.Errorf("timers: run %s: %w", store.PartitionName(r.p), err), r.frontier())
		}
		var pg timerPage
		if first {
			// The claim read the first page in its transaction.
			pg, first = *r.cfg.claim.page, false
		} else {
			// One row more than the page size or the budget's remaining
			// fires: the run knows whether its last fire is the
			// partition's last (see claimHold).
			limit := min(r.cfg.pageSize, r.budget.MaxTimers-r.fires) + 1
			var err error
			if _, ok := r.s.(store.Transactor); ok && r.cfg.claim != nil {
				// Under a claim, in one transaction: on a cluster one round
				// trip fewer.
				_, err = store.TransactOnce(ctx, r.s, r.p, func(ctx context.Context, rd store.Reader) (*store.Batch, error) {
					pg, _, err = readTimers(ctx, rd, true, after, limit, r.now)
					return nil, err
				})
			} else {
				// Run alone, in read transactions, which on the memory and
				// bbolt engines share the store with its writer.
				pg, _, err = readTimers(ctx, store.ReaderOf(r.s, r.p), false, after, limit, r.now)
			}
			if err != nil {
				return r.failed(err, r.frontier())
			}
		}
		// Buffers as large as the page, not the limit: a scheduler runs
		// RunDue for every due partition, most of which hold few timers.
		if n := len(pg.entries); cap(r.cands) < n {
			r.cands = make([]candidate, 0, n)
		}
		err := r.page(ctx, pg)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil || pg.next == nil {
			return err
		}
		after = pg.next
	}
}

// page classifies one page and fires its candidates.
func (r *run) page(ctx context.Context, pg timerPage) error {
	r.cands = r.cands[:0]
	stop := false
	for i, kv := range pg.entries {
		tk, err := gen.ParseTimerKey(kv.Key)
		if err != nil {
			r.corruptRow(kv.Key, 0, "corrupt timer key; left in place", "key", fmt.Sprintf("%x", []byte(kv.Key)), "error", err)
			continue
		}
		if tk.DueAtMs > r.now {
			r.noteNext(tk.DueAtMs)
			stop = true
			break
		}
		r.lastDue = tk.DueAtMs
		kind := Kind(tk.Kind)
		if _, done := r.handled[ident{kind, tk.Reference}]; done {
			r.noteNext(tk.DueAtMs)
			continue
		}
		ref := pg.refs[i]
		if ref.key == nil { // readTimers reads every due row's: unreachable
			return fmt.Errorf("timers: %s: due timer at %d read without its reference entry", store.PartitionName(r.p), tk.DueAtMs)
		}
		e := r.reg.entry(kind)
		if e == nil {
			r.unknownKind(kind)
		}
		r.cands = append(r.cands, candidate{key: kv.Key, tk: tk, refKey: ref.key, entry: e, value: kv.Value, refValue: ref.value})
	}
	if len(r.cands) > 0 {
		if err := r.fireAll(ctx, stop || pg.next == nil); err != nil {
			return err
		}
	}
	if stop {
		return errStop
	}
	return nil
}

// fireAll fires the candidates in order, within the budget, and commits
// their outcomes together (see commitAll). final says no due timer
// follows the candidates: the last batch may release a claim. Outcomes
// of handlers that fired are committed even when the run then stops.
func (r *run) fireAll(ctx context.Context, final bool) error {
	if cap(r.items) < len(r.cands) {
		r.items = make([]item, 0, len(r.cands))
	}
	r.items = r.items[:0]
	var stopErr error
	cut := false
	for _, c := range r.cands {
		if r.fires >= r.budget.MaxTimers || r.cfg.clock.Now().Sub(r.started) >= r.budget.MaxDuration {
			r.report.More = true
			r.noteNext(c.tk.DueAtMs)
			cut = true
			break
		}
		if err := ctx.Err(); err != nil {
			stopErr = r.failed(fmt.Errorf("timers: run %s: %w", store.PartitionName(r.p), err), c.tk.DueAtMs)
			break
		}
		if err := r.fire(ctx, c); err != nil {
			stopErr = r.failed(err, c.tk.DueAtMs)
			break
		}
	}
	if err := r.commitAll(ctx, final && !cut && stopErr == nil); err != nil {
		return errors.Join(stopErr, err)
	}
	switch {
	case stopErr != nil:
		return stopErr
	case cut:
		return errStop
	}
	return nil
}

// failed notes that the run ends with err before it finished the timers
// due at or after dueMs, and returns err.
func (r *run) failed(err error, dueMs uint64) error {
	r.noteNext(dueMs)
	return err
}

// frontier is the earliest due time a timer the scan has not yet read can
// have: the due time of the last row it read, or 1 when it read none (a
// due time of 0 is valid, but the wake time 0 means none).
func (r *run) frontier() uint64 {
	return max(r.lastDue, 1)
}

// fire fires one candidate and queues its outcome (see commitAll): the
// handler's, or a move later when it cannot fire it.
func (r *run) fire(ctx context.Context, c candidate) error {
	kind := Kind(c.tk.Kind)
	if c.value == nil {
		// Cancelled or moved by another writer since the scan.
		return nil
	}
	// A second row of this (kind, reference) in the same page is an orphan:
	// its reference entry names the other row, so it is reported corrupt.
	r.handled[ident{kind, c.tk.Reference}] = struct{}{}
	if c.refValue == nil {
		r.corruptRow(c.key, kind, "timer has no reference entry; left in place", "due_at_ms", c.tk.DueAtMs)
		return nil
	}
	st, err := decodeRefState(c.refValue)
	if err != nil || st.due != c.tk.DueAtMs {
		r.corruptRow(c.key, kind, "timer reference entry is corrupt or names another timer; left in place",
			"due_at_ms", c.tk.DueAtMs, "reference_due_at_ms", st.due, "error", err)
		return nil
	}
	t := change{DueTimer: DueTimer{Key: c.key, DueAt: store.DecodeTime(c.tk.DueAtMs), Kind: kind, Reference: c.tk.Reference, Value: c.value,
		Attempts: int(st.attempts), LastError: st.lastErr},
		dueMs: c.tk.DueAtMs, refKey: c.refKey, refValue: c.refValue, periodAtMs: st.periodAt, entry: c.entry}
	r.fires++
	if c.entry == nil {
		// unknownKind logged and counted it when the scan found it.
		return r.hold(t)
	}
	if c.entry.period != nil {
		t.Period = store.DecodeTime(t.periodAt())
	}
	if err := r.commitOtherKinds(ctx, kind); err != nil {
		return err
	}
	fired, err := r.call(ctx, c.entry.h, t.DueTimer)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return fmt.Errorf("timers: run %s: %v timer: %w", store.PartitionName(r.p), kind, err)
		}
		if errors.Is(err, store.ErrCorrupt) {
			r.countCorrupt()
			r.log.Warn("timers: timer handler found corrupt data; retrying later", "kind", kind,
				"due_at_ms", t.dueMs, "retry_in", r.cfg.heldBackoff, "error", err)
			return r.hold(t)
		}
		return r.fail(ctx, t, "timer handler failed", err)
	}
	it, err := r.outcome(ctx, t, fired)
	if err != nil {
		if sf, ok := err.(storeFailure); ok {
			// The outcome is valid; the store failed while the run built
			// it.
			return sf.err
		}
		return r.fail(ctx, t, "timer handler returned no valid outcome", err)
	}
	it.outcome = true
	r.items = append(r.items, it)
	return nil
}

// change is a due timer the run is about to change, with what its guards
// require: the reference entry's key and value as read, and the state
// the entry holds (its attempts and last error are the DueTimer's).
type change struct {
	DueTimer
	dueMs    uint64 // DueTimer.DueAt as stored
	refKey   store.Key
	refValue store.Value
	// periodAtMs is the entry's period's scheduled time (0: none).
	periodAtMs uint64
	// entry is the kind's registration, nil for a kind without one.
	entry *kindEntry
}

// periodAt is the scheduled time of the period the timer is in: its
// reference entry's, else its due time.
func (t *change) periodAt() uint64 {
	if t.periodAtMs != 0 {
		return t.periodAtMs
	}
	return t.dueMs
}

// kept is the state a move that is neither a success nor a failure keeps
// (a hold, a snooze): the attempts and last error, and a periodic timer's
// scheduled time.
func (t *change) kept() refState {
	st := refState{attempts: uint32(t.Attempts), lastErr: t.LastError, periodAt: t.periodAtMs}
	if t.entry != nil && t.entry.period != nil {
		st.periodAt = t.periodAt()
	}
	return st
}

// call runs the handler, turning a panic into an error.
func (r *run) call(ctx context.Context, h Handler, t DueTimer) (fired Fired, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("timers: %v handler panicked: %v\n%s", t.Kind, v, debug.Stack())
		}
	}()
	return h.Fire(ctx, &r.c, t)
}

// outcome builds the item that applies fired: the handler's batch, then
// the timer's guards and change.
func (r *run) outcome(ctx context.Context, t change, fired Fired) (item, error) {
	// The variants have value receivers, so pointers to them are Fired too.
	switch f := fired.(type) {
	case *Done:
		if f != nil {
			fired = *f
		}
	case *Reschedule:
		if f != nil {
			fired = *f
		}
	case *Retry:
		if f != nil {
			fired = *f
		}
	case *Snooze:
		if f != nil {
			fired = *f
		}
	}
	switch f := fired.(type) {
	case Done:
		b := outcomeBatch(f.Batch)
		guard(b, t.DueTimer, t.refKey, t.refValue)
		if t.entry.period != nil {
			// The fire and the move to the next period land together.
			if due := nextPeriod(t.entry.period, t.periodAt(), r.now); due != math.MaxUint64 {
				due = after(t.dueMs, due)
				return item{t: t, b: b, newDue: due}, move(b, t.DueTimer, t.refKey, due, t.Value, refState{})
			}
		}
		b.Delete(t.Key).Delete(t.refKey)
		return item{t: t, b: b}, nil
	case Reschedule:
		want, err := store.EncodeTime(f.DueAt)
		if err != nil {
			return item{}, fmt.Errorf("%v handler rescheduled: %w", t.Kind, err)
		}
		b := outcomeBatch(f.Batch)
		guard(b, t.DueTimer, t.refKey, t.refValue)
		due := after(t.dueMs, want)
		return item{t: t, b: b, newDue: due}, move(b, t.DueTimer, t.refKey, due, f.Value, refState{})
	case Retry:
		cause := f.Err
		if cause == nil {
			cause = errRetry
		}
		it, err := r.failure(ctx, t, cause, f.After)
		if err != nil {
			// A Retry is always valid: failure fails only when the store
			// does (the dead letter's read). Returned as it is: fire tells
			// it from the handler's by its type.
			return item{}, storeFailure{err}
		}
		it.retry = true
		return it, nil
	case Snooze:
		b := outcomeBatch(nil)
		guard(b, t.DueTimer, t.refKey, t.refValue)
		due := r.backoffDue(t, durationMs(f.For))
		return item{t: t, b: b, newDue: due, snooze: true}, move(b, t.DueTimer, t.refKey, due, t.Value, t.kept())
	}
	return item{}, fmt.Errorf("%v handler returned no outcome (%T)", t.Kind, fired)
}

// storeFailure is an error of the store met while the run builds a
// handler's valid outcome (the read of its dead letter's key): it fails
// the run, as any store failure does, and is never recorded as the
// handler's failure, which would spend an attempt on it.
type storeFailure struct{ err error }

func (e storeFailure) Error() string { return e.err.Error() }
func (e storeFailure) Unwrap() error { return e.err }

// errRetry is the last error a Retry without Err records.
var errRetry = errors.New("retry")

// durationMs is d in whole milliseconds, 0 for a negative d.
func durationMs(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(d / time.Millisecond)
}

// failure is the item of a failed fire of t (cause: the handler's error,
// or the Retry's): the timer's move as its kind's retry policy says (or
// wait later, when positive), recording the attempt and cause, or, when
// that was its last attempt or cause wraps Permanent, its dead letter
// (see deadLetter).
func (r *run) failure(ctx context.Context, t change, cause error, wait time.Duration) (item, error) {
	pol := DefaultRetryPolicy
	if t.entry != nil {
		pol = t.entry.retry
	}
	n := uint32(t.Attempts)
	if n < math.MaxUint32 {
		n++
	}
	perm := errors.Is(cause, ErrPermanent)
	if perm || pol.MaxAttempts > 0 && int64(n) >= int64(pol.MaxAttempts) {
		return r.deadLetter(ctx, t, cause, n, perm)
	}
	if wait <= 0 {
		if r.id == nil {
			r.id, _ = r.p.AppendTuple(nil)
		}
		wait = pol.delay(int(n), r.id, t.Kind, t.Reference)
	}
	st := t.kept()
	st.attempts, st.lastErr = n, truncError(cause)
	b := outcomeBatch(nil)
	guard(b, t.DueTimer, t.refKey, t.refValue)
	due := r.backoffDue(t, max(durationMs(wait), 1))
	return item{t: t, b: b, newDue: due}, move(b, t.DueTimer, t.refKey, due, t.Value, st)
}

// outcomeBuf holds an outcome batch and, for a handler batch without
// preconditions or writes, their room (the timer's guards and writes, and
// a claim's release): one allocation per outcome.
type outcomeBuf struct {
	b   store.Batch
	pre [3]store.Precondition
	w   [4]store.Write
}

// outcomeBatch returns a batch holding the handler's batch h (nil: none)
// with room for the timer's own guards and writes.
func outcomeBatch(h *store.Batch) *store.Batch {
	buf := &outcomeBuf{}
	b := &buf.b
	if h == nil || len(h.Preconditions)+len(h.Writes) == 0 {
		b.Preconditions, b.Writes = buf.pre[:0], buf.w[:0]
	} else {
		b.Preconditions = make([]store.Precondition, 0, len(h.Preconditions)+len(buf.pre))
		b.Writes = make([]store.Write, 0, len(h.Writes)+len(buf.w))
	}
	return b.Merge(h)
}

// guard requires the timer row and its reference entry to hold what the
// run read. They are the batch's last two preconditions.
func guard(b *store.Batch, t DueTimer, refKey store.Key, refValue store.Value) {
	b.Require(store.Equals(t.Key, t.Value), store.Equals(refKey, refValue))
}

// move deletes the timer row and writes it (and its reference entry,
// holding st at due) at due with value. The wake time is commit's to set.
func move(b *store.Batch, t DueTimer, refKey store.Key, due uint64, value store.Value, st refState) error {
	key, err := timerKey(due, t.Kind, t.Reference)
	if err != nil {
		return err
	}
	st.due = due
	if st.periodAt == due {
		st.periodAt = 0
	}
	b.Delete(t.Key).Put(key, value).Put(refKey, encodeRefState(st))
	return nil
}

// after is the due time a moved timer gets: want, but at least one
// millisecond after the timer's own due time.
func after(old, want uint64) uint64 {
	if want > old {
		return want
	}
	if old == math.MaxUint64 {
		return old
	}
	return old + 1
}

// backoffDue is the due time of timer t moved backoffMs after the run's
// time.
func (r *run) backoffDue(t change, backoffMs uint64) uint64 {
	want := r.now + backoffMs
	if want < r.now {
		want = math.MaxUint64
	}
	return after(t.dueMs, want)
}

// fail counts a failed fire, logs it, and queues the timer's move as its
// retry policy says, or its dead letter, guarded like any outcome.
func (r *run) fail(ctx context.Context, t change, msg string, cause error) error {
	r.report.Failed++
	r.count(telemetry.MetricTimersFailed, t.Kind)
	r.log.Error("timers: "+msg, "kind", t.Kind, "due_at_ms", t.dueMs, "attempts", t.Attempts+1, "error", cause)
	it, err := r.failure(ctx, t, cause, 0)
	if err != nil {
		return err
	}
	r.items = append(r.items, it)
	return nil
}

// hold queues the move of a timer its handler cannot fire now (its kind
// has none, or it found corrupt data) HeldBackoff later, value unchanged,
// so that it stays due without waking the partition at every poll.
func (r *run) hold(t change) error {
	r.report.Held++
	return r.moveLater(t, uint64(r.cfg.heldBackoff/time.Millisecond))
}

// moveLater queues the move of timer t, value unchanged, backoffMs after
// the run's time, guarded like any outcome.
func (r *run) moveLater(t change, backoffMs uint64) error {
	it, err := r.moveItem(t, backoffMs)
	if err != nil {
		return err
	}
	r.items = append(r.items, it)
	return nil
}

// moveItem is the move of timer t, value unchanged, backoffMs after the
// run's time.
func (r *run) moveItem(t change, backoffMs uint64) (item, error) {
	b := outcomeBatch(nil)
	guard(b, t.DueTimer, t.refKey, t.refValue)
	due := r.backoffDue(t, backoffMs)
	if err := move(b, t.DueTimer, t.refKey, due, t.Value, t.kept()); err != nil {
		return item{}, err
	}
	return item{t: t, b: b, newDue: due}, nil
}

// corruptRow counts and logs (at most once per HeldBackoff for the row,
// see Registry) a timer row that cannot be moved, and wakes the partition
// HeldBackoff later for it, so that a repair is seen.
func (r *run) corruptRow(key store.Key, kind Kind, msg string, attrs ...any) {
	r.report.Held++
	r.countCorrupt()
	r.noteNext(addMs(r.now, uint64(r.cfg.heldBackoff/time.Millisecond)))
	if !r.reg.logHeld(r.p, key, r.now, r.cfg.heldBackoff) {
		return
	}
	if kind != 0 {
		attrs = append(attrs, "kind", kind)
	}
	r.log.Warn("timers: "+msg, attrs...)
}

func (r *run) countCorrupt() {
	r.report.Corrupt++
	r.count(telemetry.MetricTimersCorrupt, 0)
}

func (r *run) unknownKind(kind Kind) {
	for _, k := range r.unknown {
		if k == kind {
			return
		}
	}
	r.unknown = append(r.unknown, kind)
	r.report.UnknownKind++
	r.count(telemetry.MetricTimersUnknownKind, kind)
	r.log.Warn("timers: no handler registered for timer kind; its timers wait", "kind", kind, "retry_in", r.cfg.heldBackoff)
}

// noteNext notes that the partition needs running again at due (a due
// time of 0 at 1: the wake time 0 means none).
func (r *run) noteNext(due uint64) {
	due = max(due, 1)
	if r.nextDueMs == 0 || due < r.nextDueMs {
		r.nextDueMs = due
	}
}

func (r *run) count(metric *telemetry.Desc, kind Kind) {
	if metric == telemetry.MetricTimersCorrupt {
		kind = 0 // counted per partition kind only
	}
	for i := range r.tallies {
		if r.tallies[i].metric == metric && r.tallies[i].kind == kind {
			r.tallies[i].n++
			return
		}
	}
	r.tallies = append(r.tallies, tally{metric: metric, kind: kind, n: 1})
}

// emit sends the run's tallies to the metrics, one sample per series.
func (r *run) emit() {
	pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: r.p.Kind()}
	for _, t := range r.tallies {
		if t.metric == telemetry.MetricTimersCorrupt {
			r.cfg.metrics.Add(t.metric, []telemetry.Label{pk}, t.n)
			continue
		}
		r.cfg.metrics.Add(t.metric, []telemetry.Label{pk, {Name: telemetry.LabelTimerKind, Value: t.kind.label()}}, t.n)
	}
}
