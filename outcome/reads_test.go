package outcome_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// fireReads runs one fire of the seeded partition through a Faults whose
// AfterRead hook is read, with a Delivery configured by cfg, and checks
// that every outcome was delivered.
func fireReads(t *testing.T, eng testengine.Engine, read func(context.Context, storetest.Call) error) {
	e := newEnvOn(t, eng, t0)
	e.seed("r1", "r2")
	f := storetest.NewFaults(e.s)
	f.AfterRead(read)
	reg, err := timers.NewRegistry(delivery(t, outcome.SinkFunc(func(context.Context, outcome.Envelope) error { return nil })))
	require.NoError(t, err)
	rep, err := timers.RunDue(ctx, f, partition, reg, t0, timers.RunConfig{Clock: e.clock})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Fired)
	assert.Zero(t, e.backlogRows(), "both outcomes acknowledged")
}

// isBacklogRead and isPageRead tell a fire's first two reads apart.
func isBacklogRead(c storetest.Call) bool {
	return c.Method == storetest.MethodGet && bytes.Equal(c.Key, outbox.BacklogKey())
}

func isPageRead(c storetest.Call) bool {
	start, _ := gen.ClassRange(gen.TagOutcomePendingKey)
	return c.Method == storetest.MethodScan && bytes.Equal(c.Start, start)
}

// On a store that overlaps calls (the MVCC engine) a fire reads the
// backlog and its page of pending rows side by side: the backlog's read
// waits (up to 10 s) for the page's, which it only meets if both are in
// flight at once.
func TestFireReadsTheBacklogAndThePageSideBySide(t *testing.T) {
	page := make(chan struct{})
	var once sync.Once
	first, met := true, false
	fireReads(t, testengine.MVCC, func(_ context.Context, c storetest.Call) error {
		switch {
		case isPageRead(c):
			once.Do(func() { close(page) })
		case isBacklogRead(c) && first:
			// The fire's first read of the backlog, not the one after the
			// sink calls.
			first = false
			select {
			case <-page:
				met = true
			case <-time.After(10 * time.Second):
			}
		}
		return nil
	})
	assert.True(t, met, "the page was read while the backlog's read was in flight")
}

// On a store that runs one writer at a time (the memory engine) a fire
// reads the backlog, then the page, on its own goroutine.
func TestFireReadsTheBacklogThenThePageOnOneWriter(t *testing.T) {
	var mu sync.Mutex
	var order []string
	fireReads(t, testengine.Memory, func(_ context.Context, c storetest.Call) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case isBacklogRead(c):
			order = append(order, "backlog")
		case isPageRead(c):
			order = append(order, "page")
		}
		return nil
	})
	require.GreaterOrEqual(t, len(order), 2)
	assert.Equal(t, []string{"backlog", "page"}, order[:2])
}
