package admin

import (
	"bytes"
	"context"
	"errors"
	"math"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/store"
)

// Unlinked is a region of the store whose partitions no linked schema
// can tell apart: a namespace no linked package declares, or a variant
// its schema does not know. Its partitions that have a wake time are
// found in the due index and listed; others are not.
type Unlinked struct {
	// Prefix is the region's key prefix as a tuple; Namespace its
	// namespace ("" when its keys start with none).
	Prefix    string `json:"prefix"`
	Namespace string `json:"namespace,omitempty"`
	// FirstKey is the region's first key (after the root prefix).
	FirstKey string `json:"first_key"`
}

// splitIdentity is the Splitter of the linked schemas: the identity a key
// starts with, by its namespace's partition unions; where none tells, the
// namespace (with the variant tag after it, when its schema is linked)
// as the prefix of a region to skip.
func splitIdentity(b []byte) (int, bool) {
	_, _, n, _, err := registry.IdentityPrefix(b)
	if err == nil {
		return n, true
	}
	r := tuple.NewReader(b)
	if _, err := r.ReadString(); err != nil {
		return 1, false
	}
	n = r.Offset()
	if errors.Is(err, registry.ErrNotLinked) {
		return n, false
	}
	if _, err := r.ReadUint(); err == nil {
		n = r.Offset()
	}
	return n, false
}

// walk calls fn with every partition of the store, in identity order,
// then with the partitions of the unlinked regions that have a wake time
// (dueIn finds them); unlinked gets each such region.
func walk(ctx context.Context, l *fdblayer.Layer, fn func(store.Identity) error, unlinked func(Unlinked) error) error {
	var regions [][]byte
	err := l.ListPartitions(ctx, nil, splitIdentity, func(p fdblayer.ListedPartition) error {
		if !p.Unsplit {
			return fn(p.Identity)
		}
		regions = append(regions, p.Prefix)
		u := Unlinked{Prefix: formatTuple(p.Prefix), FirstKey: formatTuple(p.FirstKey)}
		r := tuple.NewReader(p.Prefix)
		u.Namespace, _ = r.ReadString()
		return unlinked(u)
	})
	if err != nil || len(regions) == 0 {
		return err
	}
	seen := map[string]bool{}
	return dueEntries(ctx, l, math.MaxUint64, func(e store.DueEntry) error {
		for _, prefix := range regions {
			if bytes.HasPrefix(e.Partition, prefix) && !seen[string(e.Partition)] {
				seen[string(e.Partition)] = true
				id, err := store.ParseIdentity(e.Partition)
				if err != nil {
					return err
				}
				return fn(id)
			}
		}
		return nil
	})
}

// dueEntries calls fn with each entry of the store's due index whose wake
// time is at or before untilMs, bucket by bucket (oldest first within a
// bucket), page by page. It is the command's one use of the due index,
// through store.DueIndex only.
func dueEntries(ctx context.Context, d store.DueIndex, untilMs uint64, fn func(store.DueEntry) error) error {
	const pageSize = 256
	q := store.DueQuery{Until: store.DecodeTime(untilMs), Limit: pageSize}
	for {
		page, err := d.ScanDue(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		q.After = &page[len(page)-1]
	}
}

// eachPartition calls fn with -partition when it is given, else with every
// partition of the store (see walk).
func eachPartition(ctx context.Context, st *opened, o *options, fn func(store.Identity) error) error {
	if o.partID != nil {
		return fn(st.partition(o))
	}
	return walk(ctx, st.layer, fn, func(Unlinked) error { return nil })
}
