package watermark

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// PageSize is the page Watermark reads the lease table in: 128 rows, at
// most about 60 KB of the reference domain's lease rows, far below what
// one FoundationDB read may return. A step costs two store calls (the
// fence's GetMany and the page's Scan), and the last one a third. Step
// takes any page size.
const PageSize = 128

// Step reads one page of at most limit lease rows (at least 1) of
// coordinator's lease table. With a nil checkpoint it starts a scan whose
// ceiling and starting minimum are now (to the millisecond); with one
// (from an earlier Step or DecodeCheckpoint) it resumes that scan, keeping
// its ceiling and minimum and ignoring now. When more rows remain it
// returns the checkpoint to resume from and the zero Time; after the last
// page it returns a nil checkpoint and the watermark: the minimum of the
// ceiling and every lease row's relay watermark (the zero Time for a
// relay watermark of 0, which is before every commit).
//
// Every step checks the recovery fence first (CheckRecovery), and a
// resumed step checks that the markers are the ones its scan started
// with; the last step checks them again after its page, so a recovery
// during the scan fails it. A new shard inserted behind the cursor is not
// read: it entered after a new lease grant, so its first relay commit is
// after the ceiling.
//
// It fails with an error wrapping store.ErrInvalid for a nil coordinator
// or one whose identity does not encode, and for a now before the Unix
// epoch that starts a scan; with one wrapping ErrCheckpoint for a
// checkpoint of another coordinator; with ErrRecovering or
// ErrGenerationChanged as CheckRecovery does; with an error wrapping
// store.ErrCorrupt for a lease row whose key or value does not decode (the
// scan fails closed, never skipping it); and with the store's error when
// a read fails (a cursor the store does not accept wraps
// store.ErrInvalid).
func (t *Table[C, K, R, M, S]) Step(ctx context.Context, s store.Store, coordinator C, now time.Time, checkpoint *Checkpoint[C], limit int) (*Checkpoint[C], time.Time, error) {
	next, minimum, err := t.step(ctx, s, coordinator, now, checkpoint, limit)
	if err != nil || next != nil {
		return next, time.Time{}, err
	}
	return nil, store.DecodeTime(minimum), nil
}

// step is Step with the watermark as stored.
func (t *Table[C, K, R, M, S]) step(ctx context.Context, s store.Store, coordinator C, now time.Time, checkpoint *Checkpoint[C], limit int) (*Checkpoint[C], uint64, error) {
	id, err := coordinatorIdentity(coordinator)
	if err != nil {
		return nil, 0, err
	}
	var nowMs uint64
	if checkpoint == nil {
		if nowMs, err = store.EncodeTime(now); err != nil {
			return nil, 0, fmt.Errorf("watermark: scan of %s: %w", store.PartitionName(coordinator), err)
		}
	}
	var (
		expected *Generation
		cursor   store.Cursor
		ceiling  = nowMs
		minimum  = nowMs
	)
	if checkpoint != nil {
		if !bytes.Equal(checkpoint.rec.Coordinator, id) {
			return nil, 0, fmt.Errorf("%w: it belongs to %s, not %s", ErrCheckpoint, checkpointOwner(checkpoint), store.PartitionName(coordinator))
		}
		g := checkpoint.Generation()
		expected = &g
		cursor, ceiling, minimum = checkpoint.rec.Cursor, checkpoint.rec.CeilingMs, checkpoint.rec.MinimumMs
	}
	g, err := t.CheckRecovery(ctx, s, coordinator, expected)
	if err != nil {
		return nil, 0, err
	}
	page, err := s.Scan(ctx, coordinator, t.c.LeaseStart, t.c.LeaseEnd, cursor, max(limit, 1))
	if err != nil {
		return nil, 0, fmt.Errorf("watermark: scan lease table of %s: %w", store.PartitionName(coordinator), err)
	}
	for _, row := range page.Entries {
		_, w, err := t.readLease(coordinator, row)
		if err != nil {
			return nil, 0, err
		}
		minimum = min(minimum, w)
	}
	if page.Next != nil {
		next := &Checkpoint[C]{coordinator: coordinator}
		next.rec.Coordinator = id
		next.rec.CeilingMs, next.rec.MinimumMs = ceiling, minimum
		next.rec.Recovery, next.rec.Reconcile = g.Recovery, g.Reconcile
		next.rec.Cursor = page.Next
		return next, 0, nil
	}
	if _, err := t.CheckRecovery(ctx, s, coordinator, &g); err != nil {
		return nil, 0, err
	}
	return nil, minimum, nil
}

// checkpointOwner names the coordinator of c, or says it has none (the
// zero Checkpoint).
func checkpointOwner[C store.Partition](c *Checkpoint[C]) string {
	if c.rec.Coordinator == nil {
		return "no coordinator (the zero Checkpoint)"
	}
	return store.PartitionName(c.coordinator)
}

// Watermark runs a whole scan of coordinator's lease table (Step, PageSize
// rows a step, with now as its ceiling) and returns the watermark: the
// minimum of now and every lease row's relay watermark. For callers
// that can scan at once; callers bounded per request use Step. It fails
// as Step does. The result can decrease between calls: a new shard's
// first report may be stale-low, and a restore resets the maxima.
func (t *Table[C, K, R, M, S]) Watermark(ctx context.Context, s store.Store, coordinator C, now time.Time) (time.Time, error) {
	var checkpoint *Checkpoint[C]
	for {
		next, watermark, err := t.Step(ctx, s, coordinator, now, checkpoint, PageSize)
		if err != nil || next == nil {
			return watermark, err
		}
		checkpoint = next
	}
}

// ShardsPage is one page of ActiveShards: shards of type S.
type ShardsPage[S store.Partition] struct {
	// Shards are the shards of the page's lease rows
	// (TableConfig.Shard), in key order.
	Shards []S
	// Next resumes the listing after the page; nil after the last page.
	Next store.Cursor
}

// ActiveShards lists one page of at most limit (at least 1) of the shards
// coordinator holds a lease row for, after cursor (nil: from the start):
// every shard, expired leases kept for an undelivered outbox included,
// which is the shard set a garbage collector must keep. Each is
// TableConfig.Shard of the coordinator and the row's key.
//
// It checks the recovery fence first and fails as CheckRecovery does (a
// nil coordinator wraps store.ErrInvalid), with ErrRecovering while
// the table is recovering; with an error wrapping store.ErrCorrupt for a
// lease row whose key or value does not decode; and with the store's
// error when a read fails (a cursor the store does not accept wraps
// store.ErrInvalid).
func (t *Table[C, K, R, M, S]) ActiveShards(ctx context.Context, s store.Store, coordinator C, cursor store.Cursor, limit int) (ShardsPage[S], error) {
	if _, err := t.CheckRecovery(ctx, s, coordinator, nil); err != nil {
		return ShardsPage[S]{}, err
	}
	page, err := s.Scan(ctx, coordinator, t.c.LeaseStart, t.c.LeaseEnd, cursor, max(limit, 1))
	if err != nil {
		return ShardsPage[S]{}, fmt.Errorf("watermark: scan lease table of %s: %w", store.PartitionName(coordinator), err)
	}
	shards := make([]S, 0, len(page.Entries))
	for _, row := range page.Entries {
		key, _, err := t.readLease(coordinator, row)
		if err != nil {
			return ShardsPage[S]{}, err
		}
		shards = append(shards, t.c.Shard(coordinator, key))
	}
	return ShardsPage[S]{Shards: shards, Next: page.Next}, nil
}
