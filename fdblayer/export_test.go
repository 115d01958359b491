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

// Engine is the engine the Layer runs on.
func (l *Layer) Engine() kv.Engine { return l.engine }

// Root is the Layer's root prefix.
func (l *Layer) Root() []byte { return l.root }

// RetryLimit is how often the Layer retries an operation.
func (l *Layer) RetryLimit() int { return l.retryLimit }

// MaxScanRows is the most rows of one Scan page.
func (l *Layer) MaxScanRows() int { return l.maxScanRows }

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

// GroupQueued is how many calls wait in the Layer's group commit queue
// (-1: the Layer does not group commits).
func (l *Layer) GroupQueued() int {
	if l.group == nil {
		return -1
	}
	l.group.mu.Lock()
	defer l.group.mu.Unlock()
	return len(l.group.queue)
}
