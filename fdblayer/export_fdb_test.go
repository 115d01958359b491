//go:build fdb

package fdblayer

import "github.com/apple/foundationdb/bindings/go/src/fdb"

// DB is the engine's FoundationDB database.
func (e *FDBEngine) DB() fdb.Database { return e.db }

// CommitError is the FoundationDB engine's wrapping of a commit's error.
var CommitError = commitError

// SelectAPIVersion selects FDBAPIVersion once per process.
var SelectAPIVersion = selectAPIVersion
