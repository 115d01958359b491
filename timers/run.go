package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: one read of the timer row and its reference entry per fire.
//
// The scan finds due timers; before firing a page of them RunDue reads each
// timer row again together with its reference entry, in one GetMany
// (one snapshot). A row gone by then was cancelled or moved by another
// writer and is skipped; a row whose reference entry is missing or names
// another due time is corrupt (every writer in this package keeps the two
// in step) and is left in place. The values read are the ones the outcome's
// guards require, so a fire lands only on exactly the timer it saw.

// RunDue fires the due timers of partition p (DueAtMs <= nowMs), oldest
// first, each through the handler registered for its kind, until none is
// left or the budget is spent. It scans the timer class in pages, never all
// of it at once, and stops at the first timer not yet due.
//
// Each outcome is applied, together with the timer's own change, in one
// Apply guarded by the timer row still holding the value the handler saw
// and its reference entry still naming that row: Done deletes both,
// Reschedule and Retry move the timer (never to a due time at or before its
// own) and lower the partition's wake time to the new due time. A handler
// error or panic, an unknown kind, a corrupt key or value, or a failed guard
// affect that timer only (see Report). Each timer fires at most once per
// run.
//
// RunDue fails, returning the report so far, when ctx ends or the store
// fails (a scan, a read or an apply error other than ErrInvalid for a
// handler's outcome); an apply that may have landed (store.ErrUnknownResult)
// is reported as such, and the guards make running again safe. It is safe
// for concurrent use, but two runs of one partition race each other's
// guards: a scheduler's lease keeps them apart.
func RunDue(ctx context.Context, s store.Store, p store.Partition, reg *Registry, nowMs uint64, budget Budget, opts ...Option) (Report, error) {
	cfg := config{clock: clock.Real{}, pageSize: DefaultPageSize}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.clock == nil {
		cfg.clock = clock.Real{}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	cfg.metrics = telemetry.OrNoop(cfg.metrics)
	if cfg.pageSize < 1 {
		cfg.pageSize = DefaultPageSize
	}
	if s == nil || p == nil || reg == nil {
		return Report{}, fmt.Errorf("timers: run due: nil store, partition or registry: %w", store.ErrInvalid)
	}
	budget = budget.withDefaults()
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
	r.c = Ctx{Store: s, Partition: p, NowMs: nowMs, Clock: cfg.clock, Logger: r.log, Metrics: cfg.metrics}
	err := r.scan(ctx)
	r.report.Elapsed = cfg.clock.Now().Sub(r.started)
	r.emit()
	return r.report, err
}

// ident is a timer's identity: at most one timer per (kind, reference).
type ident struct {
	kind      Kind
	reference string
}

// candidate is a due timer of a registered kind, found by the scan.
type candidate struct {
	key     store.Key
	tk      gen.TimerKey
	refKey  store.Key
	handler Handler
}

// tally counts one metric of one timer kind, emitted when the run ends.
type tally struct {
	metric string
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
	handled map[ident]struct{}
	unknown []Kind
	tallies []tally
	report  Report

	cands []candidate
	keys  []store.Key
}

// errStop ends the scan without an error: the budget is spent, or the
// first timer not yet due was reached.
var errStop = errors.New("stop")

func (r *run) scan(ctx context.Context) error {
	start, end := gen.ClassRange(gen.TagTimerKey)
	var after store.Cursor
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("timers: run %s: %w", store.PartitionName(r.p), err)
		}
		limit := min(r.cfg.pageSize, r.budget.MaxTimers-r.fires+1)
		page, err := r.s.Scan(ctx, r.p, start, end, after, limit)
		if err != nil {
			return fmt.Errorf("timers: scan timers of %s: %w", store.PartitionName(r.p), err)
		}
		// Buffers as large as the page, not the limit: a scheduler runs
		// RunDue for every due partition, most of which hold few timers.
		if n := len(page.Entries); cap(r.cands) < n {
			r.cands = make([]candidate, 0, n)
			r.keys = make([]store.Key, 0, 2*n)
		}
		err = r.page(ctx, page.Entries)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil || page.Next == nil {
			return err
		}
		after = page.Next
	}
}

// page classifies one scan page and fires its candidates.
func (r *run) page(ctx context.Context, entries []store.KeyValue) error {
	r.cands = r.cands[:0]
	stop := false
	for _, kv := range entries {
		tk, err := gen.ParseTimerKey(kv.Key)
		if err != nil {
			r.corrupt(0, "corrupt timer key; left in place", "key", fmt.Sprintf("%x", []byte(kv.Key)), "error", err)
			continue
		}
		if tk.DueAtMs > r.now {
			r.noteNext(tk.DueAtMs)
			stop = true
			break
		}
		kind := Kind(tk.Kind)
		if _, done := r.handled[ident{kind, tk.Reference}]; done {
			r.noteNext(tk.DueAtMs)
			continue
		}
		h, ok := r.reg.Lookup(kind)
		if !ok {
			r.unknownKind(kind)
			continue
		}
		refKey, err := RefKey(kind, tk.Reference)
		if err != nil { // the parsed key bounds the reference: unreachable
			return err
		}
		r.cands = append(r.cands, candidate{key: kv.Key, tk: tk, refKey: refKey, handler: h})
	}
	if len(r.cands) > 0 {
		if err := r.fireAll(ctx); err != nil {
			return err
		}
	}
	if stop {
		return errStop
	}
	return nil
}

// fireAll reads the candidates' rows and reference entries in one snapshot
// and fires them in order, within the budget.
func (r *run) fireAll(ctx context.Context) error {
	r.keys = r.keys[:0]
	for _, c := range r.cands {
		r.keys = append(r.keys, c.key, c.refKey)
	}
	vals, err := r.s.GetMany(ctx, r.p, r.keys)
	if err != nil {
		return fmt.Errorf("timers: read due timers of %s: %w", store.PartitionName(r.p), err)
	}
	if len(vals) != len(r.keys) {
		return fmt.Errorf("timers: read due timers of %s: %d values for %d keys: %w",
			store.PartitionName(r.p), len(vals), len(r.keys), store.ErrCorrupt)
	}
	for i, c := range r.cands {
		if r.fires >= r.budget.MaxTimers || r.cfg.clock.Now().Sub(r.started) >= r.budget.MaxDuration {
			r.report.More = true
			r.noteNext(c.tk.DueAtMs)
			return errStop
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("timers: run %s: %w", store.PartitionName(r.p), err)
		}
		if err := r.fire(ctx, c, vals[2*i], vals[2*i+1]); err != nil {
			return err
		}
	}
	return nil
}

// fire fires one candidate and applies its outcome.
func (r *run) fire(ctx context.Context, c candidate, value, refValue store.Value) error {
	kind := Kind(c.tk.Kind)
	if value == nil {
		// Cancelled or moved by another writer since the scan.
		return nil
	}
	// A second row of this (kind, reference) in the same page is an orphan:
	// its reference entry names the other row, so it is reported corrupt.
	r.handled[ident{kind, c.tk.Reference}] = struct{}{}
	if refValue == nil {
		r.corrupt(kind, "timer has no reference entry; left in place", "due_at_ms", c.tk.DueAtMs)
		return nil
	}
	if due, err := DecodeRef(refValue); err != nil || due != c.tk.DueAtMs {
		r.corrupt(kind, "timer reference entry is corrupt or names another timer; left in place",
			"due_at_ms", c.tk.DueAtMs, "reference_due_at_ms", due, "error", err)
		return nil
	}
	t := DueTimer{Key: c.key, DueAtMs: c.tk.DueAtMs, Kind: kind, Reference: c.tk.Reference, Value: value}
	r.fires++
	fired, err := r.call(ctx, c.handler, t)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return fmt.Errorf("timers: run %s: %v timer: %w", store.PartitionName(r.p), kind, err)
		}
		if errors.Is(err, store.ErrCorrupt) {
			r.corrupt(kind, "timer handler found corrupt data; left in place", "due_at_ms", t.DueAtMs, "error", err)
			return nil
		}
		return r.fail(ctx, t, c.refKey, refValue, "timer handler failed", err)
	}
	b, newDue, retry, err := r.outcome(t, c.refKey, refValue, fired)
	if err != nil {
		return r.fail(ctx, t, c.refKey, refValue, "timer handler returned no valid outcome", err)
	}
	out, err := r.s.Apply(ctx, r.p, b)
	switch {
	case errors.Is(err, store.ErrInvalid):
		return r.fail(ctx, t, c.refKey, refValue, "store rejected the timer's outcome", err)
	case err != nil:
		return fmt.Errorf("timers: apply %v timer outcome in %s: %w", kind, store.PartitionName(r.p), err)
	case out.Outcome == store.PreconditionFailed:
		r.report.Raced++
		r.count(telemetry.MetricTimersRaced, kind)
		r.log.Info("timers: timer outcome raced; nothing applied", "kind", kind,
			"due_at_ms", t.DueAtMs, "timer_guard", out.FailedIndex >= len(b.Preconditions)-2, "failed", out.Failed.String())
		return nil
	case out.Outcome == store.DeadlinePassed:
		return r.fail(ctx, t, c.refKey, refValue, "timer outcome passed its deadline", errors.New(out.String()))
	case !out.Committed():
		return fmt.Errorf("timers: apply %v timer outcome in %s: unexpected outcome %v", kind, store.PartitionName(r.p), out)
	}
	if retry {
		r.report.Retried++
		r.count(telemetry.MetricTimersRetried, kind)
	} else {
		r.report.Fired++
		r.count(telemetry.MetricTimersFired, kind)
	}
	if newDue != 0 {
		r.noteNext(newDue)
	}
	return nil
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

// outcome builds the batch that applies fired: the handler's batch, then
// the timer's guards and change. newDue is the timer's new due time, 0
// when it is deleted.
func (r *run) outcome(t DueTimer, refKey store.Key, refValue store.Value, fired Fired) (b *store.Batch, newDue uint64, retry bool, err error) {
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
	}
	switch f := fired.(type) {
	case Done:
		b = outcomeBatch(f.Batch)
		guard(b, t, refKey, refValue)
		b.Delete(t.Key).Delete(refKey)
		return b, 0, false, nil
	case Reschedule:
		b = outcomeBatch(f.Batch)
		guard(b, t, refKey, refValue)
		newDue = after(t.DueAtMs, f.DueAtMs)
		return b, newDue, false, move(b, t, refKey, newDue, f.Value)
	case Retry:
		b = outcomeBatch(nil)
		guard(b, t, refKey, refValue)
		newDue = r.backoffDue(t)
		return b, newDue, true, move(b, t, refKey, newDue, t.Value)
	}
	return nil, 0, false, fmt.Errorf("%v handler returned no outcome (%T)", t.Kind, fired)
}

// outcomeBuf holds an outcome batch and, for a handler batch without
// preconditions or writes, their room: one allocation per outcome.
type outcomeBuf struct {
	b   store.Batch
	pre [2]store.Precondition
	w   [3]store.Write
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

// move deletes the timer row and writes it (and its reference entry) at
// due with value, waking the partition then.
func move(b *store.Batch, t DueTimer, refKey store.Key, due uint64, value store.Value) error {
	key, err := TimerKey(due, t.Kind, t.Reference)
	if err != nil {
		return err
	}
	b.Delete(t.Key).Put(key, value).Put(refKey, encodeRef(due)).WakeAt(due)
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

func (r *run) backoffDue(t DueTimer) uint64 {
	want := r.now + RetryBackoffMs
	if want < r.now {
		want = math.MaxUint64
	}
	return after(t.DueAtMs, want)
}

// fail counts a failed fire, logs it, and moves the timer RetryBackoffMs
// later, guarded like any outcome.
func (r *run) fail(ctx context.Context, t DueTimer, refKey store.Key, refValue store.Value, msg string, cause error) error {
	r.report.Failed++
	r.count(telemetry.MetricTimersFailed, t.Kind)
	r.log.Error("timers: "+msg+"; retrying later", "kind", t.Kind, "due_at_ms", t.DueAtMs, "error", cause)
	b := outcomeBatch(nil)
	guard(b, t, refKey, refValue)
	due := r.backoffDue(t)
	if err := move(b, t, refKey, due, t.Value); err != nil {
		return err
	}
	out, err := r.s.Apply(ctx, r.p, b)
	if err != nil {
		return fmt.Errorf("timers: move failed %v timer in %s: %w", t.Kind, store.PartitionName(r.p), err)
	}
	if out.Committed() {
		r.noteNext(due)
	} else {
		r.log.Info("timers: failed timer changed meanwhile; not moved", "kind", t.Kind, "outcome", out.String())
	}
	return nil
}

func (r *run) corrupt(kind Kind, msg string, attrs ...any) {
	r.report.Corrupt++
	r.report.Held++
	r.count(telemetry.MetricTimersCorrupt, kind)
	if kind != 0 {
		attrs = append(attrs, "kind", kind)
	}
	r.log.Warn("timers: "+msg, attrs...)
}

func (r *run) unknownKind(kind Kind) {
	r.report.Held++
	for _, k := range r.unknown {
		if k == kind {
			return
		}
	}
	r.unknown = append(r.unknown, kind)
	r.report.UnknownKind++
	r.count(telemetry.MetricTimersUnknownKind, kind)
	r.log.Warn("timers: no handler registered for timer kind; its timers are left in place", "kind", kind)
}

func (r *run) noteNext(due uint64) {
	if r.report.NextDueMs == 0 || due < r.report.NextDueMs {
		r.report.NextDueMs = due
	}
}

func (r *run) count(metric string, kind Kind) {
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
