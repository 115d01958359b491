package watermark

import (
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// Errors of the watermark, usable with errors.Is. Invalid arguments
// otherwise wrap store.ErrInvalid, undecodable stored rows store.ErrCorrupt,
// and store failures are returned wrapped as the store reported them.
var (
	// ErrRecovering: the coordinator's lease table was restored and has
	// not been reconciled since (the recovery-time rule of
	// TableConfig.RecoveryTime). Watermark reads fail closed until
	// Table.MarkReconciled records the reconciliation.
	ErrRecovering = errors.New("watermark: coordinator lease table is recovering")

	// ErrCheckpoint: a checkpoint is unusable: its bytes do not decode as
	// a version-2 checkpoint of the table (the error names the problem),
	// or it belongs to another coordinator than the one scanned. It wraps
	// store.ErrInvalid: a checkpoint is the caller's input.
	ErrCheckpoint = fmt.Errorf("watermark: invalid checkpoint: %w", store.ErrInvalid)

	// ErrGenerationChanged: the lease recovery or reconcile marker is not
	// what the scan saw when it started (a recovery, a reconciliation, a
	// deleted or rewritten marker). The scan's rows may mix two lease
	// tables; start a new scan. It wraps store.ErrInvalid.
	ErrGenerationChanged = fmt.Errorf("watermark: lease recovery generation changed: %w", store.ErrInvalid)

	// ErrRecoveryRaced: Table.MarkReconciled lost to a concurrent write
	// of the recovery marker (a new recovery) between its read and its
	// guarded write, and wrote nothing; reconcile the new recovery. It
	// wraps store.ErrPreconditionFailed.
	ErrRecoveryRaced = fmt.Errorf("watermark: lease reconciliation raced a new recovery: %w", store.ErrPreconditionFailed)
)
