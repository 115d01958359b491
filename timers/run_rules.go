package timers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

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
	it, err := r.failure(ctx, t, cause, 0)
	if err != nil {
		r.log.Error("timers: "+msg+"; its retry could not be planned", "kind", r.kindName(t.Kind), "due_at_ms", t.dueMs, "error", cause, "store_error", err)
		return err
	}
	r.logFailure(msg, t, it, cause)
	r.items = append(r.items, it)
	return nil
}

// kindName names kind k in logs: as registered (KindConfig.Name), else
// as Kind.String does.
func (r *run) kindName(k Kind) string { return r.reg.KindName(k) }

// logFailure logs the failed attempt of timer t whose item it is planned:
// at WARN with its attempt ("3 of 25") and when the next comes while
// attempts are left, at ERROR when it made the timer a dead letter.
func (r *run) logFailure(msg string, t change, it item, cause error) {
	pol := DefaultRetryPolicy
	if t.entry != nil {
		pol = t.entry.retry
	}
	n := uint64(t.Attempts) + 1
	attempt := fmt.Sprintf("%d of %d", n, pol.MaxAttempts)
	if pol.MaxAttempts == 0 {
		attempt = fmt.Sprintf("%d (no limit)", n)
	}
	attrs := []any{"kind", r.kindName(t.Kind), "due_at_ms", t.dueMs, "attempt", attempt}
	if it.dead {
		why := "no attempts left"
		if errors.Is(cause, ErrPermanent) {
			why = "a permanent failure"
		}
		if it.newDue != 0 {
			attrs = append(attrs, "next_period", store.DecodeTime(it.newDue).UTC().Format(logTime))
		}
		r.log.Error("timers: "+msg+"; "+why+": a dead letter", append(attrs, "error", cause)...)
		return
	}
	if it.newDue != 0 {
		attrs = append(attrs, "next_attempt", store.DecodeTime(it.newDue).UTC().Format(logTime),
			"retry_in", time.Duration(it.newDue-min(it.newDue, r.now))*time.Millisecond)
	}
	r.log.Warn("timers: "+msg+"; retrying", append(attrs, "error", cause)...)
}

// logTime is how logs write a time: UTC, to the millisecond.
const logTime = "2006-01-02T15:04:05.000Z07:00"

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
