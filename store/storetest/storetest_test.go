package storetest

import (
	"context"
	"testing"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// openModel opens reference models with caps, without a due index.
func openModel(caps store.Capabilities) NewStore {
	return func(t *testing.T, clk clock.Clock) store.Store { return newModel(clk, caps) }
}

// openDueModel opens reference models with caps and a due index.
func openDueModel(caps store.Capabilities) NewStore {
	return func(t *testing.T, clk clock.Clock) store.Store { return newDueModel(clk, caps) }
}

// TestRun proves the suite against the reference model: with a due index
// and FoundationDB-like limits, without one and with small limits that
// reserve operations, through a Faults wrapper with nothing configured
// (which must be transparent), and in a variant without scan lookahead.
func TestRun(t *testing.T) {
	t.Run("Model", func(t *testing.T) {
		t.Parallel()
		Run(t, openDueModel(fdbLikeCaps))
	})
	t.Run("ModelSmallLimits", func(t *testing.T) {
		t.Parallel()
		Run(t, openModel(smallCaps))
	})
	t.Run("ModelBehindFaults", func(t *testing.T) {
		t.Parallel()
		Run(t, func(t *testing.T, clk clock.Clock) store.Store { return NewFaults(newDueModel(clk, smallCaps)) })
	})
	t.Run("ModelWithoutLookahead", func(t *testing.T) {
		t.Parallel()
		Run(t, func(t *testing.T, clk clock.Clock) store.Store { return withoutLookahead{newModel(clk, fdbLikeCaps)} })
	})
}

// withoutLookahead is a conforming variant of the model that reads exactly
// limit rows and so cannot tell a full last page from a full middle one: it
// hands out a cursor for every full page. The suite accepts it, as the
// contract allows: the page after such a cursor is empty with Next nil.
type withoutLookahead struct{ *model }

func (s withoutLookahead) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	page, err := s.model.Scan(ctx, p, start, end, after, limit)
	if err != nil || page.Next != nil || len(page.Entries) != limit {
		return page, err
	}
	id, err := partitionID(p)
	if err != nil {
		return store.ScanPage{}, err
	}
	page.Next = encodeModelCursor(modelCursor{part: id, start: start, end: end, last: page.Entries[limit-1].Key})
	return page, nil
}
