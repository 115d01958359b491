package timers

import (
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// TimerKey returns the key of the timer row (dueAt, kind, reference),
// dueAt truncated to the millisecond. It fails with an error wrapping
// store.ErrInvalid for a dueAt before the Unix epoch or a reference over
// gen.MaxTimerKeyReference bytes.
func TimerKey(dueAt time.Time, kind Kind, reference string) (store.Key, error) {
	due, err := store.EncodeTime(dueAt)
	if err != nil {
		return nil, fmt.Errorf("timers: %v timer key: %w", kind, err)
	}
	return timerKey(due, kind, reference)
}

// timerKey is TimerKey of an encoded due time.
func timerKey(dueAtMs uint64, kind Kind, reference string) (store.Key, error) {
	// Tag, due time and kind take at most 14 bytes; the reference 2 more
	// plus its escapes.
	k, err := gen.AppendTimerKey(make([]byte, 0, 16+len(reference)), dueAtMs, uint16(kind), reference)
	if err != nil {
		return nil, fmt.Errorf("timers: %v timer key: %w", kind, err)
	}
	return k, nil
}

// RefKey returns the key of the reference entry of timer (kind,
// reference), which holds the timer's due time. It fails like TimerKey.
func RefKey(kind Kind, reference string) (store.Key, error) {
	k, err := gen.AppendTimerRefKey(make([]byte, 0, 8+len(reference)), uint16(kind), reference)
	if err != nil {
		return nil, fmt.Errorf("timers: %v timer reference key: %w", kind, err)
	}
	return k, nil
}

// LeaseKey returns the key of a partition's scheduler lease (a
// gen.SchedulerLeaseKey, holding a gen.SchedulerLeaseV1), which a
// Scheduler holds while it fires the partition's timers. The key is
// shared: do not modify it.
func LeaseKey() store.Key { return schedulerLeaseKey }

// schedulerLeaseKey is LeaseKey's, built once.
var schedulerLeaseKey = store.Key(gen.AppendSchedulerLeaseKey(nil))

// ReadRef reads the reference entry of timer (kind, reference) in
// partition p. observed is the entry's value, nil when there is no such
// timer: pass it to Schedule or Cancel as the value to guard. It fails as
// DecodeRef does when the entry does not decode, and with the store's
// errors.
func ReadRef(ctx context.Context, s store.Store, p store.Partition, kind Kind, reference string) (observed store.Value, dueAt time.Time, err error) {
	key, err := RefKey(kind, reference)
	if err != nil {
		return nil, time.Time{}, err
	}
	v, ok, err := s.Get(ctx, p, key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("timers: read %v timer reference: %w", kind, err)
	}
	if !ok {
		return nil, time.Time{}, nil
	}
	due, err := DecodeRef(v)
	if err != nil {
		return nil, time.Time{}, err
	}
	return v, due, nil
}

// DecodeRef decodes a timer reference entry's value: the timer's due time.
// It decodes the entries of every version (a U64Value; a TimerRefV2 while
// the timer carries failed attempts or a period's scheduled time). It
// fails with an error wrapping store.ErrNewerVersion for an entry of a
// version newer than this binary reads (written by a newer one), and with
// an error wrapping store.ErrCorrupt for any other bytes that do not
// decode.
func DecodeRef(v store.Value) (dueAt time.Time, err error) {
	due, err := decodeRef(v)
	if err != nil {
		return time.Time{}, err
	}
	return store.DecodeTime(due), nil
}

// decodeRef is DecodeRef, in the milliseconds the entry holds.
func decodeRef(v store.Value) (dueAtMs uint64, err error) {
	st, err := decodeRefState(v)
	return st.due, err
}

// refState is what a reference entry holds: the timer's due time, the
// attempts its handler failed since it last succeeded and the last
// failure's text, and the scheduled time of the period a periodic timer
// is in when it is not the due time (0); and the store's mkit format it
// is written at (0: 1), which decides whether the rest is kept (see
// DowngradeTimerRefV2).
type refState struct {
	due      uint64
	attempts uint32
	lastErr  string
	periodAt uint64
	format   uint32
}

// plain reports whether the state is a due time only: its entry is the
// U64Value every timer had before retry policies.
func (st refState) plain() bool {
	return st.attempts == 0 && st.periodAt == 0 && st.lastErr == ""
}

// refVersions converts a reference entry between the versions of its
// family (gen.TimerRefKeyVersions).
type refVersions struct{}

// UpgradeU64Value reads an entry written before retry policies, a due time
// only, as a TimerRefV2 without attempts or a period's time.
func (refVersions) UpgradeU64Value(v gen.U64Value) (gen.TimerRefV2, error) {
	return gen.TimerRefV2{DueAtMs: v.Value}, nil
}

// DowngradeTimerRefV2 keeps the due time of an entry for a store at mkit
// format 1, which predates TimerRefV2 (see "Stores at mkit format 1" in
// the package doc): the failed attempts, the last error and a period's
// scheduled time are not kept across fires there.
func (refVersions) DowngradeTimerRefV2(v gen.TimerRefV2) (gen.U64Value, error) {
	return gen.U64Value{Value: v.DueAtMs}, nil
}

// refValues reads and writes reference entries in every version.
var refValues = gen.NewTimerRefKeyValues(refVersions{})

// decodeRefState decodes a reference entry of any version. It fails with
// an error wrapping store.ErrNewerVersion or store.ErrCorrupt.
func decodeRefState(v store.Value) (refState, error) {
	var r gen.TimerRefV2
	if err := refValues.DecodeInto(v, &r); err != nil {
		return refState{}, fmt.Errorf("timers: timer reference entry: %w", err)
	}
	return refState{due: r.DueAtMs, attempts: r.Attempts, lastErr: r.LastError, periodAt: r.PeriodAtMs}, nil
}

// encodeRef encodes a timer reference entry's value: a plain due time, a
// U64Value at any format (a version every reader of the family reads).
func encodeRef(dueAtMs uint64) store.Value {
	v, err := gen.EncodeU64Value(gen.U64Value{Value: dueAtMs})
	if err != nil {
		// A U64Value has no rule a uint64 can break.
		panic(fmt.Sprintf("timers: encode timer reference: %v", err))
	}
	return v
}

// encodeRefState encodes st: a U64Value when it is plain, else the newest
// version st.format allows (a TimerRefV2 from mkit format 2 on, a
// U64Value of its due time at format 1).
func encodeRefState(st refState) store.Value {
	if st.plain() {
		return encodeRef(st.due)
	}
	v, err := refValues.Encode(gen.TimerRefV2{DueAtMs: st.due, Attempts: st.attempts, LastError: st.lastErr, PeriodAtMs: st.periodAt}, max(st.format, 1))
	if err != nil {
		// truncError bounds the text; nothing else has a rule, and every
		// format from 1 allows a version (the U64Value).
		panic(fmt.Sprintf("timers: encode timer reference: %v", err))
	}
	return v
}

// Schedule adds to b what writes timer t: guarded by the reference entry
// still holding observedRef (nil: there is no timer of t's kind and
// reference), it deletes the timer row observedRef names (if any), puts the
// new timer row and reference entry, and asks the store to wake the
// partition at t.DueAt (b.WakeAt). The timer it writes has no failed
// attempts, whatever the one it replaces had; for a periodic kind t.DueAt
// is its first scheduled time (see KindConfig.Period).
//
// It adds nothing and fails with an error wrapping store.ErrInvalid when
// t.Kind is 0, t.DueAt is the zero Time or before the Unix epoch (or
// within its first millisecond), t.Reference is over gen.MaxTimerKeyReference
// bytes, or a key or t.Value is over caps (the store's Capabilities); as
// DecodeRef does when observedRef does not decode. It writes timers of
// either kind range (see Kind): the library's own writers schedule its
// reserved kinds through it.
func Schedule(b *store.Batch, caps store.Capabilities, observedRef store.Value, t Timer) error {
	if t.Kind == 0 {
		return fmt.Errorf("timers: schedule a timer: %w", t.Kind.checkUsable(true))
	}
	dueMs, err := store.EncodeTime(t.DueAt)
	if err != nil {
		return fmt.Errorf("timers: schedule %v timer: %w", t.Kind, err)
	}
	if dueMs == 0 {
		return fmt.Errorf("timers: schedule %v timer at time 0: %w", t.Kind, store.ErrInvalid)
	}
	if len(t.Value) > caps.MaxValueBytes {
		return fmt.Errorf("timers: %v timer value has %d bytes, limit %d: %w",
			t.Kind, len(t.Value), caps.MaxValueBytes, store.ErrInvalid)
	}
	refKey, err := RefKey(t.Kind, t.Reference)
	if err != nil {
		return err
	}
	key, err := timerKey(dueMs, t.Kind, t.Reference)
	if err != nil {
		return err
	}
	if len(key) > caps.MaxKeyBytes {
		return fmt.Errorf("timers: %v timer key has %d bytes, limit %d: %w",
			t.Kind, len(key), caps.MaxKeyBytes, store.ErrInvalid)
	}
	var old store.Key
	if observedRef != nil {
		due, err := decodeRef(observedRef)
		if err != nil {
			return err
		}
		if due != dueMs {
			// The reference bounds the key: this cannot fail once key did not.
			old, _ = timerKey(due, t.Kind, t.Reference)
		}
	}
	b.Require(store.Guard(refKey, observedRef))
	if old != nil {
		b.Delete(old)
	}
	b.Put(key, t.Value).Put(refKey, encodeRef(dueMs)).WakeAt(wakeTime(dueMs))
	return nil
}

// Cancel adds to b what deletes timer (kind, reference): guarded by the
// reference entry still holding observedRef, it deletes the timer row and
// the entry. With observedRef nil it adds only the guard that there is
// still no such timer. It adds nothing and fails like Schedule.
func Cancel(b *store.Batch, observedRef store.Value, kind Kind, reference string) error {
	refKey, err := RefKey(kind, reference)
	if err != nil {
		return err
	}
	if observedRef == nil {
		b.Require(store.Absent(refKey))
		return nil
	}
	due, err := decodeRef(observedRef)
	if err != nil {
		return err
	}
	key, err := timerKey(due, kind, reference)
	if err != nil {
		return err
	}
	b.Require(store.Equals(refKey, observedRef)).Delete(key).Delete(refKey)
	return nil
}
