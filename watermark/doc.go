// Package watermark reads a coordinator's relay watermark and its shard
// set from the reference domain's lease table, fenced by the table's
// recovery markers.
//
// A coordinator partition ([refdomain.CoordinatorPartition]) holds a lease
// row per ref shard ([refdomain.LeasedShardKey]), each carrying the running
// maximum of that shard's relay watermark. The namespace watermark is the
// minimum of those maxima and of the time the scan started: a lower bound
// on the commit time of every relay row not yet delivered. A consumer that
// needs every row committed by a time T delivered compares it against T
// plus its bound on how long a commit may take to apply, and a margin. It
// is not monotonic:
// a new shard's first report may be stale-low, and a restore of the lease
// table can reset the maxima.
//
// A scan reads the table a page at a time. [Step] reads one page and returns
// a [Checkpoint] to resume from ([Checkpoint.Encode] and [Decode] carry it
// between requests); [Watermark] runs every step at once. The first step
// fixes the scan's ceiling and its starting minimum at its now, and later steps
// keep them: a shard that enters the table behind the cursor does so only
// after a new lease grant, so its first relay commit is after the ceiling,
// and the result stays a lower bound without it.
//
// The recovery fence: a restored lease table carries a recovery marker
// ([refdomain.LeaseRecoveryKey]) and is recovering until an external driver
// has rebuilt the lease and index tables and recorded a reconciliation
// later than the recovery time ([MarkLeaseTableReconciled]). While it is
// recovering, every read here fails with [ErrRecovering]. A scan records the
// exact markers it saw when it started (a [Generation]) and fails with
// [ErrGenerationChanged] when they differ on a later step, its last page
// included: a scan never mixes rows from before and after a recovery.
//
// Everything fails closed: an undecodable lease row, key or marker is an
// error wrapping [store.ErrCorrupt], never skipped. Every function is safe
// for concurrent use; a Checkpoint is immutable.
package watermark
