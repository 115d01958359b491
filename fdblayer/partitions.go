package fdblayer

import (
	"bytes"
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: listing partitions.
//
// The store.Store contract has no "list partitions": handlers address the
// partitions they are given, and a scheduler finds the due ones in the due
// index. An operator's tool needs every partition, so the Layer lists them
// with a skip-scan over its keys: read the first key at or after a
// position (one range read of one row), find where the partition identity
// it starts with ends, report that partition, and continue just past the
// partition's wake key, root | identity | 0xFF, which is the last key of
// the partition. Each partition costs one bounded read whatever it holds,
// in a read transaction of its own, so a listing of any size streams and
// no transaction outlives FoundationDB's five seconds.
//
// Only a schema knows where an identity ends: an identity and a key are
// both tuples, and their element types overlap. So the caller passes a
// Splitter (an operator's command builds one from the linked schemas,
// codec/registry.IdentityPrefix). Where it cannot tell (a namespace no
// linked schema declares, a variant its schema does not know), the region
// of keys under the prefix it names is reported as one Unsplit region and
// skipped.

// Splitter says where the partition identity at the start of b (a raw key
// after the Layer's root prefix) ends: n bytes, ok true. When it cannot
// tell, ok is false and n is the length of a prefix of b (1 to len(b))
// under which every key is skipped and reported as one region.
type Splitter func(b []byte) (n int, ok bool)

// ListedPartition is one step of Layer.ListPartitions: a partition
// (Identity, its tuple identity) or, with Unsplit, a region of keys whose
// identity the Splitter could not tell: Prefix is the region's prefix
// and FirstKey its first key found (both after the root prefix).
type ListedPartition struct {
	Identity store.Identity
	Unsplit  bool
	Prefix   []byte
	FirstKey []byte
}

// ListPartitions calls fn with each partition holding at least one key
// (its rows, or only its wake time), in identity order, starting after
// the partition or region whose identity or prefix is after (nil: from
// the first); it stops at the first error fn returns and returns it.
// Each partition costs one range read of one row, in a read transaction
// of its own: a listing sees each step's snapshot, not one snapshot of
// the store, and a partition created during it may or may not be listed.
// It never reads the due index.
//
// It fails with store.ErrUnavailable when ctx ends or the engine fails,
// and with store.ErrCorrupt when split says an identity ends beyond its
// key or a listed identity is not a tuple. It is safe for concurrent use.
func (l *Layer) ListPartitions(ctx context.Context, after []byte, split Splitter, fn func(ListedPartition) error) error {
	if split == nil {
		return fmt.Errorf("fdblayer: list partitions: %w: nil Splitter", store.ErrInvalid)
	}
	root := l.root
	end := append(bytes.Clone(root), partitionEnd)
	pos := bytes.Clone(root)
	if after != nil {
		// Just past after's wake key (identity | 0xFF) or past its region.
		pos = append(pos, after...)
		pos = append(pos, partitionEnd, 0x00)
	}
	var row []kv.KeyValue
	var key []byte
	for {
		row = row[:0]
		err := l.read(ctx, nil, "list partitions", func(txn kv.ReadTxn) error {
			var err error
			row, err = txn.GetRange(row[:0], pos, end, 1, 0)
			if err == nil && len(row) > 0 {
				// The engine's bytes are valid only while txn is open
				// (bbolt's memory map): keep a copy.
				key = append(key[:0], row[0].Key...)
			}
			return err
		})
		if err != nil {
			return err
		}
		if len(row) == 0 {
			return nil
		}
		clear(row)
		b := key[len(root):]
		n, ok := split(b)
		if !ok && len(b) > 1 && b[len(b)-1] == partitionEnd {
			// A partition's wake key, identity | 0xFF, when it holds no
			// row: after an identity ending in a string or bytes, the 0xFF
			// reads as an escaped null inside it, so split the identity.
			if m, whole := split(b[:len(b)-1]); whole && m == len(b)-1 {
				n, ok = m, true
			}
		}
		if n < 1 || n > len(b) {
			return fmt.Errorf("fdblayer: list partitions: %w: the splitter took %d bytes of the %d-byte key %x", store.ErrCorrupt, n, len(b), b)
		}
		prefix := bytes.Clone(b[:n])
		entry := ListedPartition{Unsplit: !ok, Prefix: prefix, FirstKey: bytes.Clone(b)}
		if ok {
			id, err := store.ParseIdentity(prefix)
			if err != nil {
				return fmt.Errorf("fdblayer: list partitions: %w", err)
			}
			entry.Identity = id
			pos = append(append(append(pos[:0], root...), prefix...), partitionEnd, 0x00)
		} else {
			pos = append(append(pos[:0], root...), tuple.RangeEnd(prefix)...)
		}
		if err := fn(entry); err != nil {
			return err
		}
	}
}

// ListIdentities calls fn with each partition ListPartitions lists, as
// plain bytes: a partition's tuple identity with whole true, or the prefix
// of a region split could not tell apart with whole false. It is
// ListPartitions for callers that do not import this package (package
// evolve's PartitionLister), and fails as it does. Safe for concurrent use.
func (l *Layer) ListIdentities(ctx context.Context, after []byte, split func(b []byte) (n int, ok bool), fn func(prefix []byte, whole bool) error) error {
	return l.ListPartitions(ctx, after, split, func(p ListedPartition) error {
		return fn(p.Prefix, !p.Unsplit)
	})
}
