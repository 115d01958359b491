package fdbsim

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
)

// FDBError is a FoundationDB error raised by MVCCEngine, which reproduces
// FoundationDB's behaviour in process: Code is FoundationDB's error code
// (1020 not_committed, 1007 transaction_too_old, 2101
// transaction_too_large, ...). The FoundationDB engine (fdbengine) returns
// the binding's fdb.Error instead. Use errors.As to read the code.
type FDBError struct {
	Code int
}

// Error names the code as FoundationDB does.
func (e FDBError) Error() string {
	if name := fdbcode.Name(e.Code); name != "" {
		return fmt.Sprintf("FoundationDB error %d (%s)", e.Code, name)
	}
	return fmt.Sprintf("FoundationDB error %d", e.Code)
}
