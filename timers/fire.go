package timers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/store"
)

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
	if errors.Is(err, store.ErrNewerVersion) {
		r.newerRow(c.key, kind, "timer reference entry is of a newer version than this binary reads; left in place",
			"due_at_ms", c.tk.DueAtMs, "error", err)
		return nil
	}
	if err != nil || st.due != c.tk.DueAtMs {
		r.corruptRow(c.key, kind, "timer reference entry is corrupt or names another timer; left in place",
			"due_at_ms", c.tk.DueAtMs, "reference_due_at_ms", st.due, "error", err)
		return nil
	}
	t := change{DueTimer: DueTimer{Key: c.key, DueAt: store.DecodeTime(c.tk.DueAtMs), Kind: kind, Reference: c.tk.Reference, Value: c.value,
		Attempts: int(st.attempts), LastError: st.lastErr},
		dueMs: c.tk.DueAtMs, refKey: c.refKey, refValue: c.refValue, periodAtMs: st.periodAt, entry: c.entry, format: r.format}
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
			r.log.Warn("timers: timer handler found corrupt data; retrying later", "kind", r.kindName(kind),
				"due_at_ms", t.dueMs, "retry_in", r.cfg.heldBackoff, "error", err)
			return r.hold(t)
		}
		if errors.Is(err, store.ErrNewerVersion) {
			// Written by a newer binary: held, not failed (no attempt
			// spent), until a binary that reads it fires the timer.
			r.countNewer()
			r.log.Warn("timers: timer handler met a row of a newer version than this binary reads; retrying later", "kind", r.kindName(kind),
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
	// format is the store's mkit format the run writes reference entries
	// at.
	format uint32
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
	st := refState{attempts: uint32(t.Attempts), lastErr: t.LastError, periodAt: t.periodAtMs, format: t.format}
	if t.entry != nil && t.entry.period != nil {
		st.periodAt = t.periodAt()
	}
	return st
}

// call runs the handler, in a span of its own when the run's tracer
// records: mkitfdb.timers.fire, with the timer's kind, its partition's
// kind and its attempt (1 on a first fire), an error when the handler
// failed or asked to retry. The handler's ctx holds the span.
func (r *run) call(ctx context.Context, h Handler, t DueTimer) (Fired, error) {
	tr, ok := r.cfg.tracer.Active()
	if !ok {
		return r.invoke(ctx, h, t)
	}
	ctx, span := tr.Start(ctx, tracing.SpanTimerFire, trace.WithAttributes(
		tracing.TimerKind.Int(int(t.Kind)),
		tracing.PartitionKind.String(r.p.Kind()),
		tracing.Attempt.Int(t.Attempts+1),
	))
	fired, err := r.invoke(ctx, h, t)
	failure := err
	switch f := fired.(type) {
	case Retry:
		failure = cmp.Or(f.Err, errRetry)
	case *Retry:
		if f != nil {
			failure = cmp.Or(f.Err, errRetry)
		}
	}
	if failure != nil {
		span.RecordError(failure)
		span.SetStatus(codes.Error, failure.Error())
	}
	span.End()
	return fired, err
}

// invoke runs the handler, turning a panic into an error.
func (r *run) invoke(ctx context.Context, h Handler, t DueTimer) (fired Fired, err error) {
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
		if it.dead {
			r.logFailure("timer handler asked for a retry", t, it, cause)
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
