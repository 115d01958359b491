// Package watermark reads a coordinator's relay watermark and its shard
// set from a lease table of the service's own schema, fenced by the
// table's recovery markers.
//
// A service describes its lease table once, in a [TableConfig] of its
// schema's generated codec functions and its rules, and [NewTable] builds
// the [Table] whose methods are the watermark. A coordinator partition
// holds a lease row per shard, each carrying the running maximum of that
// shard's relay watermark. The namespace watermark is the minimum of
// those maxima and of the time the scan started: a lower bound on the
// commit time of every relay row not yet delivered. A consumer that
// needs every row committed by a time T delivered compares it against T
// plus its bound on how long a commit may take to apply, and a margin. It
// is not monotonic: a new shard's first report may be stale-low, and a
// restore of the lease table can reset the maxima. The reference
// domain's lease table is one such table (package refdomain/leases).
//
// A scan reads the table a page at a time. [Table.Step] reads one page
// and returns a [Checkpoint] to resume from ([Checkpoint.Encode] and
// [Table.DecodeCheckpoint] carry it between requests); [Table.Watermark]
// runs every step at once. The first step fixes the scan's ceiling and
// its starting minimum at its now, and later steps keep them: a shard
// that enters the table behind the cursor does so only after a new lease
// grant, so its first relay commit is after the ceiling, and the result
// stays a lower bound without it.
//
// The recovery fence: a restored lease table carries a recovery marker
// (TableConfig.RecoveryKey) and is recovering until an external driver
// has rebuilt the lease and index tables and recorded a reconciliation
// later than the recovery time ([Table.MarkReconciled]). While it is
// recovering, every read here fails with [ErrRecovering]. A scan records
// the exact markers it saw when it started (a [Generation]) and fails
// with [ErrGenerationChanged] when they differ on a later step, its last
// page included: a scan never mixes rows from before and after a
// recovery.
//
// Everything fails closed: an undecodable lease row, key or marker is an
// error wrapping [store.ErrCorrupt], never skipped. Every method is safe
// for concurrent use; a Table and a Checkpoint are immutable.
package watermark
