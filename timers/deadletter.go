package timers

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: dead letters.
//
// A timer that used its retry policy's attempts, or whose handler failed
// with a Permanent error, leaves the timer rows in the batch of its last
// failure and becomes two rows of its own key ranges, in its partition:
//
//	DeadLetterKey(kind, reference, due_at_ms)       ->  DeadLetterV1
//	DeadLetterValueKey(kind, reference, due_at_ms)  ->  the timer's value
//
// No scan of RunDue reads them and no batch sets a wake time for them, so
// a dead letter never fires on its own. The timer's (kind, reference) is
// free again: a producer may schedule a new timer of it, whose own dead
// letter, if it comes to that, takes another key (the due time of its
// last fire, or the first free millisecond after it), so that nothing is
// overwritten. Only Redrive and DeleteDeadLetter remove a dead letter,
// each guarded by the rows it read.

// DeadLetter is a timer kept aside after its last failure (see
// RetryPolicy and Permanent), as DeadLetters reads it.
type DeadLetter struct {
	Kind      Kind
	Reference string
	// DueAt is the due time of the timer's last fire (a later millisecond
	// when another dead letter of the timer had that one).
	DueAt time.Time
	// At is when the timer became a dead letter, on the run's clock.
	At time.Time
	// Attempts is the fires it failed since it last succeeded.
	Attempts int
	// LastError is the text of its last failure (truncated).
	LastError string
	// Permanent says the handler marked that error not retryable.
	Permanent bool
	// Value is the timer's value, byte for byte.
	Value store.Value

	dueMs uint64
	// record is the DeadLetterKey row's value as read: Redrive and
	// DeleteDeadLetter require it unchanged.
	record store.Value
}

// deadLetterKeys returns the keys of dead letter (kind, reference, dueMs).
func deadLetterKeys(kind Kind, reference string, dueMs uint64) (rec, val store.Key, err error) {
	rec, err = gen.AppendDeadLetterKey(make([]byte, 0, 16+len(reference)), uint16(kind), reference, dueMs)
	if err != nil {
		return nil, nil, fmt.Errorf("timers: %v dead letter key: %w", kind, err)
	}
	val, err = gen.AppendDeadLetterValueKey(make([]byte, 0, 16+len(reference)), uint16(kind), reference, dueMs)
	if err != nil {
		return nil, nil, fmt.Errorf("timers: %v dead letter key: %w", kind, err)
	}
	return rec, val, nil
}

// maxDeadLetterProbe is how many milliseconds after a timer's due time
// deadLetter tries for a free key.
const maxDeadLetterProbe = 16

// deadLetter is the item that makes t a dead letter after its n-th
// failed attempt (cause; perm: a Permanent error): its guards, the timer
// rows' removal (a periodic timer's move to its next period) and the dead
// letter's rows, required absent. When the dead letter's keys near t's due
// time are all taken the timer is held HeldBackoff later instead, and the
// condition logged: the operator's listing shows the dead letters in the
// way.
func (r *run) deadLetter(ctx context.Context, t change, cause error, n uint32, perm bool) (item, error) {
	var recKey, valKey store.Key
	dueMs := t.dueMs
	for i := 0; ; i++ {
		var err error
		recKey, valKey, err = deadLetterKeys(t.Kind, t.Reference, dueMs)
		if err != nil {
			return item{}, err
		}
		_, taken, err := r.s.Get(ctx, r.p, recKey)
		if err != nil {
			return item{}, fmt.Errorf("timers: read %v dead letter in %s: %w", t.Kind, store.PartitionName(r.p), err)
		}
		if !taken {
			break
		}
		if i == maxDeadLetterProbe || dueMs == ^uint64(0) {
			r.log.Error("timers: timer's dead letter keys are all taken; held", "kind", r.kindName(t.Kind), "due_at_ms", t.dueMs)
			r.report.Held++
			return r.moveItem(t, durationMs(r.cfg.heldBackoff))
		}
		dueMs++
	}
	rec, err := gen.EncodeDeadLetterV1(gen.DeadLetterV1{AtMs: r.now, Attempts: n, LastError: truncError(cause), Permanent: perm})
	if err != nil {
		return item{}, fmt.Errorf("timers: encode %v dead letter: %w", t.Kind, err)
	}
	b := &store.Batch{
		Preconditions: make([]store.Precondition, 0, 4),
		Writes:        make([]store.Write, 0, 5),
	}
	guard(b, t.DueTimer, t.refKey, t.refValue)
	b.Require(store.Absent(recKey), store.Absent(valKey))
	b.Put(recKey, rec).Put(valKey, t.Value)
	if t.entry != nil && t.entry.period != nil {
		// A periodic timer goes on to its next period, if it has one.
		if due := nextPeriod(t.entry.period, t.periodAt(), r.now); due != math.MaxUint64 {
			due = after(t.dueMs, due)
			return item{t: t, b: b, newDue: due, dead: true}, move(b, t.DueTimer, t.refKey, due, t.Value, refState{})
		}
	}
	b.Delete(t.Key).Delete(t.refKey)
	return item{t: t, b: b, dead: true}, nil
}

// DeadLetters lists the dead letters of r's partition in key order
// (kind, reference, due time), at most limit (at least 1) after the
// cursor after (nil: from the first); next is nil when none follows. It
// fails with an error wrapping store.ErrCorrupt naming the first row
// that does not decode (a key, a record, a missing value row), and with
// the store's errors.
func DeadLetters(ctx context.Context, r store.Reader, after store.Cursor, limit int) (dls []DeadLetter, next store.Cursor, err error) {
	if limit < 1 {
		return nil, nil, fmt.Errorf("timers: list dead letters: limit %d: %w", limit, store.ErrInvalid)
	}
	start, end := gen.ClassRange(gen.TagDeadLetterKey)
	page, err := r.Scan(ctx, start, end, after, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("timers: list dead letters of %s: %w", store.PartitionName(r.Partition()), err)
	}
	if len(page.Entries) == 0 {
		return nil, page.Next, nil
	}
	dls = make([]DeadLetter, 0, len(page.Entries))
	valKeys := make([]store.Key, 0, len(page.Entries))
	for _, kv := range page.Entries {
		k, err := gen.ParseDeadLetterKey(kv.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("timers: dead letter key %x of %s: %w", []byte(kv.Key), store.PartitionName(r.Partition()), err)
		}
		rec, err := gen.DecodeDeadLetterV1(kv.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("timers: dead letter %v %q at %d of %s: %w", Kind(k.Kind), k.Reference, k.DueAtMs, store.PartitionName(r.Partition()), err)
		}
		_, valKey, err := deadLetterKeys(Kind(k.Kind), k.Reference, k.DueAtMs)
		if err != nil {
			return nil, nil, err
		}
		valKeys = append(valKeys, valKey)
		dls = append(dls, DeadLetter{
			Kind: Kind(k.Kind), Reference: k.Reference, DueAt: store.DecodeTime(k.DueAtMs), At: store.DecodeTime(rec.AtMs),
			Attempts: int(rec.Attempts), LastError: rec.LastError, Permanent: rec.Permanent,
			dueMs: k.DueAtMs, record: kv.Value,
		})
	}
	vals, err := r.GetMany(ctx, valKeys)
	if err != nil {
		return nil, nil, fmt.Errorf("timers: read dead letters of %s: %w", store.PartitionName(r.Partition()), err)
	}
	for i := range dls {
		if i >= len(vals) || vals[i] == nil {
			return nil, nil, fmt.Errorf("timers: dead letter %v %q at %d of %s has no value row: %w",
				dls[i].Kind, dls[i].Reference, dls[i].dueMs, store.PartitionName(r.Partition()), store.ErrCorrupt)
		}
		dls[i].Value = vals[i]
	}
	return dls, page.Next, nil
}

// guardDeadLetter adds to b the guards that d's rows still hold what
// DeadLetters read, and their deletes.
func guardDeadLetter(b *store.Batch, d DeadLetter) error {
	if d.record == nil || d.Value == nil {
		return fmt.Errorf("timers: a dead letter not read by DeadLetters: %w", store.ErrInvalid)
	}
	recKey, valKey, err := deadLetterKeys(d.Kind, d.Reference, d.dueMs)
	if err != nil {
		return err
	}
	b.Require(store.Equals(recKey, d.record), store.Equals(valKey, d.Value)).Delete(recKey).Delete(valKey)
	return nil
}

// Redrive adds to b what turns dead letter d (as DeadLetters read it)
// back into a timer due at at, with its value and no failed attempts:
// guarded by d's rows being unchanged and by there being no timer of its
// (kind, reference) (a producer may have scheduled one since), it deletes
// d's rows, puts the timer and wakes the partition at at. Applied, the
// timer fires again as any timer does. It adds nothing and fails with an
// error wrapping store.ErrInvalid for a d not read by DeadLetters, an at
// before the Unix epoch's first millisecond, or a value over caps.
func Redrive(b *store.Batch, caps store.Capabilities, d DeadLetter, at time.Time) error {
	var g store.Batch
	if err := guardDeadLetter(&g, d); err != nil {
		return err
	}
	if err := Schedule(&g, caps, nil, Timer{Kind: d.Kind, Reference: d.Reference, DueAt: at, Value: d.Value}); err != nil {
		return fmt.Errorf("timers: redrive %v dead letter: %w", d.Kind, err)
	}
	atMs, _ := store.EncodeTime(at) // Schedule checked it
	b.Merge(&g).WakeAt(wakeTime(atMs))
	return nil
}

// DeleteDeadLetter adds to b what deletes dead letter d (as DeadLetters
// read it), guarded by its rows being unchanged. It adds nothing and
// fails with an error wrapping store.ErrInvalid for a d not read by
// DeadLetters.
func DeleteDeadLetter(b *store.Batch, d DeadLetter) error {
	var g store.Batch
	if err := guardDeadLetter(&g, d); err != nil {
		return err
	}
	b.Merge(&g)
	return nil
}
