package watermark_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// TestTimesBeforeTheEpochAreInvalid: a scan or a reconciliation at a time
// before the Unix epoch is refused with store.ErrInvalid; a resumed step
// ignores its now.
func TestTimesBeforeTheEpochAreInvalid(t *testing.T) {
	before := time.Unix(0, 0).Add(-time.Millisecond)
	forEachEngine(t, func(t *testing.T, e *env) {
		_, _, err := watermark.Step(e.ctx, e.s, coordinator, before, nil, 1)
		assert.ErrorIs(t, err, store.ErrInvalid, "Step")
		_, err = watermark.Watermark(e.ctx, e.s, coordinator, before)
		assert.ErrorIs(t, err, store.ErrInvalid, "Watermark")
		err = watermark.MarkLeaseTableReconciled(e.ctx, e.s, coordinator, before)
		assert.ErrorIs(t, err, store.ErrInvalid, "MarkLeaseTableReconciled")
	})
}
