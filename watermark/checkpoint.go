package watermark

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Checkpoint byte layout: the library's WatermarkCheckpoint record
// (gen.EncodeWatermarkCheckpoint), version 2:
//
//	0x02 | coordinator identity (length-prefixed tuple, at most 1,024 bytes)
//	     | ceiling ms (8, big-endian) | minimum ms (8, big-endian)
//	     | recovery marker (0, or 1 and length-prefixed bytes)
//	     | reconcile marker (0, or 1 and length-prefixed bytes)
//	     | cursor (length-prefixed, 1 to 4,096 bytes)
//
// Design note: the record says absent with a presence byte and prefixes
// every field, rather than write an absent marker as the length 0xFFFFFFFF
// and leave the cursor unprefixed at the end, so that the generated strict
// decoder (canonical lengths, no trailing bytes, the
// minimum-not-above-ceiling rule) serves it like every other record.

// Generation is the exact pair of lease markers of a coordinator that
// CheckRecovery read: the recovery marker (the table's
// TableConfig.DecodeRecovery record) and the reconcile marker (a
// gen.U64Value, milliseconds), each nil when absent. A scan keeps the Generation it started with and fails when the
// markers differ later. Its bytes must not be modified.
type Generation struct {
	Recovery  store.Value
	Reconcile store.Value
}

// Equal reports whether g and o hold the same markers, byte for byte, and
// the same ones absent (an absent marker differs from an empty one).
func (g Generation) Equal(o Generation) bool {
	return sameMarker(g.Recovery, o.Recovery) && sameMarker(g.Reconcile, o.Reconcile)
}

func sameMarker(a, b store.Value) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// Checkpoint resumes a watermark scan of a coordinator partition of type
// C (see Table.Step): the coordinator it belongs to, the scan's ceiling
// (the now of its first step), the minimum so far (never above the
// ceiling), the Generation it started with and the store cursor of the
// next page. Step returns one; Encode and Table.DecodeCheckpoint carry it
// between requests. A Checkpoint is immutable and safe to share; the zero
// Checkpoint resumes nothing and fails to encode.
type Checkpoint[C store.Partition] struct {
	coordinator C
	rec         gen.WatermarkCheckpoint
}

// Coordinator returns the coordinator partition the checkpoint's scan reads.
func (c *Checkpoint[C]) Coordinator() C { return c.coordinator }

// Ceiling returns the scan's ceiling: the now of its first step, to the
// millisecond, which bounds its result from above.
func (c *Checkpoint[C]) Ceiling() time.Time { return store.DecodeTime(c.rec.CeilingMs) }

// Minimum returns the minimum of the ceiling and the watermarks of the
// pages read so far (the zero Time for a relay watermark of 0).
func (c *Checkpoint[C]) Minimum() time.Time { return store.DecodeTime(c.rec.MinimumMs) }

// Generation returns the lease markers the scan started with.
func (c *Checkpoint[C]) Generation() Generation {
	return Generation{Recovery: c.rec.Recovery, Reconcile: c.rec.Reconcile}
}

// Encode returns the checkpoint's bytes, for a caller that carries it to a
// later request; Table.DecodeCheckpoint reads them back. It fails with an
// error wrapping ErrCheckpoint for the zero Checkpoint, and with one
// wrapping store.ErrInvalid for a store cursor over 4,096 bytes (the
// record's bound; fdblayer's cursors of lease rows stay under 400).
func (c *Checkpoint[C]) Encode() ([]byte, error) {
	if len(c.rec.Cursor) == 0 {
		return nil, fmt.Errorf("%w: encode of the zero Checkpoint", ErrCheckpoint)
	}
	b, err := gen.EncodeWatermarkCheckpoint(c.rec)
	if err != nil {
		return nil, fmt.Errorf("watermark: encode checkpoint: %w", err)
	}
	return b, nil
}

// DecodeCheckpoint reads a checkpoint Encode wrote. Anything else fails
// with an error wrapping ErrCheckpoint (and so store.ErrInvalid) that
// names the problem: a wrong version, truncation, trailing bytes, a
// minimum above the ceiling, a coordinator identity that
// TableConfig.ParsePartition refuses or that is not a C, a recovery or
// reconcile marker that does not decode, an empty cursor. It never panics
// and does not retain b. Whether the checkpoint fits the store is Step's
// to check: the coordinator it is resumed with, the markers, the cursor's
// partition and range.
func (t *Table[C, K, R, M, S]) DecodeCheckpoint(b []byte) (*Checkpoint[C], error) {
	b = bytes.Clone(b) // the record's byte fields alias what it decodes
	rec, err := gen.DecodeWatermarkCheckpoint(b)
	if err != nil {
		return nil, checkpointError("", err)
	}
	p, err := t.c.ParsePartition(rec.Coordinator)
	if err != nil {
		return nil, checkpointError("coordinator identity", err)
	}
	coordinator, ok := p.(C)
	if !ok {
		return nil, fmt.Errorf("%w: coordinator identity names %s, not a coordinator partition", ErrCheckpoint, store.PartitionName(p))
	}
	if rec.Recovery != nil {
		if _, err := t.c.DecodeRecovery(rec.Recovery); err != nil {
			return nil, checkpointError("recovery marker", err)
		}
	}
	if rec.Reconcile != nil {
		if _, err := gen.DecodeU64Value(rec.Reconcile); err != nil {
			return nil, checkpointError("reconcile marker", err)
		}
	}
	if len(rec.Cursor) == 0 {
		return nil, fmt.Errorf("%w: empty cursor", ErrCheckpoint)
	}
	return &Checkpoint[C]{coordinator: coordinator, rec: rec}, nil
}

// checkpointError reports err, a decoder's, as an invalid checkpoint: the
// bytes are the caller's input, not stored data, so the result wraps
// ErrCheckpoint and not the decoder's wire.ErrCorrupt. part names the part
// of the checkpoint that failed, when not the record itself.
func checkpointError(part string, err error) error {
	if part != "" {
		part += ": "
	}
	var de *wire.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("%w: %s%v", ErrCheckpoint, part, err)
	}
	where := de.Record
	switch {
	case strings.HasPrefix(de.Field, de.Record+"."): // a field path that names its record
		where = de.Field
	case de.Field != "":
		where += "." + de.Field
	}
	if de.Offset >= 0 {
		where += fmt.Sprintf(" at offset %d", de.Offset)
	}
	return fmt.Errorf("%w: %s%s: %s", ErrCheckpoint, part, where, de.Reason)
}
