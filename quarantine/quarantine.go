// Package quarantine keeps the rows an operator moved aside from a queue of
// their partition, so that the queue resumes without them, and puts them
// back. It owns two key classes of the library's schema, keyed by the
// moved row's own key, so that a row is quarantined at most once at a
// time and restored by naming it:
//
//	QuarantineKey(key)       QuarantineV1: when, who, why; the row moved with
//	                         it; what the outcome backlog dropped by
//	QuarantineValueKey(key)  the moved row's value, byte for byte
//
// No handler reads these ranges: to its queue, a quarantined row is gone.
// Move and Restore move the row and its companion; what a row's queue must
// also change (a timer to re-arm, a backlog to keep exact) is the rule of
// the package that owns the row, whose operations call these:
// relay.QuarantineRow, outbox.QuarantinePending, timers.Quarantine and
// their restores. Every function is safe for concurrent use.
package quarantine

import (
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Bounds of a Note's texts, in bytes.
const (
	MaxWho    = gen.MaxQuarantineV1Who
	MaxReason = gen.MaxQuarantineV1Reason
)

// Note says who moved a row aside, when and why.
type Note struct {
	At     time.Time
	Who    string // at most MaxWho bytes
	Reason string // at most MaxReason bytes
}

// Entry is a row moved aside: its key and value, the row moved with it
// (the reference entry of a timer row), and what the partition's outcome
// backlog dropped by when the row was a pending outcome (see
// outbox.QuarantinePending), which a restore adds back.
type Entry struct {
	Note
	Key            store.Key
	Value          store.Value
	Companion      store.Key // nil: none
	CompanionValue store.Value
	BacklogRows    uint64
	BacklogBytes   uint64

	// record and value are the rows' values as Read read them: Restore
	// requires them unchanged.
	record, value store.Value
}

// Record returns the quarantine record's stored value as Read read it (nil
// for an Entry Read did not return): what a caller compares with a
// revision it showed.
func (e Entry) Record() store.Value { return e.record }

// Keys returns the keys of the quarantine record and the moved value of a
// row at key, for a reader that lists quarantined rows (Read reads one).
// It fails with an error wrapping store.ErrInvalid for a key too long to
// quarantine.
func Keys(key store.Key) (record, value store.Key, err error) {
	if record, err = gen.AppendQuarantineKey(nil, key); err == nil {
		value, err = gen.AppendQuarantineValueKey(nil, key)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("quarantine: the key is too long to quarantine: %w", err)
	}
	return record, value, nil
}

// Move adds to b what moves the row e names aside: guarded on the row
// still holding e.Value, on its companion (if any) still holding
// e.CompanionValue and on the key being quarantined by nothing, it deletes
// both and writes the quarantine record (e's note, companion and backlog
// drop) and the row's value. It reads r's partition to tell a row that is
// quarantined already.
//
// It adds nothing and fails with an error wrapping ErrQuarantined when the
// key is quarantined already; with store.ErrInvalid for an empty key, a
// nil value, a key too long to quarantine, or a note the record cannot
// hold (a time before the Unix epoch, texts over MaxWho or MaxReason
// bytes); and with the store's errors.
func Move(ctx context.Context, r store.Reader, b *store.Batch, e Entry) error {
	if len(e.Key) == 0 || e.Value == nil {
		return fmt.Errorf("quarantine: move aside: no row: %w", store.ErrInvalid)
	}
	qk, qvk, err := Keys(e.Key)
	if err != nil {
		return err
	}
	at, err := store.EncodeTime(e.At)
	if err != nil {
		return fmt.Errorf("quarantine: move aside: %w", err)
	}
	rec, err := gen.EncodeQuarantineV1(gen.QuarantineV1{AtMs: at, Who: e.Who, Reason: e.Reason,
		Companion: e.Companion, CompanionValue: e.CompanionValue, BacklogRows: e.BacklogRows, BacklogBytes: e.BacklogBytes})
	if err != nil {
		return fmt.Errorf("quarantine: move aside: %w", err)
	}
	vs, err := r.GetMany(ctx, []store.Key{qk, qvk})
	if err != nil {
		return fmt.Errorf("quarantine: read %s: %w", store.PartitionName(r.Partition()), err)
	}
	if vs[0] != nil || vs[1] != nil {
		return ErrQuarantined
	}
	b.Require(store.Equals(e.Key, e.Value), store.Absent(qk), store.Absent(qvk)).Delete(e.Key)
	if e.Companion != nil {
		b.Require(store.Equals(e.Companion, e.CompanionValue)).Delete(e.Companion)
	}
	b.Put(qk, rec).Put(qvk, e.Value)
	return nil
}

// Read reads what is quarantined at key in r's partition. It fails with
// an error wrapping ErrNotQuarantined when nothing is; with store.ErrCorrupt
// when the record does not decode or the value row beside it is missing;
// with store.ErrInvalid for a key too long to quarantine; and with the
// store's errors.
func Read(ctx context.Context, r store.Reader, key store.Key) (Entry, error) {
	qk, qvk, err := Keys(key)
	if err != nil {
		return Entry{}, err
	}
	vs, err := r.GetMany(ctx, []store.Key{qk, qvk})
	if err != nil {
		return Entry{}, fmt.Errorf("quarantine: read %s: %w", store.PartitionName(r.Partition()), err)
	}
	q, qv := vs[0], vs[1]
	if q == nil {
		return Entry{}, ErrNotQuarantined
	}
	rec, err := gen.DecodeQuarantineV1(q)
	if err != nil {
		return Entry{}, fmt.Errorf("quarantine: the record: %w", err)
	}
	if qv == nil {
		return Entry{}, fmt.Errorf("quarantine: the moved row's value is missing beside its record: %w", store.ErrCorrupt)
	}
	return Entry{
		Note:           Note{At: store.DecodeTime(rec.AtMs), Who: rec.Who, Reason: rec.Reason},
		Key:            key,
		Value:          qv,
		Companion:      rec.Companion,
		CompanionValue: rec.CompanionValue,
		BacklogRows:    rec.BacklogRows,
		BacklogBytes:   rec.BacklogBytes,
		record:         q,
		value:          qv,
	}, nil
}

// Restore adds to b what puts the row e (as Read returned it) back, byte
// for byte, with its companion: guarded on the quarantine record and value
// still as read and on the row's key and its companion's being free, it
// writes both and deletes the quarantine rows. What the row's queue needs
// besides is its owner's (see the package doc).
//
// It adds nothing and fails with an error wrapping ErrOccupied when a row
// is at the key or the companion's key again; with store.ErrInvalid for
// an Entry Read did not return; and with the store's errors.
func Restore(ctx context.Context, r store.Reader, b *store.Batch, e Entry) error {
	if e.record == nil {
		return fmt.Errorf("quarantine: restore an entry Read did not return: %w", store.ErrInvalid)
	}
	qk, qvk, err := Keys(e.Key)
	if err != nil {
		return err
	}
	at := []store.Key{e.Key}
	if e.Companion != nil {
		at = append(at, e.Companion)
	}
	vs, err := r.GetMany(ctx, at)
	if err != nil {
		return fmt.Errorf("quarantine: read %s: %w", store.PartitionName(r.Partition()), err)
	}
	for i, v := range vs {
		if v != nil {
			return &OccupiedError{Key: at[i], Value: v}
		}
	}
	b.Require(store.Equals(qk, e.record), store.Equals(qvk, e.value), store.Absent(e.Key)).
		Put(e.Key, e.value).Delete(qk).Delete(qvk)
	if e.Companion != nil {
		b.Require(store.Absent(e.Companion)).Put(e.Companion, e.CompanionValue)
	}
	return nil
}
