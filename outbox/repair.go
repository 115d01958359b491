package outbox

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// BacklogChange is what a repair's batch does to a partition's outcome
// backlog: the backlog as read (Before) and as the batch leaves it
// (After), and the outcome-delivery timer, which exists exactly when the
// backlog has rows (see Timers in the package doc): TimerDeleted when the
// batch empties the backlog, Timer when it fills an empty one and creates
// or moves the timer.
type BacklogChange struct {
	Before, After gen.Backlog
	TimerDeleted  bool
	Timer         *timers.Moved
}

// QuarantinePending adds to b what moves the pending outcome row at key of
// r's partition aside (package quarantine), with n, taking it out of the
// backlog exactly as an acknowledgment would: one row and its record's
// bytes (the record read and guarded), the backlog guarded as read. When
// that empties the backlog, the backlog and the outcome-delivery timer go
// in the same batch. The quarantine entry keeps what the backlog dropped
// by, which RestorePending adds back.
//
// It adds nothing and fails with an error wrapping store.ErrInvalid for a
// key that is no pending outcome row's or a note quarantine.Move refuses;
// quarantine.ErrNoRow when no row is at key; quarantine.ErrQuarantined
// when it is quarantined already; store.ErrCorrupt when the backlog or the
// delivery timer's reference entry does not decode; and with the store's
// errors.
func QuarantinePending(ctx context.Context, r store.Reader, b *store.Batch, key store.Key, n quarantine.Note) (quarantine.Entry, BacklogChange, error) {
	if !isPending(key) {
		return quarantine.Entry{}, BacklogChange{}, fmt.Errorf("outbox: quarantine %x: not a pending outcome row's key: %w", key, store.ErrInvalid)
	}
	v, ok, err := r.Get(ctx, key)
	if err != nil {
		return quarantine.Entry{}, BacklogChange{}, fmt.Errorf("outbox: read %s: %w", store.PartitionName(r.Partition()), err)
	}
	if !ok {
		return quarantine.Entry{}, BacklogChange{}, quarantine.ErrNoRow
	}
	nb := store.NewBatch()
	bv, before, err := readBacklog(ctx, r, nb)
	if err != nil {
		return quarantine.Entry{}, BacklogChange{}, err
	}
	var recordBytes uint64
	if pv, err := DecodePending(v); err == nil && len(pv.Key) > 0 {
		rv, ok, err := r.Get(ctx, pv.Key)
		if err != nil {
			return quarantine.Entry{}, BacklogChange{}, fmt.Errorf("outbox: read %s: %w", store.PartitionName(r.Partition()), err)
		}
		nb.Require(store.Guard(pv.Key, rv))
		if ok {
			recordBytes = uint64(len(rv))
		}
	}
	e := quarantine.Entry{Note: n, Key: key, Value: v}
	if before.Rows > 0 {
		e.BacklogRows = 1
	}
	e.BacklogBytes = min(recordBytes, before.Bytes)
	ch := BacklogChange{Before: before, After: gen.Backlog{Rows: before.Rows - e.BacklogRows, Bytes: before.Bytes - e.BacklogBytes}}
	if err := quarantine.Move(ctx, r, nb, e); err != nil {
		return quarantine.Entry{}, BacklogChange{}, err
	}
	if ch.After.Rows == 0 {
		ref, _, err := r.Get(ctx, deliveryRef)
		if err != nil {
			return quarantine.Entry{}, BacklogChange{}, fmt.Errorf("outbox: read %s: %w", store.PartitionName(r.Partition()), err)
		}
		if err := timers.Cancel(nb, ref, timers.KindOutcomeDelivery, ""); err != nil {
			return quarantine.Entry{}, BacklogChange{}, fmt.Errorf("outbox: outcome-delivery timer: %w", err)
		}
		ch.TimerDeleted = ref != nil
	}
	if err := putBacklog(nb, bv, ch.After); err != nil {
		return quarantine.Entry{}, BacklogChange{}, err
	}
	b.Merge(nb)
	return e, ch, nil
}

// RestorePending adds to b what puts the pending outcome row e names back
// (quarantine.Restore) and adds what its quarantine took out of the
// backlog back, the backlog guarded as read; when the backlog was empty,
// the outcome-delivery timer is created due at at, or moved there with
// its value when it exists.
//
// It adds nothing and fails with an error wrapping store.ErrInvalid for
// an entry whose key is no pending outcome row's; with
// quarantine.ErrOccupied when a row is at its key again; with
// store.ErrCorrupt when the backlog or the delivery timer does not decode;
// as timers.Rearm does; and with the store's errors.
func RestorePending(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, e quarantine.Entry, at time.Time) (BacklogChange, error) {
	if !isPending(e.Key) {
		return BacklogChange{}, fmt.Errorf("outbox: restore %x: not a pending outcome row's key: %w", e.Key, store.ErrInvalid)
	}
	nb := store.NewBatch()
	if err := quarantine.Restore(ctx, r, nb, e); err != nil {
		return BacklogChange{}, err
	}
	bv, before, err := readBacklog(ctx, r, nb)
	if err != nil {
		return BacklogChange{}, err
	}
	ch := BacklogChange{Before: before, After: gen.Backlog{Rows: before.Rows + e.BacklogRows, Bytes: before.Bytes + e.BacklogBytes}}
	if ch.After != before {
		if err := putBacklog(nb, bv, ch.After); err != nil {
			return BacklogChange{}, err
		}
	}
	if before.Rows == 0 && ch.After.Rows > 0 {
		m, err := timers.Rearm(ctx, r, nb, caps, timers.Timer{Kind: timers.KindOutcomeDelivery, DueAt: at, Value: newDeliveryTimer})
		if err != nil {
			return BacklogChange{}, fmt.Errorf("outbox: outcome-delivery timer: %w", err)
		}
		ch.Timer = &m
	}
	b.Merge(nb)
	return ch, nil
}

// isPending reports whether key is in the pending outcome rows' range.
func isPending(key store.Key) bool {
	return bytes.Compare(key, pendingStart) >= 0 && bytes.Compare(key, pendingEnd) < 0
}

// readBacklog reads the backlog and adds its guard, as read, to b.
func readBacklog(ctx context.Context, r store.Reader, b *store.Batch) (store.Value, gen.Backlog, error) {
	bv, _, err := r.Get(ctx, backlogKey)
	if err != nil {
		return nil, gen.Backlog{}, fmt.Errorf("outbox: read the backlog of %s: %w", store.PartitionName(r.Partition()), err)
	}
	backlog, err := DecodeBacklog(bv)
	if err != nil {
		return nil, gen.Backlog{}, err
	}
	b.Require(store.Guard(backlogKey, bv))
	return bv, backlog, nil
}

// putBacklog adds to b the backlog's rewrite to left, or its delete when
// left has no rows (read as bv: nothing to delete when it was absent).
func putBacklog(b *store.Batch, bv store.Value, left gen.Backlog) error {
	if left.Rows == 0 {
		if bv != nil {
			b.Delete(backlogKey)
		}
		return nil
	}
	v, err := gen.EncodeBacklog(left)
	if err != nil {
		return fmt.Errorf("outbox: encode backlog: %w", err)
	}
	b.Put(backlogKey, v)
	return nil
}
