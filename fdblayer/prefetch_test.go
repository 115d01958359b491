package fdblayer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/store"
)

// TestPrefetchRoundTrips: on the MVCC engine a prefetch is a read version
// and one read, and the batch guarded on what it read is then one commit,
// no read of its own; a guard on a key it did not read costs one read. A
// key written since the prefetch makes the commit conflict, and the retry
// reads again and decides on what it reads.
func TestPrefetchRoundTrips(t *testing.T) {
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Backoff: time.Microsecond, MaxBackoff: time.Microsecond})
	l := openLayer(t, e)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")).Put(k("b"), v("1")))
	var pf store.Prefetched
	got := statsDelta(e, func() {
		var err error
		pf, err = l.Prefetch(t.Context(), p, []store.Key{k("a"), k("b")})
		require.NoError(t, err)
	})
	require.Equal(t, fdbsim.MVCCStats{Begun: 1, Reads: 1, KeysRead: 2}, got, "the prefetch")
	got = statsDelta(e, func() {
		out, err := pf.Apply(t.Context(), store.NewBatch().Require(store.Equals(k("a"), v("1")), store.Equals(k("b"), v("1"))).Put(k("a"), v("2")))
		require.NoError(t, err)
		require.True(t, out.Committed(), "%v", out)
	})
	require.Equal(t, fdbsim.MVCCStats{Commits: 1}, got, "guards on prefetched keys cost no read")
	pf.Close()

	pf, err := l.Prefetch(t.Context(), p, []store.Key{k("a")})
	require.NoError(t, err)
	got = statsDelta(e, func() {
		out, err := pf.Apply(t.Context(), store.NewBatch().Require(store.Equals(k("a"), v("2")), store.Absent(k("c"))).Put(k("c"), v("x")))
		require.NoError(t, err)
		require.True(t, out.Committed(), "%v", out)
	})
	require.Equal(t, fdbsim.MVCCStats{Reads: 1, KeysRead: 1, Commits: 1}, got, "a guard on a key not prefetched")
	pf.Close()

	pf, err = l.Prefetch(t.Context(), p, []store.Key{k("a")})
	require.NoError(t, err)
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("3")))
	got = statsDelta(e, func() {
		out, err := pf.Apply(t.Context(), store.NewBatch().Require(store.Equals(k("a"), v("2"))).Put(k("d"), v("x")))
		require.NoError(t, err)
		require.Equal(t, store.PreconditionFailed, out.Outcome, "decided on the value written since")
	})
	require.Equal(t, uint64(1), got.Conflicts)
	require.Equal(t, uint64(1), got.Retries)
	require.Nil(t, mustGet(t, l, p, k("d")))
	pf.Close()
}

// TestPrefetchOutlivingTheTransactionLifetimeStillApplies: a prefetch
// whose caller's work takes longer than the engine's transaction lifetime
// (FoundationDB's five seconds, here on a manual clock) grows too old; its
// Apply retries on a fresh read version, reads the guards again and
// commits, as Apply would.
func TestPrefetchOutlivingTheTransactionLifetimeStillApplies(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Clock: clk, Backoff: time.Microsecond, MaxBackoff: time.Microsecond})
	l := openLayer(t, e, Config{Clock: clk})
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))
	pf, err := l.Prefetch(t.Context(), p, []store.Key{k("a")})
	require.NoError(t, err)
	defer pf.Close()
	clk.Advance(fdbsim.MVCCLifetime + time.Second)
	got := statsDelta(e, func() {
		out, err := pf.Apply(t.Context(), store.NewBatch().Require(store.Equals(k("a"), v("1"))).Put(k("a"), v("2")))
		require.NoError(t, err)
		require.True(t, out.Committed(), "%v", out)
	})
	require.Equal(t, uint64(1), got.TooOld)
	require.Equal(t, uint64(1), got.Retries)
	require.Equal(t, uint64(1), got.Reads, "the guard read again")
	require.Equal(t, v("2"), mustGet(t, l, p, k("a")))
}

// TestPrefetchHoldsNoWriter: on every engine, made Distributed or not,
// writes of the prefetched keys land while a prefetch is open, and the
// prefetch's own batch is then decided on them: on the memory and bbolt
// engines, whose write transactions run one at a time, a prefetch reads
// nothing and keeps nothing.
func TestPrefetchHoldsNoWriter(t *testing.T) {
	check := func(t *testing.T, l *Layer) {
		p := testPartition("p")
		mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))
		pf, err := l.Prefetch(t.Context(), p, []store.Key{k("a")})
		require.NoError(t, err)
		defer pf.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		out, err := l.Apply(ctx, p, store.NewBatch().Put(k("a"), v("2")))
		require.NoError(t, err, "a writer beside an open prefetch")
		require.True(t, out.Committed())
		out, err = pf.Apply(ctx, store.NewBatch().Require(store.Equals(k("a"), v("2"))).Put(k("a"), v("3")))
		require.NoError(t, err)
		require.True(t, out.Committed(), "%v", out)
		require.Equal(t, v("3"), mustGet(t, l, p, k("a")))
	}
	t.Run("engine", func(t *testing.T) { forEachEngine(t, check) })
	t.Run("distributed", func(t *testing.T) { forEachDistributedEngine(t, check) })
}
