package fdblayer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

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
		mustApply(t, l, a, store.NewBatch().Put(k("t"), v("a")).WakeAt(2000))
		mustApply(t, l, b, store.NewBatch().Put(k("t"), v("b")).WakeAt(1000))
		for _, p := range []store.Partition{a, b} {
			require.Equal(t, []string{"t"}, rowKeys(scanAllRows(t, l, p, nil, nil, 10)))
		}
		at, ok, err := l.NextWake(t.Context(), a)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, uint64(2000), at)
		at, _, err = l.NextWake(t.Context(), b)
		require.NoError(t, err)
		require.Equal(t, uint64(1000), at)
		es, err := l.ScanDue(t.Context(), math.MaxUint64, nil, 10)
		require.NoError(t, err)
		require.Equal(t, []store.DueEntry{{AtMs: 1000, Partition: identity(t, b)}, {AtMs: 2000, Partition: identity(t, a)}}, es)
		_, err = l.ScanDue(t.Context(), 0, nil, 0)
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
		{"SetWake", store.NewBatch().Put(k("t"), v("x")).SetWake(0, 5000), store.PreconditionFailed},
		{"WakeAt", store.NewBatch().Put(k("t"), v("x")).WakeAt(5000), store.Committed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := &faultScript{steps: []faultStep{{fault: CommitThenUnknown}}}
			l := faultLayer(t, script)
			out := mustApply(t, l, faultP, tc.b)
			require.Equal(t, tc.want, out.Outcome)
			if tc.want == store.PreconditionFailed {
				require.Equal(t, 0, out.FailedIndex)
				require.Equal(t, store.WakeIs(0), out.Failed)
			}
			es, err := l.ScanDue(t.Context(), math.MaxUint64, nil, 10)
			require.NoError(t, err)
			require.Equal(t, []store.DueEntry{{AtMs: 5000, Partition: identity(t, faultP)}}, es)
		})
	}
}

// TestCorruptWakeData: a stored wake time or due entry that does not
// decode is ErrCorrupt, never skipped or taken for none.
func TestCorruptWakeData(t *testing.T) {
	e := NewMemoryEngine()
	l := openLayer(t, e)
	p := testPartition("p")
	sub, err := l.appendSubspace(nil, p)
	require.NoError(t, err)
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	txn.Set(append(sub, partitionEnd), []byte{1, 2, 3})
	txn.Set(append([]byte(DefaultRootPrefix), partitionEnd, dueTag, 0, 0, 0, 0, 0, 0, 1, 0), []byte{}) // a time, no identity
	require.NoError(t, txn.Commit())
	txn.Close()

	_, _, err = l.NextWake(t.Context(), p)
	require.ErrorIs(t, err, store.ErrCorrupt)
	for _, b := range []*store.Batch{
		store.NewBatch().Put(k("t"), v("x")).WakeAt(1000),
		store.NewBatch().Require(store.WakeIs(1000)).Put(k("t"), v("x")),
	} {
		_, err = l.Apply(t.Context(), p, b)
		require.ErrorIs(t, err, store.ErrCorrupt)
		require.NotErrorIs(t, err, store.ErrUnavailable)
		require.Nil(t, mustGet(t, l, p, k("t")))
	}
	_, err = l.ScanDue(t.Context(), math.MaxUint64, nil, 10)
	require.ErrorIs(t, err, store.ErrCorrupt)
}
