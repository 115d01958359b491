package admin

import (
	"bytes"
	"context"
	"errors"
	"math"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/evolve"
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

// walk calls fn with every partition of the store in identity order,
// starting after the partition or unlinked region after names (nil: from
// the first), and unlinked with each unlinked region, followed by its
// partitions that have a wake time (the due index finds them). With limit
// above 0 it stops after limit partitions and regions and returns the
// identity or prefix to continue after; it returns nil when it listed
// the last.
func walk(ctx context.Context, l *fdblayer.Layer, after []byte, limit int, fn func(store.Identity) error, unlinked func(Unlinked) error) ([]byte, error) {
	var next []byte
	n := 0
	err := l.ListPartitions(ctx, after, evolve.SplitIdentity, func(p fdblayer.ListedPartition) error {
		if limit > 0 && n == limit {
			return errPageFull
		}
		n++
		if !p.Unsplit {
			next, _ = p.Identity.AppendTuple(nil)
			return fn(p.Identity)
		}
		next = p.Prefix
		u := Unlinked{Prefix: formatTuple(p.Prefix), FirstKey: formatTuple(p.FirstKey)}
		r := tuple.NewReader(p.Prefix)
		u.Namespace, _ = r.ReadString()
		if err := unlinked(u); err != nil {
			return err
		}
		return dueEntries(ctx, l, math.MaxUint64, func(e store.DueEntry) error {
			if !bytes.HasPrefix(e.Partition, p.Prefix) {
				return nil
			}
			id, err := store.ParseIdentity(e.Partition)
			if err != nil {
				return err
			}
			return fn(id)
		})
	})
	switch {
	case errors.Is(err, errPageFull):
		return next, nil
	case err != nil:
		return nil, err
	}
	return nil, nil
}

// errPageFull stops a walk at its limit.
var errPageFull = errors.New("admin: page full")

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

// eachPartition calls fn with partition id when it is given, else with
// every partition of the store (see walk), from after, limit at most
// (0: all), and returns where to continue.
func (v *viewer) eachPartition(ctx context.Context, id []byte, after []byte, limit int, fn func(store.Identity) error) ([]byte, error) {
	if id != nil {
		p, err := store.ParseIdentity(id)
		if err != nil {
			return nil, usagef("%s is no partition identity: %v", formatTuple(id), err)
		}
		return nil, fn(p)
	}
	return walk(ctx, v.l, after, limit, fn, func(Unlinked) error { return nil })
}
