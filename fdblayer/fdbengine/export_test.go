package fdbengine

import "github.com/apple/foundationdb/bindings/go/src/fdb"

// DB is the engine's FoundationDB database.
func (e *Engine) DB() fdb.Database { return e.db }

// CommitError is the engine's wrapping of a commit's error.
var CommitError = commitError

// SelectAPIVersion selects APIVersion once per process.
var SelectAPIVersion = selectAPIVersion
