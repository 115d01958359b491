package fdblayer

import (
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/mkit-dev/mkitfdb/store"
)

// The tests of this package are in package fdblayer_test: they run the
// Layer over fdbsim's engines, and fdbsim imports fdblayer. This file
// hands them the internals they check.

// Internals of the key layout.
const (
	PartitionEnd = partitionEnd
	DueTag       = dueTag
	DueTagV1     = dueTagV1
)

// Internals of the Layer and the engines.
var (
	BoltBucket     = boltBucket
	StoreSentinels = storeSentinels
	AppendCursor   = appendCursor
	ParseCursor    = parseCursor
	CutPage        = cutPage
	FDBTimeoutMs   = fdbTimeoutMs
	FDBLimits      = fdbLimits
	LockHolder     = lockHolder
)

// ConfiguredRoot is the root prefix a Layer opened with opts uses.
func ConfiguredRoot(opts []Option) []byte {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.root
}

// WithOpenFile is o with f in place of os.OpenFile, to break the file.
func WithOpenFile(o BoltOptions, f func(string, int, os.FileMode) (*os.File, error)) BoltOptions {
	o.openFile = f
	return o
}

// DB is the engine's bbolt database.
func (e *BoltEngine) DB() *bolt.DB { return e.db }

// Engine is the engine the Layer runs on.
func (l *Layer) Engine() Engine { return l.engine }

// Root is the Layer's root prefix.
func (l *Layer) Root() []byte { return l.root }

// AppendSubspace appends p's subspace (root and identity) to dst.
func (l *Layer) AppendSubspace(dst []byte, p store.Partition) ([]byte, error) {
	return l.appendSubspace(dst, p)
}

// DueBucket is the due index bucket of the partition whose identity is
// identity.
func (l *Layer) DueBucket(identity []byte) int { return l.dueBucket(identity) }

// DueBucketPrefix is the key prefix of due index bucket b.
func (l *Layer) DueBucketPrefix(b int) []byte { return l.dueBucketPrefix(b) }

// V1Bucket is the bucket that lists the first layout's entries.
func (l *Layer) V1Bucket() int { return l.v1Bucket() }
