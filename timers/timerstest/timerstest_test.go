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
