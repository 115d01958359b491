package watermark

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// The keys of the lease markers, the same in every partition that holds
// them. Never modified.
var (
	recoveryKey  = store.Key(refdomain.AppendLeaseRecoveryKey(nil))
	reconcileKey = store.Key(refdomain.AppendLeaseReconcileKey(nil))
	markerKeys   = []store.Key{recoveryKey, reconcileKey}
)

// fencePartition checks that p can hold the lease markers: a coordinator
// or namespace partition.
func fencePartition(p refdomain.Partition, what string) error {
	switch p.(type) {
	case refdomain.CoordinatorPartition, refdomain.NamespacePartition:
		return nil
	}
	return fmt.Errorf("watermark: %s needs a coordinator or namespace partition, not %s: %w", what, store.PartitionName(p), store.ErrInvalid)
}

// CheckRecovery reads the lease recovery and reconcile markers of p, a
// coordinator or namespace partition, in one GetMany (one snapshot), and
// returns them. Check it before reading a watermark or shard set.
//
// It fails with an error wrapping store.ErrInvalid for another partition
// kind; with ErrGenerationChanged when expected is not nil and the
// markers are not exactly *expected (compared before they are decoded,
// so a marker rewritten with bytes that do not decode is a change too);
// with an error wrapping store.ErrCorrupt when a marker does not decode;
// with ErrRecovering while the recovery marker has a recovery time (see
// refdomain.LeaseRecovery) and no reconciliation later than it is
// recorded; and with the store's error when the read fails.
func CheckRecovery(ctx context.Context, s store.Store, p refdomain.Partition, expected *Generation) (Generation, error) {
	if err := fencePartition(p, "a lease recovery check"); err != nil {
		return Generation{}, err
	}
	rows, err := s.GetMany(ctx, p, markerKeys)
	if err != nil {
		return Generation{}, fmt.Errorf("watermark: read lease markers of %s: %w", p, err)
	}
	if len(rows) != len(markerKeys) {
		return Generation{}, fmt.Errorf("watermark: read lease markers of %s: %d rows for %d keys: %w", p, len(rows), len(markerKeys), store.ErrCorrupt)
	}
	g := Generation{Recovery: rows[0], Reconcile: rows[1]}
	if expected != nil && !expected.Equal(g) {
		return Generation{}, fmt.Errorf("%w: %s: the scan started with %s, the markers are now %s", ErrGenerationChanged, p, expected, g)
	}
	// Every marker present is decoded, whatever the other says, so that a
	// corrupt one fails here and never reaches a checkpoint.
	var recovery *refdomain.LeaseRecovery
	if g.Recovery != nil {
		r, err := refdomain.DecodeLeaseRecovery(g.Recovery)
		if err != nil {
			return Generation{}, fmt.Errorf("watermark: lease recovery marker of %s: %w", p, err)
		}
		recovery = &r
	}
	var reconciled *uint64
	if g.Reconcile != nil {
		u, err := gen.DecodeU64Value(g.Reconcile)
		if err != nil {
			return Generation{}, fmt.Errorf("watermark: lease reconcile marker of %s: %w", p, err)
		}
		reconciled = &u.Value
	}
	if recovery == nil {
		return g, nil
	}
	at, recovered := recoveryTime(*recovery)
	if !recovered {
		return g, nil
	}
	if reconciled == nil {
		return Generation{}, fmt.Errorf("%w: %s recovered at %d ms and was never reconciled", ErrRecovering, p, at)
	}
	if *reconciled <= at {
		return Generation{}, fmt.Errorf("%w: %s recovered at %d ms, last reconciled at %d ms", ErrRecovering, p, at, *reconciled)
	}
	return g, nil
}

// recoveryTime applies the recovery-time rule of refdomain.LeaseRecovery:
// a marker of a first activation has none; any other marker's is its
// ResumedAtMs.
func recoveryTime(r refdomain.LeaseRecovery) (uint64, bool) {
	if r.ActivationOnly != nil && *r.ActivationOnly {
		return 0, false
	}
	return r.ResumedAtMs, true
}

// String describes the markers for error messages: each one's time, or
// that it is absent or does not decode.
func (g Generation) String() string {
	recovery := "absent"
	if g.Recovery != nil {
		if r, err := refdomain.DecodeLeaseRecovery(g.Recovery); err != nil {
			recovery = fmt.Sprintf("%d undecodable bytes", len(g.Recovery))
		} else if at, ok := recoveryTime(r); ok {
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

// MarkLeaseTableReconciled records that the recovery p's recovery marker
// holds has been reconciled: call it only after an external driver has
// rebuilt the lease and index tables. It writes the reconcile marker,
// max(at, recovery time + 1ms), to the millisecond, so that it is later
// than the recovery, in
// a batch guarded on the exact recovery marker it read: a recovery
// written meanwhile defeats it with ErrRecoveryRaced, and nothing is
// written.
//
// It fails with an error wrapping store.ErrInvalid for an at before the
// Unix epoch, for a partition that
// is neither a coordinator nor a namespace partition, when there is no
// recovery marker, when the marker records a first activation (no
// recovery time) or a recovery time with no successor; with one wrapping
// store.ErrCorrupt when the marker does not decode; and with the store's
// error when the read or the write fails (store.ErrUnknownResult: the
// marker may have been written; calling again is safe).
func MarkLeaseTableReconciled(ctx context.Context, s store.Store, p refdomain.Partition, at time.Time) error {
	if err := fencePartition(p, "a lease reconciliation"); err != nil {
		return err
	}
	atMs, err := store.EncodeTime(at)
	if err != nil {
		return fmt.Errorf("watermark: reconcile %s: %w", p, err)
	}
	value, ok, err := s.Get(ctx, p, recoveryKey)
	if err != nil {
		return fmt.Errorf("watermark: read lease recovery marker of %s: %w", p, err)
	}
	if !ok {
		return fmt.Errorf("watermark: %s has no lease recovery to reconcile: %w", p, store.ErrInvalid)
	}
	recovery, err := refdomain.DecodeLeaseRecovery(value)
	if err != nil {
		return fmt.Errorf("watermark: lease recovery marker of %s: %w", p, err)
	}
	recoveredMs, recovered := recoveryTime(recovery)
	switch {
	case !recovered:
		return fmt.Errorf("watermark: %s's lease recovery marker records a first activation, no recovery to reconcile: %w", p, store.ErrInvalid)
	case recoveredMs == math.MaxUint64:
		return fmt.Errorf("watermark: %s's lease recovery time %d has no successor: %w", p, recoveredMs, store.ErrInvalid)
	}
	stamp, err := gen.EncodeU64Value(gen.U64Value{Value: max(atMs, recoveredMs+1)})
	if err != nil {
		return fmt.Errorf("watermark: encode reconcile marker: %w", err)
	}
	b := store.NewBatch().Require(store.Equals(recoveryKey, value)).Put(reconcileKey, stamp)
	out, err := s.Apply(ctx, p, b)
	if err != nil {
		return fmt.Errorf("watermark: write reconcile marker of %s: %w", p, err)
	}
	switch out.Outcome {
	case store.Committed:
		return nil
	case store.PreconditionFailed:
		return fmt.Errorf("%w: %s: %v", ErrRecoveryRaced, p, out)
	}
	return fmt.Errorf("watermark: write reconcile marker of %s: %v: %w", p, out, store.ErrDeadlinePassed)
}
