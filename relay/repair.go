package relay

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: repairs. An operator's repair (package admin) changes a
// source's relay state only through the functions below, each adding its
// guards and writes to the caller's batch and adding nothing when it
// fails. A relay row moved aside leaves a gap in the sequences, which the
// relay tolerates (the scan cursor is a sequence, not a row); what a
// repair must fix is the relay timer: a corrupt row's hold (see
// Corrupt rows in the package doc) is the row's, so it ends with it, and
// a row put back must be relayed again.

// QuarantineRow adds to b what moves the relay row at key of r's
// partition (the source) aside (package quarantine), with n, and moves the
// relay timer to n.At with its hold cleared (creating it when absent), so
// that the relay delivers the rows behind it at its next fire. It returns
// the moved row and the relay timer's move.
//
// It adds nothing and fails with an error wrapping store.ErrInvalid for a
// key that is no relay row's or a note quarantine.Move refuses;
// quarantine.ErrNoRow when no row is at key; quarantine.ErrQuarantined
// when it is quarantined already; store.ErrCorrupt when the relay timer's
// reference entry does not decode; and with the store's errors.
func QuarantineRow(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, key store.Key, n quarantine.Note) (quarantine.Entry, timers.Moved, error) {
	if !isRelayRow(key) {
		return quarantine.Entry{}, timers.Moved{}, fmt.Errorf("relay: quarantine %x: not a relay row's key: %w", key, store.ErrInvalid)
	}
	v, ok, err := r.Get(ctx, key)
	if err != nil {
		return quarantine.Entry{}, timers.Moved{}, fmt.Errorf("relay: read %s: %w", store.PartitionName(r.Partition()), err)
	}
	if !ok {
		return quarantine.Entry{}, timers.Moved{}, quarantine.ErrNoRow
	}
	e := quarantine.Entry{Note: n, Key: key, Value: v}
	nb := store.NewBatch()
	if err := quarantine.Move(ctx, r, nb, e); err != nil {
		return quarantine.Entry{}, timers.Moved{}, err
	}
	m, err := releaseHold(ctx, r, nb, caps, n.At)
	if err != nil {
		return quarantine.Entry{}, timers.Moved{}, err
	}
	b.Merge(nb)
	return e, m, nil
}

// RestoreRow adds to b what puts the relay row e names (as
// quarantine.Read returned it) back (quarantine.Restore) and moves the
// relay timer to at with its hold cleared (creating it when absent), so
// that the relay delivers the row, or is held by it again, at its next
// fire.
//
// It adds nothing and fails with an error wrapping store.ErrInvalid for
// an entry whose key is no relay row's; as quarantine.Restore does;
// with store.ErrCorrupt when the relay timer's reference entry does not
// decode; and with the store's errors.
func RestoreRow(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, e quarantine.Entry, at time.Time) (timers.Moved, error) {
	if !isRelayRow(e.Key) {
		return timers.Moved{}, fmt.Errorf("relay: restore %x: not a relay row's key: %w", e.Key, store.ErrInvalid)
	}
	nb := store.NewBatch()
	if err := quarantine.Restore(ctx, r, nb, e); err != nil {
		return timers.Moved{}, err
	}
	m, err := releaseHold(ctx, r, nb, caps, at)
	if err != nil {
		return timers.Moved{}, err
	}
	b.Merge(nb)
	return m, nil
}

// Unblocked is what Unblock read of a source's scan state: the cycle's
// end, the cursor and the targets blocked (the unblocked one among them),
// and the relay timer's move.
type Unblocked struct {
	CycleEnd, Cursor uint64
	Blocked          [][]byte
	Timer            timers.Moved
}

// Unblock adds to b what removes target (a partition's tuple identity) from
// the blocked targets of the scan state of r's partition (the source),
// guarded on the state as read, and moves the relay timer to at with its
// value (creating it when absent), so that the relay retries the target
// at its next fire instead of at the next cycle.
//
// It adds nothing and fails with an error wrapping ErrNotBlocked when the
// target is not blocked or the source has no scan state (the Unblocked it
// returns then holds the state read); with store.ErrInvalid for an empty
// target; with store.ErrCorrupt when the scan state or the relay timer's
// reference entry does not decode; and with the store's errors.
func Unblock(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, target []byte, at time.Time) (Unblocked, error) {
	if len(target) == 0 {
		return Unblocked{}, fmt.Errorf("relay: unblock an empty target: %w", store.ErrInvalid)
	}
	sv, ok, err := r.Get(ctx, scanKey)
	if err != nil {
		return Unblocked{}, fmt.Errorf("relay: read the scan state of %s: %w", store.PartitionName(r.Partition()), err)
	}
	if !ok {
		return Unblocked{}, fmt.Errorf("relay: %s has no scan state: %w", store.PartitionName(r.Partition()), ErrNotBlocked)
	}
	scan, err := gen.DecodeRelayScanV1(sv)
	if err != nil {
		return Unblocked{}, fmt.Errorf("relay: the scan state of %s: %w", store.PartitionName(r.Partition()), err)
	}
	u := Unblocked{CycleEnd: scan.CycleEnd, Cursor: scan.Cursor, Blocked: scan.Blocked}
	i := slices.IndexFunc(scan.Blocked, func(t []byte) bool { return bytes.Equal(t, target) })
	if i < 0 {
		return u, fmt.Errorf("relay: %x in %s: %w", target, store.PartitionName(r.Partition()), ErrNotBlocked)
	}
	scan.Blocked = slices.Delete(slices.Clone(scan.Blocked), i, i+1)
	nv, err := gen.EncodeRelayScanV1(scan)
	if err != nil {
		return Unblocked{}, fmt.Errorf("relay: encode the scan state of %s: %w", store.PartitionName(r.Partition()), err)
	}
	nb := store.NewBatch().Require(store.Equals(scanKey, sv)).Put(scanKey, nv)
	if u.Timer, err = timers.Rearm(ctx, r, nb, caps, timers.Timer{Kind: timers.KindRelay, DueAt: at}); err != nil {
		return Unblocked{}, fmt.Errorf("relay: relay timer: %w", err)
	}
	b.Merge(nb)
	return u, nil
}

// isRelayRow reports whether key is in the relay rows' range.
func isRelayRow(key store.Key) bool {
	return bytes.Compare(key, queueStart) >= 0 && bytes.Compare(key, queueEnd) < 0
}

// releaseHold adds to b what moves the relay timer of r's partition to at
// with an empty value (no hold), guarded on its reference entry as read,
// or creates it there when absent.
func releaseHold(ctx context.Context, r store.Reader, b *store.Batch, caps store.Capabilities, at time.Time) (timers.Moved, error) {
	refKey, err := timers.RefKey(timers.KindRelay, "")
	if err != nil {
		return timers.Moved{}, err
	}
	ref, _, err := r.Get(ctx, refKey)
	if err != nil {
		return timers.Moved{}, fmt.Errorf("relay: read the relay timer of %s: %w", store.PartitionName(r.Partition()), err)
	}
	var m timers.Moved
	if ref != nil {
		if m.From, err = timers.DecodeRef(ref); err != nil {
			return timers.Moved{}, fmt.Errorf("relay: relay timer: %w", err)
		}
	}
	if err := timers.Schedule(b, caps, ref, timers.Timer{Kind: timers.KindRelay, DueAt: at}); err != nil {
		return timers.Moved{}, fmt.Errorf("relay: relay timer: %w", err)
	}
	ms, _ := store.EncodeTime(at) // Schedule checked it
	m.To = store.DecodeTime(ms)
	return m, nil
}
