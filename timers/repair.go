package timers

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: repairs. An operator's repair (package admin) changes
// timers only through the functions below, each adding its guards and
// writes to the caller's batch and adding nothing when it fails, so that
// what a timer is (two rows moved together, the wake time lowered with
// them) is stated here only. They read through a store.Reader, so that
// they can be steps of store.Transact.

// Moved is a timer's move by Rearm or RedriveTimer: From, the due time it
// had (the zero Time when Rearm created it), and To, the due time it has.
type Moved struct {
	From, To time.Time
}

// Ranges of the timer rows and reference entries.
var (
	timerRowStart, timerRowEnd = gen.ClassRange(gen.TagTimerKey)
	timerRefStart, timerRefEnd = gen.ClassRange(gen.TagTimerRefKey)
)

func inRange(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && bytes.Compare(key, end) < 0
}

// Rearm adds to b what makes the timer (t.Kind, t.Reference) of r's
// partition due at t.DueAt: an existing timer moves there with its value
// (guarded on its reference entry and its row as read; a row its entry
// names but that is missing is written again with t.Value), with no failed
// attempts; an absent one is created with t.Value (guarded on its
// absence). The library's handlers re-arm their queue timers with it.
//
// It adds nothing and fails as Schedule does, as DecodeRef does when the
// reference entry does not decode, and with the store's errors.
func Rearm(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, t Timer) (Moved, error) {
	refKey, err := RefKey(t.Kind, t.Reference)
	if err != nil {
		return Moved{}, err
	}
	ref, _, err := r.Get(ctx, refKey)
	if err != nil {
		return Moved{}, fmt.Errorf("timers: read %v timer reference: %w", t.Kind, err)
	}
	nb := store.NewBatch()
	var m Moved
	if ref != nil {
		due, err := decodeRef(ref)
		if err != nil {
			return Moved{}, err
		}
		m.From = store.DecodeTime(due)
		key, err := timerKey(due, t.Kind, t.Reference)
		if err != nil {
			return Moved{}, err
		}
		v, ok, err := r.Get(ctx, key)
		if err != nil {
			return Moved{}, fmt.Errorf("timers: read %v timer: %w", t.Kind, err)
		}
		if ok {
			nb.Require(store.Equals(key, v))
			t.Value = v
		}
	}
	if err := Schedule(nb, caps, ref, t); err != nil {
		return Moved{}, err
	}
	due, _ := store.EncodeTime(t.DueAt) // Schedule checked it
	m.To = store.DecodeTime(due)
	b.Merge(nb)
	return m, nil
}

// RedriveTimer adds to b what moves the timer (kind, reference) of r's
// partition to at, its value unchanged and its failed attempts cleared,
// guarded on its reference entry and its row as read, so that a
// scheduler fires it at its next tick. A timer due at or before at is
// left as it is: nothing is added, and the Moved it returns has To equal
// to From. (A timer of a kind the service registers no handler for is
// held again when it fires: see RunConfig.HeldBackoff.) To re-drive a dead
// letter, use Redrive.
//
// It adds nothing and fails with an error wrapping ErrNoTimer when there
// is no such timer; as DecodeRef does when its reference entry does not
// decode, and with store.ErrCorrupt when it names a timer row that is
// missing (quarantine the entry, see Quarantine); as Schedule does; and
// with the store's errors.
func RedriveTimer(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, kind Kind, reference string, at time.Time) (Moved, error) {
	atMs, err := store.EncodeTime(at)
	if err != nil {
		return Moved{}, fmt.Errorf("timers: redrive %v timer: %w", kind, err)
	}
	refKey, err := RefKey(kind, reference)
	if err != nil {
		return Moved{}, err
	}
	ref, ok, err := r.Get(ctx, refKey)
	if err != nil {
		return Moved{}, fmt.Errorf("timers: read %v timer reference: %w", kind, err)
	}
	if !ok {
		return Moved{}, fmt.Errorf("timers: redrive the %v timer %q: %w", kind, reference, ErrNoTimer)
	}
	due, err := decodeRef(ref)
	if err != nil {
		return Moved{}, err
	}
	key, err := timerKey(due, kind, reference)
	if err != nil {
		return Moved{}, err
	}
	value, ok, err := r.Get(ctx, key)
	if err != nil {
		return Moved{}, fmt.Errorf("timers: read %v timer: %w", kind, err)
	}
	if !ok {
		return Moved{}, fmt.Errorf("timers: the reference entry of the %v timer %q names a timer row due at %s that is missing: %w",
			kind, reference, store.DecodeTime(due).UTC().Format(time.RFC3339Nano), store.ErrCorrupt)
	}
	m := Moved{From: store.DecodeTime(due), To: store.DecodeTime(due)}
	if due <= atMs {
		return m, nil
	}
	nb := store.NewBatch().Require(store.Equals(key, value))
	if err := Schedule(nb, caps, ref, Timer{Kind: kind, Reference: reference, DueAt: at, Value: value}); err != nil {
		return Moved{}, err
	}
	m.To = store.DecodeTime(atMs)
	b.Merge(nb)
	return m, nil
}

// QuarantinedTimer is what Quarantine moves aside: Entry, the timer row
// with its reference entry as companion when the entry names it (or the
// row or entry named, alone, when its pair is missing or does not
// decode); and KeptRef, the reference entry of the row's (kind,
// reference) when it names another row: it stays, guarded as read.
type QuarantinedTimer struct {
	Entry   quarantine.Entry
	KeptRef store.Key
}

// Quarantine adds to b what moves the timer whose row or reference entry
// is at key of r's partition aside (package quarantine), with n: the row
// and its reference entry move together, named by either, under the row's
// key, so that no half of a timer is left to fire or to be scheduled
// over. Removing a timer lowers no wake time; Restore raises none it
// should not. A row or entry whose pair is missing, or does not name it,
// moves alone.
//
// The queue timers of the library's handlers, KindRelay's and
// KindOutcomeDelivery's, are refused: their queues would be left without
// the timer that drains them (quarantine the row that holds the queue, or
// move the timer with RedriveTimer).
//
// It adds nothing and fails with an error wrapping store.ErrInvalid for a
// key that is neither a timer row's nor a reference entry's, a queue
// timer, or a note quarantine.Move refuses; quarantine.ErrNoRow when no
// row is at key; quarantine.ErrQuarantined when it is quarantined already;
// and with the store's errors.
func Quarantine(ctx context.Context, r store.Reader, b *store.Batch, key store.Key, n quarantine.Note) (QuarantinedTimer, error) {
	isRow, isRef := inRange(key, timerRowStart, timerRowEnd), inRange(key, timerRefStart, timerRefEnd)
	if !isRow && !isRef {
		return QuarantinedTimer{}, fmt.Errorf("timers: quarantine %x: neither a timer row's key nor a reference entry's: %w", key, store.ErrInvalid)
	}
	v, ok, err := r.Get(ctx, key)
	if err != nil {
		return QuarantinedTimer{}, fmt.Errorf("timers: read %s: %w", store.PartitionName(r.Partition()), err)
	}
	if !ok {
		return QuarantinedTimer{}, quarantine.ErrNoRow
	}
	q := QuarantinedTimer{Entry: quarantine.Entry{Note: n, Key: key, Value: v}}
	nb := store.NewBatch()
	if isRef {
		err = q.pairRef(ctx, r)
	} else {
		err = q.pairRow(ctx, r, nb)
	}
	if err != nil {
		return QuarantinedTimer{}, err
	}
	if err := quarantine.Move(ctx, r, nb, q.Entry); err != nil {
		return QuarantinedTimer{}, err
	}
	b.Merge(nb)
	return q, nil
}

// pairRef pairs the reference entry q holds with the timer row it names:
// the row moves, the entry as its companion.
func (q *QuarantinedTimer) pairRef(ctx context.Context, r store.Reader) error {
	rk, kerr := gen.ParseTimerRefKey(q.Entry.Key)
	due, derr := decodeRef(q.Entry.Value)
	if kerr != nil || derr != nil {
		return nil
	}
	kind := Kind(rk.Kind)
	key, err := timerKey(due, kind, rk.Reference)
	if err != nil {
		return nil
	}
	v, ok, err := r.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("timers: read %v timer: %w", kind, err)
	}
	if !ok {
		return nil
	}
	if err := refuseQueueTimer(kind); err != nil {
		return err
	}
	e := &q.Entry
	e.Companion, e.CompanionValue = e.Key, e.Value
	e.Key, e.Value = key, v
	return nil
}

// pairRow pairs the timer row q holds with its reference entry, when the
// entry names it; otherwise the entry stays, guarded in b as read.
func (q *QuarantinedTimer) pairRow(ctx context.Context, r store.Reader, b *store.Batch) error {
	tk, err := gen.ParseTimerKey(q.Entry.Key)
	if err != nil {
		return nil
	}
	kind := Kind(tk.Kind)
	if err := refuseQueueTimer(kind); err != nil {
		return err
	}
	rk, err := RefKey(kind, tk.Reference)
	if err != nil {
		return nil
	}
	rv, ok, err := r.Get(ctx, rk)
	if err != nil {
		return fmt.Errorf("timers: read %v timer reference: %w", kind, err)
	}
	if due, derr := decodeRef(rv); ok && derr == nil && due == tk.DueAtMs {
		q.Entry.Companion, q.Entry.CompanionValue = rk, rv
		return nil
	}
	b.Require(store.Guard(rk, rv))
	if ok {
		q.KeptRef = rk
	}
	return nil
}

// refuseQueueTimer refuses to quarantine the timer of a library queue.
func refuseQueueTimer(k Kind) error {
	if k == KindRelay || k == KindOutcomeDelivery {
		return fmt.Errorf("timers: the %v timer drains its queue and is not quarantined: quarantine the row that holds it, or move the timer: %w", k, store.ErrInvalid)
	}
	return nil
}

// Restore adds to b what puts the timer row or reference entry e names
// (as quarantine.Read returned it) back with its companion
// (quarantine.Restore), and, for a timer row, lowers the partition's wake
// time to its due time, which it returns (the zero Time for a reference
// entry restored alone).
//
// It adds nothing and fails with an error wrapping store.ErrInvalid for
// an entry whose key is neither a timer row's nor a reference entry's; as
// quarantine.Restore does; and with the store's errors.
func Restore(ctx context.Context, r store.Reader, b *store.Batch, e quarantine.Entry) (time.Time, error) {
	if !inRange(e.Key, timerRowStart, timerRowEnd) && !inRange(e.Key, timerRefStart, timerRefEnd) {
		return time.Time{}, fmt.Errorf("timers: restore %x: neither a timer row's key nor a reference entry's: %w", e.Key, store.ErrInvalid)
	}
	nb := store.NewBatch()
	if err := quarantine.Restore(ctx, r, nb, e); err != nil {
		return time.Time{}, err
	}
	var wake time.Time
	if tk, err := gen.ParseTimerKey(e.Key); err == nil {
		wake = store.DecodeTime(max(tk.DueAtMs, 1))
		nb.WakeAt(wakeTime(max(tk.DueAtMs, 1)))
	}
	b.Merge(nb)
	return wake, nil
}
