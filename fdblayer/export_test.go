package fdblayer

import (
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// The tests of this package are in package fdblayer_test: they run the
// Layer over the engines (memengine, boltengine, fdbsim's), which test
// helpers of this module import beside fdblayer. This file hands them the
// internals they check.

// Internals of the key layout.
const (
	PartitionEnd = partitionEnd
	DueTag       = dueTag
	DueTagV1     = dueTagV1
)

// Internals of the Layer.
var (
	StoreSentinels = storeSentinels
	AppendCursor   = appendCursor
	ParseCursor    = parseCursor
	CutPage        = cutPage
)

// ConfiguredRoot is the root prefix a Layer opened with opts uses.
func ConfiguredRoot(opts []Option) []byte {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.root
}

// Engine is the engine the Layer runs on.
func (l *Layer) Engine() kv.Engine { return l.engine }

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
