package fdbsim

import "github.com/mkit-dev/mkitfdb/fdblayer/kv"

// AsDistributed returns inner reporting itself [kv.Distributed], as
// FoundationDB is: a Layer over it spreads its due index over
// fdblayer.DueHashBuckets buckets, so that tests on the memory and bbolt
// engines exercise the buckets a cluster has. Every Layer over one store
// must count the same buckets: open all of them over AsDistributed, or
// none. It is safe for concurrent use as inner is.
func AsDistributed(inner kv.Engine) kv.Engine { return distributedEngine{inner} }

// distributedEngine is AsDistributed's engine.
type distributedEngine struct{ kv.Engine }

// Distributed reports true.
func (distributedEngine) Distributed() bool { return true }
