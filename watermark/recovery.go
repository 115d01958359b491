package watermark

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// CheckRecovery reads the lease recovery and reconcile markers of p, a
// coordinator partition or one TableConfig.HoldsMarkers admits, in one
// GetMany (one snapshot), and returns them. Check it before reading a
// watermark or shard set.
//
// It fails with an error wrapping store.ErrInvalid for another partition;
// with ErrGenerationChanged when expected is not nil and the markers are
// not exactly *expected (compared before they are decoded, so a marker
// rewritten with bytes that do not decode is a change too); with an
// error wrapping store.ErrCorrupt when a marker does not decode (or its
// recovery time is before the Unix epoch); with ErrRecovering while the
// recovery marker has a recovery time (TableConfig.RecoveryTime) and no
// reconciliation later than it is recorded; and with the store's error
// when the read fails.
func (t *Table[C, K, R, M, S]) CheckRecovery(ctx context.Context, s store.Store, p store.Partition, expected *Generation) (Generation, error) {
	if err := t.fence(p, "a lease recovery check"); err != nil {
		return Generation{}, err
	}
	name := store.PartitionName(p)
	rows, err := s.GetMany(ctx, p, t.markerKeys)
	if err != nil {
		return Generation{}, fmt.Errorf("watermark: read lease markers of %s: %w", name, err)
	}
	if len(rows) != len(t.markerKeys) {
		return Generation{}, fmt.Errorf("watermark: read lease markers of %s: %d rows for %d keys: %w", name, len(rows), len(t.markerKeys), store.ErrCorrupt)
	}
	g := Generation{Recovery: rows[0], Reconcile: rows[1]}
	if expected != nil && !expected.Equal(g) {
		return Generation{}, fmt.Errorf("%w: %s: the scan started with %s, the markers are now %s", ErrGenerationChanged, name, t.describe(*expected), t.describe(g))
	}
	// Every marker present is decoded, whatever the other says, so that a
	// corrupt one fails here and never reaches a checkpoint.
	var (
		at        uint64
		recovered bool
	)
	if g.Recovery != nil {
		if at, recovered, err = t.recoveryTime(g.Recovery); err != nil {
			return Generation{}, fmt.Errorf("watermark: lease recovery marker of %s: %w", name, err)
		}
	}
	var reconciled *uint64
	if g.Reconcile != nil {
		u, err := gen.DecodeU64Value(g.Reconcile)
		if err != nil {
			return Generation{}, fmt.Errorf("watermark: lease reconcile marker of %s: %w", name, err)
		}
		reconciled = &u.Value
	}
	if !recovered {
		return g, nil
	}
	if reconciled == nil {
		return Generation{}, fmt.Errorf("%w: %s recovered at %d ms and was never reconciled", ErrRecovering, name, at)
	}
	if *reconciled <= at {
		return Generation{}, fmt.Errorf("%w: %s recovered at %d ms, last reconciled at %d ms", ErrRecovering, name, at, *reconciled)
	}
	return g, nil
}

// recoveryTime decodes a recovery marker and applies the table's
// recovery-time rule: the recovery time as stored (milliseconds), and
// whether there is one. A marker that does not decode, or whose recovery
// time is before the Unix epoch, fails with an error wrapping
// store.ErrCorrupt.
func (t *Table[C, K, R, M, S]) recoveryTime(marker []byte) (uint64, bool, error) {
	m, err := t.c.DecodeRecovery(marker)
	if err != nil {
		return 0, false, corrupt(err)
	}
	at, ok := t.c.RecoveryTime(m)
	if !ok {
		return 0, false, nil
	}
	ms, err := store.EncodeTime(at)
	if err != nil {
		return 0, false, fmt.Errorf("recovery time %s before the Unix epoch: %w", at.UTC().Format(time.RFC3339Nano), store.ErrCorrupt)
	}
	return ms, true, nil
}

// describe describes g's markers for error messages: each one's time, or
// that it is absent or does not decode.
func (t *Table[C, K, R, M, S]) describe(g Generation) string {
	recovery := "absent"
	if g.Recovery != nil {
		if at, ok, err := t.recoveryTime(g.Recovery); err != nil {
			recovery = fmt.Sprintf("%d undecodable bytes", len(g.Recovery))
		} else if ok {
			recovery = fmt.Sprintf("at %d ms", at)
		} else {
			recovery = "first activation"
		}
	}
	reconcile := "absent"
	if g.Reconcile != nil {
		if v, err := gen.DecodeU64Value(g.Reconcile); err != nil {
			reconcile = fmt.Sprintf("%d undecodable bytes", len(g.Reconcile))
		} else {
			reconcile = fmt.Sprintf("at %d ms", v.Value)
		}
	}
	return fmt.Sprintf("{recovery %s, reconcile %s}", recovery, reconcile)
}

// MarkReconciled records that the recovery p's recovery marker holds has
// been reconciled: call it only after an external driver has rebuilt the
// lease and index tables. p is a coordinator partition or one
// TableConfig.HoldsMarkers admits. It writes the reconcile marker,
// max(at, recovery time + 1ms), to the millisecond, so that it is later
// than the recovery, in a batch guarded on the exact recovery marker it
// read: a recovery written meanwhile defeats it with ErrRecoveryRaced,
// and nothing is written.
//
// It fails with an error wrapping store.ErrInvalid for an at before the
// Unix epoch, for another partition, when there is no recovery marker,
// when the marker records no recovery (TableConfig.RecoveryTime: a first
// activation) or a recovery time with no successor; with one wrapping
// store.ErrCorrupt when the marker does not decode; and with the store's
// error when the read or the write fails (store.ErrUnknownResult: the
// marker may have been written; calling again is safe).
func (t *Table[C, K, R, M, S]) MarkReconciled(ctx context.Context, s store.Store, p store.Partition, at time.Time) error {
	if err := t.fence(p, "a lease reconciliation"); err != nil {
		return err
	}
	name := store.PartitionName(p)
	atMs, err := store.EncodeTime(at)
	if err != nil {
		return fmt.Errorf("watermark: reconcile %s: %w", name, err)
	}
	value, ok, err := s.Get(ctx, p, t.c.RecoveryKey)
	if err != nil {
		return fmt.Errorf("watermark: read lease recovery marker of %s: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("watermark: %s has no lease recovery to reconcile: %w", name, store.ErrInvalid)
	}
	recoveredMs, recovered, err := t.recoveryTime(value)
	if err != nil {
		return fmt.Errorf("watermark: lease recovery marker of %s: %w", name, err)
	}
	switch {
	case !recovered:
		return fmt.Errorf("watermark: %s's lease recovery marker records a first activation, no recovery to reconcile: %w", name, store.ErrInvalid)
	case recoveredMs == math.MaxUint64:
		return fmt.Errorf("watermark: %s's lease recovery time %d has no successor: %w", name, recoveredMs, store.ErrInvalid)
	}
	stamp, err := gen.EncodeU64Value(gen.U64Value{Value: max(atMs, recoveredMs+1)})
	if err != nil {
		return fmt.Errorf("watermark: encode reconcile marker: %w", err)
	}
	b := store.NewBatch().Require(store.Equals(t.c.RecoveryKey, value)).Put(t.c.ReconcileKey, stamp)
	out, err := s.Apply(ctx, p, b)
	if err != nil {
		return fmt.Errorf("watermark: write reconcile marker of %s: %w", name, err)
	}
	switch out.Outcome {
	case store.Committed:
		return nil
	case store.PreconditionFailed:
		return fmt.Errorf("%w: %s: %v", ErrRecoveryRaced, name, out)
	}
	return fmt.Errorf("watermark: write reconcile marker of %s: %v: %w", name, out, store.ErrDeadlinePassed)
}
