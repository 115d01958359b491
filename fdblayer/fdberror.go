package fdblayer

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// FoundationDB error codes the engines raise or treat specially. The FDB
// adapter (build tag fdb) receives them from the client; MVCCEngine raises
// them itself, as FDBError, so that the Layer meets the same codes on both.
const (
	fdbTransactionTooOld     = 1007 // the read version is older than the MVCC window (5 s)
	fdbNotCommitted          = 1020 // a read conflicted with a later commit
	fdbCommitUnknownResult   = 1021 // the commit may have landed
	fdbTransactionCancelled  = 1025 // Cancel, which a context's end calls
	fdbTransactionTimedOut   = 1031 // the timeout a context's deadline set
	fdbClusterVersionChanged = 1039 // the commit may have landed
	fdbTransactionTooLarge   = 2101 // mutations plus conflict ranges over 10,000,000 bytes
	fdbKeyTooLarge           = 2102 // a key over 10,000 bytes
	fdbValueTooLarge         = 2103 // a value over 100,000 bytes
)

// fdbErrorNames are FoundationDB's names of the codes above.
var fdbErrorNames = map[int]string{
	fdbTransactionTooOld:     "transaction_too_old",
	fdbNotCommitted:          "not_committed",
	fdbCommitUnknownResult:   "commit_unknown_result",
	fdbTransactionCancelled:  "transaction_cancelled",
	fdbTransactionTimedOut:   "transaction_timed_out",
	fdbClusterVersionChanged: "cluster_version_changed",
	fdbTransactionTooLarge:   "transaction_too_large",
	fdbKeyTooLarge:           "key_too_large",
	fdbValueTooLarge:         "value_too_large",
}

// FDBError is a FoundationDB error raised by an engine that reproduces
// FoundationDB's behaviour in process (MVCCEngine): Code is FoundationDB's
// error code (1020 not_committed, 1007 transaction_too_old, 2101
// transaction_too_large, ...). The FoundationDB engine itself returns the
// binding's fdb.Error instead. Use errors.As to read the code.
type FDBError struct {
	Code int
}

// Error names the code as FoundationDB does.
func (e FDBError) Error() string {
	if name, ok := fdbErrorNames[e.Code]; ok {
		return fmt.Sprintf("FoundationDB error %d (%s)", e.Code, name)
	}
	return fmt.Sprintf("FoundationDB error %d", e.Code)
}

// fdbMayHaveCommitted reports whether a commit that failed with code may
// still have landed: an unknown result, a cluster version change, or a
// cancel or timeout while the commit was in flight.
func fdbMayHaveCommitted(code int) bool {
	switch code {
	case fdbCommitUnknownResult, fdbClusterVersionChanged, fdbTransactionCancelled, fdbTransactionTimedOut:
		return true
	}
	return false
}

// fdbCommitError wraps err, a commit's FoundationDB error of the given
// code, for the Layer: with store.ErrUnknownResult when the commit may
// have landed. what names the engine.
func fdbCommitError(what string, code int, err error) error {
	if fdbMayHaveCommitted(code) {
		return fmt.Errorf("fdblayer: %s commit: %w: %w", what, store.ErrUnknownResult, err)
	}
	return fmt.Errorf("fdblayer: %s commit: %w", what, err)
}
