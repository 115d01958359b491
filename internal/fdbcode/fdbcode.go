// Package fdbcode holds the FoundationDB error codes that the
// FoundationDB engine (module fdblayer/fdbengine) receives from the client
// and fdbsim's MVCC engine raises itself, and the rule both wrap a
// commit's error by, so that the Layer meets the same codes and the same
// store.ErrUnknownResult on both; and the FoundationDB engine's other
// pure rules, kept here so that they are tested where libfdb_c is not
// installed.
package fdbcode

import (
	"fmt"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// FoundationDB error codes the engines raise or treat specially.
const (
	TransactionTooOld     = 1007 // the read version is older than the MVCC window (5 s)
	NotCommitted          = 1020 // a read conflicted with a later commit
	CommitUnknownResult   = 1021 // the commit may have landed
	TransactionCancelled  = 1025 // Cancel, which a context's end calls
	TransactionTimedOut   = 1031 // the timeout a context's deadline set
	ClusterVersionChanged = 1039 // the commit may have landed
	TransactionTooLarge   = 2101 // mutations plus conflict ranges over 10,000,000 bytes
	KeyTooLarge           = 2102 // a key over 10,000 bytes
	ValueTooLarge         = 2103 // a value over 100,000 bytes
)

// names are FoundationDB's names of the codes above.
var names = map[int]string{
	TransactionTooOld:     "transaction_too_old",
	NotCommitted:          "not_committed",
	CommitUnknownResult:   "commit_unknown_result",
	TransactionCancelled:  "transaction_cancelled",
	TransactionTimedOut:   "transaction_timed_out",
	ClusterVersionChanged: "cluster_version_changed",
	TransactionTooLarge:   "transaction_too_large",
	KeyTooLarge:           "key_too_large",
	ValueTooLarge:         "value_too_large",
}

// Name is FoundationDB's name of code, "" for a code not listed above.
func Name(code int) string { return names[code] }

// MayHaveCommitted reports whether a commit that failed with code may
// still have landed: an unknown result, a cluster version change, or a
// cancel or timeout while the commit was in flight.
func MayHaveCommitted(code int) bool {
	switch code {
	case CommitUnknownResult, ClusterVersionChanged, TransactionCancelled, TransactionTimedOut:
		return true
	}
	return false
}

// CommitError wraps err, a commit's FoundationDB error of the given code,
// for the Layer: with store.ErrUnknownResult when the commit may have
// landed. what names the package and engine ("fdbengine").
func CommitError(what string, code int, err error) error {
	if MayHaveCommitted(code) {
		return fmt.Errorf("%s commit: %w: %w", what, store.ErrUnknownResult, err)
	}
	return fmt.Errorf("%s commit: %w", what, err)
}

// TimeoutMs is the transaction timeout, in ms, that FoundationDB gets for
// a context deadline d away: at least 1 (0 would mean no timeout, and a
// passed deadline must still end the transaction), at most INT_MAX, the
// option's documented range (about 24.8 days; the context ends a
// transaction with a later deadline).
func TimeoutMs(d time.Duration) int64 {
	return min(max(d.Milliseconds(), 1), math.MaxInt32)
}
