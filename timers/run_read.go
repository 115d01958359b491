package timers

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: one read of the timer row and its reference entry per fire.
//
// The scan finds due timers; with it RunDue reads each due timer's
// reference entry: in the scan's transaction under a Scheduler's claim on
// a store.Transactor (the claim reads the first page so), else together
// with the timer row again, in one GetMany (one snapshot). A row gone by then was cancelled or moved by another
// writer and is skipped; a row whose reference entry is missing or names
// another due time is corrupt (every writer in this package keeps the two
// in step) and is left in place. The values read are the ones the outcome's
// guards require, so a fire lands only on exactly the timer it saw.

// timerPage is one page of the timer class, read in one snapshot: the
// scanned rows and, for each due row whose key parses (up to the first
// row not yet due), its reference entry's value as read with it.
type timerPage struct {
	entries []store.KeyValue
	next    store.Cursor
	// refs[i] is the reference entry of entries[i], for the due rows whose
	// key parses (up to the first not yet due); the others' is zero.
	refs []refRead
}

// refRead is a due row's reference entry: its key and its value as read
// with the row (nil: absent).
type refRead struct {
	key   store.Key
	value store.Value
}

// readTimers reads a page of the timer class after after, at most limit
// rows, through r, and the reference entries of its due rows, with extra
// keys (a lease) read in the same GetMany: extraVals holds their values.
// oneSnapshot says r reads one snapshot (a Transactor's Reader); elsewhere
// the due rows are read again with their reference entries, so that each
// row and its entry come from one snapshot.
func readTimers(ctx context.Context, r store.Reader, oneSnapshot bool, after store.Cursor, limit int, nowMs uint64, extra ...store.Key) (pg timerPage, extraVals []store.Value, err error) {
	start, end := gen.ClassRange(gen.TagTimerKey)
	page, err := r.Scan(ctx, start, end, after, limit)
	if err != nil {
		return pg, nil, fmt.Errorf("timers: scan timers of %s: %w", store.PartitionName(r.Partition()), err)
	}
	pg = timerPage{entries: page.Entries, next: page.Next, refs: make([]refRead, len(page.Entries))}
	keys := make([]store.Key, 0, len(extra)+2*len(page.Entries))
	keys = append(keys, extra...)
	due := 0 // the due rows are the first ones whose keys parse
	for i, kv := range page.Entries {
		tk, err := gen.ParseTimerKey(kv.Key)
		if err != nil {
			continue
		}
		if tk.DueAtMs > nowMs {
			break
		}
		refKey, err := RefKey(Kind(tk.Kind), tk.Reference)
		if err != nil { // the parsed key bounds the reference: unreachable
			return pg, nil, err
		}
		if !oneSnapshot {
			keys = append(keys, kv.Key)
		}
		keys = append(keys, refKey)
		pg.refs[i].key = refKey
		due = i + 1
	}
	if len(keys) == 0 {
		return pg, nil, nil
	}
	vals, err := r.GetMany(ctx, keys)
	if err != nil {
		return pg, nil, fmt.Errorf("timers: read due timers of %s: %w", store.PartitionName(r.Partition()), err)
	}
	if len(vals) != len(keys) {
		return pg, nil, fmt.Errorf("timers: read due timers of %s: %d values for %d keys: %w",
			store.PartitionName(r.Partition()), len(vals), len(keys), store.ErrCorrupt)
	}
	extraVals, vals = vals[:len(extra)], vals[len(extra):]
	j := 0
	for i := range pg.entries[:due] {
		if pg.refs[i].key == nil {
			continue // a key that does not parse
		}
		if !oneSnapshot {
			// The row as read with its reference entry: it may have
			// changed since the scan.
			pg.entries[i].Value = vals[j]
			j++
		}
		pg.refs[i].value = vals[j]
		j++
	}
	return pg, extraVals, nil
}
