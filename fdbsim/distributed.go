package fdbsim

import "github.com/mkit-dev/mkitfdb/fdblayer/kv"

// AsDistributed returns inner reporting itself [kv.Distributed], as
// FoundationDB is: a Layer over it spreads its due index over
// fdblayer.DueHashBuckets buckets, so that tests on the memory and bbolt
// engines exercise the buckets a cluster has, and reports calls made side
// by side as overlapping (store.OverlapsCalls), so that handlers make
// them so (the relay's target lanes) while the engine still runs one
// write transaction at a time: nothing the library does holds a
// transaction open while it waits for another call, so they only take
// turns. Every Layer over one store must count the same buckets: open all
// of them over AsDistributed, or none. The result is [kv.Optimistic]
// when inner is, and a [kv.GroupCommitter] when inner groups its
// commits. It is safe for concurrent use as inner is.
func AsDistributed(inner kv.Engine) kv.Engine { return distributedEngine{inner} }

// distributedEngine is AsDistributed's engine.
type distributedEngine struct{ kv.Engine }

// Distributed reports true.
func (distributedEngine) Distributed() bool { return true }

// Optimistic reports whether the inner engine is.
func (e distributedEngine) Optimistic() bool { return optimistic(e.Engine) }

// ReadOnly reports whether the inner engine is.
func (e distributedEngine) ReadOnly() bool { return readOnly(e.Engine) }

// GroupCommits reports whether the inner engine does.
func (e distributedEngine) GroupCommits() bool { return groupCommits(e.Engine) }
