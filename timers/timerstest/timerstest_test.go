package timerstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// Each way of breaking the invariant is reported, naming its partition;
// a partition that keeps it is not.
func TestCheckDueIndexReportsEachViolation(t *testing.T) {
	now := time.UnixMilli(10_000)
	lease := func(expires time.Time) store.Value {
		expiresMs, err := store.EncodeTime(expires)
		require.NoError(t, err)
		v, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: "w", ExpiresAtMs: expiresMs})
		require.NoError(t, err)
		return v
	}
	leaseKey := gen.AppendSchedulerLeaseKey(nil)
	cases := []struct {
		name    string
		arrange func(b *store.Batch) // after a timer due at now was written with its wake time
		problem string               // "" when the invariant holds
	}{
		{"kept", func(*store.Batch) {}, ""},
		{"earlier entry", func(b *store.Batch) { b.SetWake(now, now.Add(-5*time.Millisecond)) }, ""},
		{"no entry", func(b *store.Batch) { b.SetWake(now, time.Time{}) }, "no due index entry"},
		{"later entry", func(b *store.Batch) { b.SetWake(now, now.Add(time.Millisecond)) }, "later than its earliest timer"},
		{"parked under a lease", func(b *store.Batch) {
			b.Put(leaseKey, lease(now.Add(10*time.Millisecond))).SetWake(now, timers.ParkedWake)
		}, ""},
		{"parked without a lease", func(b *store.Batch) { b.SetWake(now, timers.ParkedWake) }, "parked without a scheduler lease"},
		{"leased, entry before the lease expires", func(b *store.Batch) {
			b.Put(leaseKey, lease(now.Add(10*time.Millisecond))).SetWake(now, now.Add(10*time.Millisecond))
		}, ""},
		{"leased, entry after the lease expires", func(b *store.Batch) {
			b.Put(leaseKey, lease(now.Add(10*time.Millisecond))).SetWake(now, now.Add(11*time.Millisecond))
		}, "and its lease's expiry"},
		{"corrupt lease", func(b *store.Batch) { b.Put(leaseKey, store.Value("junk")) }, "lease does not decode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
			require.NoError(t, err)
			defer l.Close()
			p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("p")}
			b := store.NewBatch()
			require.NoError(t, timers.Schedule(b, l.Capabilities(), nil, timers.Timer{Kind: 300, Reference: "r", DueAt: now}))
			out, err := l.Apply(ctx, p, b)
			require.NoError(t, err)
			require.True(t, out.Committed())
			b = store.NewBatch()
			tc.arrange(b)
			if b.Ops() > 0 || b.Wakeup != nil {
				out, err = l.Apply(ctx, p, b)
				require.NoError(t, err)
				require.True(t, out.Committed(), "%v", out)
			}

			err = timerstest.CheckDueIndex(ctx, l, []store.Partition{p})
			if tc.problem == "" {
				require.NoError(t, err)
				return
			}
			var v timerstest.Error
			require.True(t, errors.As(err, &v), "%v", err)
			require.Len(t, v, 1)
			require.Contains(t, v[0].Problem, tc.problem)
			require.Contains(t, err.Error(), "namespace(p)")
		})
	}
}

// A paused wake time covers the timers the pauses hold now, under the
// current pause generation; it covers every timer once a resume ended its
// generation; never a timer no pause holds due before its own time.
func TestCheckDueIndexKnowsThePauses(t *testing.T) {
	now := time.UnixMilli(10_000)
	const paused, other timers.Kind = 300, 301
	note := timers.PauseNote{At: now, Who: "ops", Reason: "down"}
	cases := []struct {
		name    string
		kinds   []timers.Kind // paused for the whole store
		resumed bool          // paused kind resumed after the wake time was written
		queues  bool          // the partition's queues paused
		timers  []timers.Timer
		wake    func(generation uint64) time.Time
		problem string
	}{
		{"paused kind, nothing else", []timers.Kind{paused}, false, false,
			[]timers.Timer{{Kind: paused, Reference: "a", DueAt: now}},
			func(g uint64) time.Time { return timers.PausedWake(g, time.Time{}) }, ""},
		{"no pause holds it", nil, false, false,
			[]timers.Timer{{Kind: paused, Reference: "a", DueAt: now}},
			func(g uint64) time.Time { return timers.PausedWake(g, time.Time{}) }, "later than its earliest timer no pause holds"},
		{"the next timer no pause holds", []timers.Kind{paused}, false, false,
			[]timers.Timer{{Kind: paused, Reference: "a", DueAt: now}, {Kind: other, Reference: "b", DueAt: now.Add(5 * time.Millisecond)}},
			func(g uint64) time.Time { return timers.PausedWake(g, now.Add(5*time.Millisecond)) }, ""},
		{"after the next timer no pause holds", []timers.Kind{paused}, false, false,
			[]timers.Timer{{Kind: paused, Reference: "a", DueAt: now}, {Kind: other, Reference: "b", DueAt: now.Add(5 * time.Millisecond)}},
			func(g uint64) time.Time { return timers.PausedWake(g, now.Add(6*time.Millisecond)) }, "later than its earliest timer no pause holds"},
		{"a generation a resume ended", []timers.Kind{paused}, true, false,
			[]timers.Timer{{Kind: paused, Reference: "a", DueAt: now}, {Kind: other, Reference: "b", DueAt: now.Add(5 * time.Millisecond)}},
			func(g uint64) time.Time { return timers.PausedWake(g, time.Time{}) }, ""},
		{"paused queues", nil, false, true,
			[]timers.Timer{{Kind: timers.KindRelay, DueAt: now}},
			func(g uint64) time.Time { return timers.PausedWake(g, time.Time{}) }, ""},
		{"paused queues hold no service kind", nil, false, true,
			[]timers.Timer{{Kind: timers.KindRelay, DueAt: now}, {Kind: other, Reference: "b", DueAt: now.Add(time.Millisecond)}},
			func(g uint64) time.Time { return timers.PausedWake(g, time.Time{}) }, "later than its earliest timer no pause holds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
			require.NoError(t, err)
			defer l.Close()
			apply := func(p store.Partition, b *store.Batch) {
				t.Helper()
				out, err := l.Apply(ctx, p, b)
				require.NoError(t, err)
				require.True(t, out.Committed(), "%v", out)
			}
			members := store.ReaderOf(l, timers.MembersPartition)
			for _, k := range tc.kinds {
				b := store.NewBatch()
				_, err := timers.PauseKind(ctx, members, b, k, note)
				require.NoError(t, err)
				apply(timers.MembersPartition, b)
			}
			p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("p")}
			b := store.NewBatch()
			for _, tm := range tc.timers {
				require.NoError(t, timers.Schedule(b, l.Capabilities(), nil, tm))
			}
			if tc.queues {
				_, err := timers.PausePartition(ctx, store.ReaderOf(l, p), b, note)
				require.NoError(t, err)
			}
			apply(p, b)
			cur, _, err := l.NextWake(ctx, p)
			require.NoError(t, err)
			apply(p, store.NewBatch().SetWake(cur, tc.wake(0)))
			if tc.resumed {
				b := store.NewBatch()
				_, err := timers.ResumeKind(ctx, members, b, paused)
				require.NoError(t, err)
				apply(timers.MembersPartition, b)
			}

			err = timerstest.CheckDueIndex(ctx, l, []store.Partition{p})
			if tc.problem == "" {
				require.NoError(t, err)
				return
			}
			var v timerstest.Error
			require.True(t, errors.As(err, &v), "%v", err)
			require.Len(t, v, 1)
			require.Contains(t, v[0].Problem, tc.problem)
		})
	}
}
