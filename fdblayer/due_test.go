package fdblayer_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/store"
)

func identity(t *testing.T, p store.Partition) []byte {
	t.Helper()
	id, err := p.AppendTuple(nil)
	require.NoError(t, err)
	return id
}

// TestDueIndexBesidePartitions: wake times and due entries stay out of
// every partition's rows and stats, also for partitions whose identities
// are prefixes of one another in bytes.
func TestDueIndexBesidePartitions(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		a, b := testPartition("iso"), testPartition("iso\x00")
		mustApply(t, l, a, store.NewBatch().Put(k("t"), v("a")).WakeAt(t0.Add(2*time.Second)))
		mustApply(t, l, b, store.NewBatch().Put(k("t"), v("b")).WakeAt(t0.Add(time.Second)))
		for _, p := range []store.Partition{a, b} {
			require.Equal(t, []string{"t"}, rowKeys(scanAllRows(t, l, p, nil, nil, 10)))
		}
		at, ok, err := l.NextWake(t.Context(), a)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, t0.Add(2*time.Second), at)
		at, _, err = l.NextWake(t.Context(), b)
		require.NoError(t, err)
		require.Equal(t, t0.Add(time.Second), at)
		es := scanAllDue(t, l)
		require.ElementsMatch(t, []store.DueEntry{dueAt(t, l, b, t0.Add(time.Second)), dueAt(t, l, a, t0.Add(2*time.Second))}, es)
		_, err = l.ScanDue(t.Context(), store.DueQuery{})
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}

// TestWakeupUnknownResult: after an unknown commit result the retry's
// wake guard decides like any precondition: an exact SetWake that landed
// fails its WakeIs (FailedIndex 0, its index), a WakeAt that landed
// commits again; either way the index holds one entry.
func TestWakeupUnknownResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    *store.Batch
		want store.Outcome
	}{
		{"SetWake", store.NewBatch().Put(k("t"), v("x")).SetWake(time.Time{}, t0.Add(5*time.Second)), store.PreconditionFailed},
		{"WakeAt", store.NewBatch().Put(k("t"), v("x")).WakeAt(t0.Add(5 * time.Second)), store.Committed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := &faultScript{steps: []faultStep{{fault: fdbsim.CommitThenUnknown}}}
			l := faultLayer(t, script)
			out := mustApply(t, l, faultP, tc.b)
			require.Equal(t, tc.want, out.Outcome)
			if tc.want == store.PreconditionFailed {
				require.Equal(t, 0, out.FailedIndex)
				require.Equal(t, store.WakeIs(time.Time{}), out.Failed)
			}
			require.Equal(t, []store.DueEntry{dueAt(t, l, faultP, t0.Add(5*time.Second))}, scanAllDue(t, l))
		})
	}
}

// TestCorruptWakeData: a stored wake time or due entry that does not
// decode is ErrCorrupt, never skipped or taken for none.
func TestCorruptWakeData(t *testing.T) {
	e := memengine.New()
	l := openLayer(t, e)
	p := testPartition("p")
	sub, err := l.AppendSubspace(nil, p)
	require.NoError(t, err)
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	txn.Set(append(sub, PartitionEnd), []byte{1, 2, 3})
	txn.Set(append([]byte(DefaultRootPrefix), PartitionEnd, DueTag, 0, 0, 0, 0, 0, 0, 1, 0), []byte{}) // a time, no identity
	require.NoError(t, txn.Commit())
	txn.Close()

	_, _, err = l.NextWake(t.Context(), p)
	require.ErrorIs(t, err, store.ErrCorrupt)
	for _, b := range []*store.Batch{
		store.NewBatch().Put(k("t"), v("x")).WakeAt(t0.Add(time.Second)),
		store.NewBatch().Require(store.WakeIs(t0.Add(time.Second))).Put(k("t"), v("x")),
	} {
		_, err = l.Apply(t.Context(), p, b)
		require.ErrorIs(t, err, store.ErrCorrupt)
		require.NotErrorIs(t, err, store.ErrUnavailable)
		require.Nil(t, mustGet(t, l, p, k("t")))
	}
	_, err = l.ScanDue(t.Context(), store.DueQuery{Until: store.MaxTime, Limit: 10})
	require.ErrorIs(t, err, store.ErrCorrupt)
}

// scanAllDue lists the whole due index, from bucket 0.
func scanAllDue(t *testing.T, l *Layer) []store.DueEntry {
	t.Helper()
	es, err := l.ScanDue(t.Context(), store.DueQuery{Until: store.MaxTime, Limit: 100_000})
	require.NoError(t, err)
	return es
}

// dueAt is p's entry at at, in its bucket of l.
func dueAt(t *testing.T, l *Layer, p store.Partition, at time.Time) store.DueEntry {
	id := identity(t, p)
	return store.DueEntry{Bucket: l.DueBucket(id), At: at, Partition: id}
}

// TestDueBucketsSpread: partitions made due in the same millisecond land
// in at least half of the buckets, each entry in the bucket of its
// identity's hash, and every listing (from any bucket) finds them all.
func TestDueBucketsSpread(t *testing.T) {
	forEachDistributedEngine(t, func(t *testing.T, l *Layer) {
		require.Equal(t, DueHashBuckets+1, l.DueBuckets())
		const n = 64
		var want []store.DueEntry
		for i := range n {
			p := testPartition(fmt.Sprintf("spread-%02d", i))
			mustApply(t, l, p, store.NewBatch().Put(k("t"), v("x")).WakeAt(t0.Add(7*time.Second)))
			want = append(want, dueAt(t, l, p, t0.Add(7*time.Second)))
		}
		buckets := map[int]bool{}
		for _, e := range scanAllDue(t, l) {
			buckets[e.Bucket] = true
		}
		require.GreaterOrEqual(t, len(buckets), DueHashBuckets/2, "buckets holding %d partitions due at one time", n)
		for start := range l.DueBuckets() {
			es, err := l.ScanDue(t.Context(), store.DueQuery{Until: t0.Add(7 * time.Second), Start: start, Limit: 1000})
			require.NoError(t, err)
			require.ElementsMatch(t, want, es, "listing from bucket %d", start)
		}
		// The keys themselves: each entry under its bucket's prefix.
		for _, e := range want {
			key := binary.BigEndian.AppendUint64(l.DueBucketPrefix(e.Bucket), 7000)
			require.Equal(t, []byte{PartitionEnd, DueTag, byte(e.Bucket)}, key[len(l.Root()):len(l.Root())+3])
		}
	})
}

// TestDueBucketsByEngine: a Distributed engine's due index has
// DueHashBuckets buckets, the memory and bbolt engines' one (each with the
// first layout's bucket after it); fdbsim.AsDistributed gives a local
// engine the buckets of a Distributed one.
func TestDueBucketsByEngine(t *testing.T) {
	require.Equal(t, DueHashBuckets+1, openLayer(t, fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{})).DueBuckets())
	require.Equal(t, 2, openLayer(t, memengine.New()).DueBuckets())
	bolt := engineCases[2].open(t)
	require.Equal(t, 2, openLayer(t, bolt).DueBuckets())
	require.Equal(t, DueHashBuckets+1, openLayer(t, fdbsim.AsDistributed(memengine.New())).DueBuckets())
	bolt = engineCases[2].open(t)
	require.Equal(t, DueHashBuckets+1, openLayer(t, fdbsim.AsDistributed(bolt)).DueBuckets())
}

// writeV1Entry writes partition p's wake time at as the layout before
// buckets did: the wake key and an entry root | 0xFF 0x01 | at | identity.
func writeV1Entry(t *testing.T, e kv.Engine, l *Layer, p store.Partition, at time.Time) {
	t.Helper()
	atMs, err := store.EncodeTime(at)
	require.NoError(t, err)
	sub, err := l.AppendSubspace(nil, p)
	require.NoError(t, err)
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer txn.Close()
	txn.Set(append(sub, PartitionEnd), binary.BigEndian.AppendUint64(nil, atMs))
	entry := binary.BigEndian.AppendUint64(append(append([]byte{}, l.Root()...), PartitionEnd, DueTagV1), atMs)
	txn.Set(append(entry, sub[len(l.Root()):]...), []byte{})
	require.NoError(t, txn.Commit())
}

// TestDueIndexFirstLayout: a store whose entries were written before
// buckets lists them (as the last bucket) from every start; a wake time
// change moves the entry to its bucket, leaving none behind; and
// MigrateDueIndex moves the rest, keeping each at its wake time, so that
// nothing is lost on the way.
func TestDueIndexFirstLayout(t *testing.T) {
	for _, eng := range []struct {
		name string
		open func() kv.Engine
	}{
		{"memory", func() kv.Engine { return memengine.New() }},
		{"mvcc", func() kv.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}) }},
	} {
		t.Run(eng.name, func(t *testing.T) {
			e := eng.open()
			l := openLayer(t, e)
			var ps []store.Partition
			for i := range 10 {
				p := testPartition(fmt.Sprintf("v1-%d", i))
				ps = append(ps, p)
				writeV1Entry(t, e, l, p, t0.Add(time.Duration(1000+i)*time.Millisecond))
			}
			for start := range l.DueBuckets() {
				es, err := l.ScanDue(t.Context(), store.DueQuery{Until: t0.Add(5 * time.Second), Start: start, Limit: 3})
				require.NoError(t, err)
				require.Len(t, es, 3)
			}
			all := scanAllDue(t, l)
			require.Len(t, all, 10)
			for i, e := range all {
				require.Equal(t, l.V1Bucket(), e.Bucket)
				require.Equal(t, identity(t, ps[i]), e.Partition)
			}
			// Touching a partition's wake time moves its entry.
			mustApply(t, l, ps[0], store.NewBatch().SetWake(t0.Add(time.Second), t0.Add(900*time.Millisecond)))
			mustApply(t, l, ps[1], store.NewBatch().WakeAt(t0.Add(500*time.Millisecond)))
			// Lowering to a later time changes nothing: it stays where it is.
			mustApply(t, l, ps[2], store.NewBatch().WakeAt(t0.Add(9*time.Second)))
			all = scanAllDue(t, l)
			require.Len(t, all, 10)
			require.Contains(t, all, dueAt(t, l, ps[0], t0.Add(900*time.Millisecond)))
			require.Contains(t, all, dueAt(t, l, ps[1], t0.Add(500*time.Millisecond)))
			require.Contains(t, all, store.DueEntry{Bucket: l.V1Bucket(), At: t0.Add(1002 * time.Millisecond), Partition: identity(t, ps[2])})

			// A stale entry of the first layout (its wake time moved on
			// without it) is dropped, and the wake time's own entry kept.
			writeV1Entry(t, e, l, ps[3], t0.Add(1003*time.Millisecond))
			stale := binary.BigEndian.AppendUint64(append(append([]byte{}, l.Root()...), PartitionEnd, DueTagV1), 1)
			txn, err := e.Begin(t.Context())
			require.NoError(t, err)
			txn.Set(append(stale, identity(t, ps[3])...), []byte{})
			require.NoError(t, txn.Commit())
			txn.Close()

			moved, err := l.MigrateDueIndex(t.Context())
			require.NoError(t, err)
			require.Equal(t, 9, moved)
			want := []store.DueEntry{dueAt(t, l, ps[0], t0.Add(900*time.Millisecond)), dueAt(t, l, ps[1], t0.Add(500*time.Millisecond))}
			for i := 2; i < 10; i++ {
				want = append(want, dueAt(t, l, ps[i], t0.Add(time.Duration(1000+i)*time.Millisecond)))
			}
			require.ElementsMatch(t, want, scanAllDue(t, l))
			moved, err = l.MigrateDueIndex(t.Context())
			require.NoError(t, err)
			require.Zero(t, moved)
		})
	}
}

// TestScanDueIsOneRoundTrip: on an engine whose transactions read ranges
// at once (the MVCC engine, like FoundationDB), a listing of every bucket
// is one read round trip, and finds what the one-bucket-at-a-time listing
// of the other engines does.
func TestScanDueIsOneRoundTrip(t *testing.T) {
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{})
	l := openLayer(t, e)
	var want []store.DueEntry
	for i := range 40 {
		p := testPartition(fmt.Sprintf("rt-%02d", i))
		mustApply(t, l, p, store.NewBatch().Put(k("t"), v("x")).WakeAt(t0.Add(time.Duration(1000+i)*time.Millisecond)))
		want = append(want, dueAt(t, l, p, t0.Add(time.Duration(1000+i)*time.Millisecond)))
	}
	before := e.Stats()
	es, err := l.ScanDue(t.Context(), store.DueQuery{Until: t0.Add(5 * time.Second), Start: 5, Limit: 1000})
	require.NoError(t, err)
	after := e.Stats()
	require.ElementsMatch(t, want, es)
	require.Equal(t, uint64(1), after.Reads-before.Reads, "one round trip for 17 ranges")
	require.Equal(t, uint64(1), after.Begun-before.Begun)
	// A page that ends early still resumes where it stopped.
	var got []store.DueEntry
	q := store.DueQuery{Until: t0.Add(5 * time.Second), Start: 5, Limit: 7}
	for {
		page, err := l.ScanDue(t.Context(), q)
		require.NoError(t, err)
		got = append(got, page...)
		if len(page) < q.Limit {
			break
		}
		q.After = &page[len(page)-1]
	}
	require.Equal(t, es, got)
}
