package evolve

import (
	"context"
)

// DueIndexPager is what DueIndexMigration runs: fdblayer's Layer is one
// (its MigrateDueIndexPage: one transaction moving up to a page of the
// due index's first-layout entries to their buckets, and whether any may
// be left).
type DueIndexPager interface {
	MigrateDueIndexPage(ctx context.Context) (moved int, more bool, err error)
}

// DueIndexMigrationName is the name of DueIndexMigration's checkpoint.
const DueIndexMigrationName = "mkit.due-index"

// DueIndexMigration returns the Migration that moves a store's due index
// entries of the layout before buckets to their buckets (the Layer's
// MigrateDueIndexPage), a page per Step, named DueIndexMigrationName. Its
// cursor says only that it goes on: each page finds the entries left in
// the first layout's range, which empties. A page is safe beside running
// schedulers and timer writers, and safe to run again. A store never
// needs it to find its timers (the Layer lists those entries as a bucket
// of their own, and moves each when its partition's wake time changes):
// it spares the listing that bucket's read.
func DueIndexMigration(l DueIndexPager) Migration { return dueIndex{l} }

type dueIndex struct{ l DueIndexPager }

func (dueIndex) Name() string { return DueIndexMigrationName }

// going is dueIndex's cursor while entries may be left.
var going = []byte{0x01}

// Step implements Migration: one MigrateDueIndexPage.
func (d dueIndex) Step(ctx context.Context, _ []byte) ([]byte, Page, error) {
	moved, more, err := d.l.MigrateDueIndexPage(ctx)
	if err != nil {
		return nil, Page{}, err
	}
	page := Page{Rows: moved, Rewritten: moved}
	if !more {
		return nil, page, nil
	}
	return going, page, nil
}
