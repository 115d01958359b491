package boltengine

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// Internals the tests of package boltengine_test check.
var (
	Bucket     = bucket
	LockHolder = lockHolder
)

// WithOpenFile is c with f in place of os.OpenFile, to break the file.
func WithOpenFile(c Config, f func(string, int, os.FileMode) (*os.File, error)) Config {
	c.openFile = f
	return c
}

// DB is the engine's bbolt database.
func (e *Engine) DB() *bolt.DB { return e.db }
