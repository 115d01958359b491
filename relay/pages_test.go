package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// unboundedPages is a store that reports no bound on a scan page's bytes
// (Capabilities.MaxScanBytes 0), whatever the store it wraps does.
type unboundedPages struct{ store.Store }

func (s unboundedPages) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.MaxScanBytes = 0
	return c
}

// A window of small rows is one read of the queue from a source store
// whose calls wait for a cluster and that bounds a page's bytes (the Layer
// on the MVCC engine, as on FoundationDB: one round trip instead of one
// per ScanPageRows rows in sequence); pages of ScanPageRows rows from a
// store whose calls do not wait (the memory and bbolt engines, where a
// page is decoded while its rows are in the cache) or that does not bound
// a page's bytes. Either way a fire reads the same window and delivers the
// same rows.
func TestAWindowOfSmallRowsIsOneReadFromACluster(t *testing.T) {
	queueStart, queueEnd := gen.ClassRange(gen.TagRelayKey)
	window := 4 * relay.DefaultMaxRows
	for _, tt := range []struct {
		name    string
		wrap    func(store.Store) store.Store
		bounded bool
	}{
		{"a store bounding page bytes", func(s store.Store) store.Store { return s }, true},
		{"a store not bounding them", func(s store.Store) store.Store { return unboundedPages{s} }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				targets := []store.Partition{ta, tb}
				var rows []row
				for i := range window + 44 {
					rows = append(rows, put(targets[i%2], fmt.Sprint("k", i), "v"))
				}
				seqs := e.queue(t, rows...)
				var limits []int
				e.source.AfterRead(func(_ context.Context, c storetest.Call) error {
					if c.Method == storetest.MethodScan && c.Partition == source &&
						bytes.Compare(c.Start, queueStart) >= 0 && bytes.Compare(c.Start, queueEnd) < 0 {
						limits = append(limits, c.Limit)
					}
					return nil
				})
				rep, err := timers.RunDue(e.ctx, tt.wrap(e.source), source, e.reg, e.now(), timers.RunConfig{Clock: e.clock, Logger: e.logger, Metrics: e.metrics})
				require.NoError(t, err)
				require.Equal(t, 1, rep.Fired)

				// The rows a read of the queue asks for: one more where the
				// first is read beside the outbox state (calls that overlap).
				page, reads := relay.ScanPageRows, window/relay.ScanPageRows
				if tt.bounded && store.OverlapsCalls(e.source) {
					page, reads = window, 1
				}
				require.Len(t, limits, reads, "the fire's reads of the queue (their row limits: %v)", limits)
				for _, l := range limits {
					require.Contains(t, []int{page, page + 1}, l, "rows a read asks for (all: %v)", limits)
				}

				e.requireWindowDelivered(t, seqs, window)
			})
		})
	}
}

// A window of large rows ends pages at the store's byte bound. Where the
// first page is read beside the outbox state, a page cut that way stands
// for the window's first page and the window reads on after it: the
// queue's head is read once, not again by the window, and every row of
// the window is delivered exactly once.
func TestAHeadPageCutByTheByteBoundIsTheWindowsFirst(t *testing.T) {
	queueStart, queueEnd := gen.ClassRange(gen.TagRelayKey)
	window := 4 * relay.DefaultMaxRows
	value := strings.Repeat("v", 8_000) // 256 rows: about 2 MiB, two byte-bound pages and more
	forEachEngine(t, func(t *testing.T, e *env) {
		if !store.OverlapsCalls(e.source) {
			t.Skip("the first page is read beside the outbox state only where calls overlap")
		}
		targets := []store.Partition{ta, tb}
		var rows []row
		for i := range window + 10 {
			rows = append(rows, put(targets[i%2], fmt.Sprint("k", i), value))
		}
		seqs := e.queue(t, rows...)
		var starts []store.Key
		e.source.AfterRead(func(_ context.Context, c storetest.Call) error {
			if c.Method == storetest.MethodScan && c.Partition == source &&
				bytes.Compare(c.Start, queueStart) >= 0 && bytes.Compare(c.Start, queueEnd) < 0 {
				starts = append(starts, c.Start)
			}
			return nil
		})
		e.step(t)
		require.GreaterOrEqual(t, len(starts), 2, "the window's rows span pages")
		heads := 0
		for _, s := range starts {
			if bytes.Equal(s, queueStart) {
				heads++
			}
		}
		require.Equal(t, 1, heads, "reads from the queue's head (of %d reads)", len(starts))
		e.requireWindowDelivered(t, seqs, window)
	})
}

// requireWindowDelivered checks that a fire delivered the first window of
// the rows queued as seqs, alternately to ta and tb, each exactly once, and
// left the rest queued.
func (e *env) requireWindowDelivered(t *testing.T, seqs []uint64, window int) {
	t.Helper()
	require.Equal(t, seqs[window:], e.queued(t), "the window's rows delivered, the rest queued")
	var toA, toB []uint64
	for i, s := range seqs[:window] {
		if i%2 == 0 {
			toA = append(toA, s)
		} else {
			toB = append(toB, s)
		}
	}
	e.requireAppliedOnce(t, ta, toA...)
	e.requireAppliedOnce(t, tb, toB...)
}
