package watermark_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mkit-dev/mkitfdb/store"
)

// TestTimesBeforeTheEpochAreInvalid: a scan or a reconciliation at a time
// before the Unix epoch is refused with store.ErrInvalid; a resumed step
// ignores its now.
func TestTimesBeforeTheEpochAreInvalid(t *testing.T) {
	before := time.Unix(0, 0).Add(-time.Millisecond)
	forEachEngine(t, func(t *testing.T, e *env) {
		_, _, err := table.Step(e.ctx, e.s, coordinator, before, nil, 1)
		assert.ErrorIs(t, err, store.ErrInvalid, "Step")
		_, err = table.Watermark(e.ctx, e.s, coordinator, before)
		assert.ErrorIs(t, err, store.ErrInvalid, "Watermark")
		err = table.MarkReconciled(e.ctx, e.s, coordinator, before)
		assert.ErrorIs(t, err, store.ErrInvalid, "MarkReconciled")

		e.putLease(t, 0, 40, 200)
		e.putLease(t, 1, 90, 200)
		cp := e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1)
		if got := e.mustComplete(t, before, cp, 1); !got.Equal(t0.Add(40 * time.Millisecond)) {
			t.Fatalf("resumed step at a now before the epoch: watermark %v; want 40ms after the epoch", got)
		}
	})
}
