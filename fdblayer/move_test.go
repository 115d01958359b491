package fdblayer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/store"
)

// rowsOf reads every row of p.
func rowsOf(t *testing.T, l *Layer, p store.Partition) map[string]string {
	t.Helper()
	got := map[string]string{}
	var after store.Cursor
	for {
		page, err := l.Scan(t.Context(), p, nil, nil, after, 1000)
		require.NoError(t, err)
		for _, r := range page.Entries {
			got[string(r.Key)] = string(r.Value)
		}
		if page.Next == nil {
			return got
		}
		after = page.Next
	}
}

// wakeOf is p's wake time (zero: none).
func wakeOf(t *testing.T, l *Layer, p store.Partition) time.Time {
	t.Helper()
	at, ok, err := l.NextWake(t.Context(), p)
	require.NoError(t, err)
	if !ok {
		return time.Time{}
	}
	return at
}

// MovePartitionPage moves a partition's rows a page at a time, then, on
// the page that finds it empty, its wake time and due index entry (of
// either layout) into the new partition's, the earlier of the two; the
// rows the new partition held stay, and a page run again finds nothing.
func TestMovePartitionPageMovesRowsThenTheWakeTime(t *testing.T) {
	forEachDistributedEngine(t, func(t *testing.T, l *Layer) {
		ctx := t.Context()
		for _, tc := range []struct {
			name              string
			oldWake, newWake  time.Duration // 0: none
			want              time.Duration
			firstLayoutOldDue bool
		}{
			{name: "old earlier", oldWake: 5 * time.Second, newWake: 9 * time.Second, want: 5 * time.Second},
			{name: "new earlier", oldWake: 9 * time.Second, newWake: 5 * time.Second, want: 5 * time.Second},
			{name: "new has none", oldWake: 7 * time.Second, want: 7 * time.Second},
			{name: "old has none", newWake: 3 * time.Second, want: 3 * time.Second},
			{name: "old entry of the first layout", oldWake: 4 * time.Second, newWake: 6 * time.Second, want: 4 * time.Second, firstLayoutOldDue: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				from := testPartition("old " + tc.name)
				to := pairPartition{"ns", tc.name}
				b := store.NewBatch()
				want := map[string]string{}
				for i := range 25 {
					k := fmt.Sprintf("k%02d", i)
					b.Put(store.Key(k), store.Value(fmt.Sprintf("v%d", i)))
					want[k] = fmt.Sprintf("v%d", i)
				}
				if tc.oldWake != 0 && !tc.firstLayoutOldDue {
					b.WakeAt(t0.Add(tc.oldWake))
				}
				mustApply(t, l, from, b)
				if tc.firstLayoutOldDue {
					writeV1Entry(t, l.Engine(), l, from, t0.Add(tc.oldWake))
				}
				nb := store.NewBatch().Put(store.Key("zz"), store.Value("mine"))
				want["zz"] = "mine"
				if tc.newWake != 0 {
					nb.WakeAt(t0.Add(tc.newWake))
				}
				mustApply(t, l, to, nb)

				var pages []int
				for {
					n, more, err := l.MovePartitionPage(ctx, identity(t, from), identity(t, to), 10)
					require.NoError(t, err)
					pages = append(pages, n)
					if !more {
						break
					}
					wantOld := time.Time{}
					if tc.oldWake != 0 {
						wantOld = t0.Add(tc.oldWake)
					}
					require.Equal(t, wantOld, wakeOf(t, l, from), "the wake time moves with the last page only")
				}
				require.Equal(t, []int{10, 10, 5}, pages)
				require.Empty(t, rowsOf(t, l, from))
				require.True(t, wakeOf(t, l, from).IsZero(), "the old partition keeps no wake time")
				require.Equal(t, want, rowsOf(t, l, to))
				require.Equal(t, t0.Add(tc.want), wakeOf(t, l, to))
				var mine []store.DueEntry
				for _, e := range scanAllDue(t, l) {
					require.NotEqual(t, identity(t, from), e.Partition, "no due entry of the old identity is left")
					if string(e.Partition) == string(identity(t, to)) {
						mine = append(mine, e)
					}
				}
				require.Equal(t, []store.DueEntry{dueAt(t, l, to, t0.Add(tc.want))}, mine)

				n, more, err := l.MovePartitionPage(ctx, identity(t, from), identity(t, to), 10)
				require.NoError(t, err)
				require.Zero(t, n)
				require.False(t, more)
				require.Equal(t, want, rowsOf(t, l, to))
				require.Equal(t, t0.Add(tc.want), wakeOf(t, l, to))
			})
		}
	})
}

// A page never overwrites a row of the new partition: it refuses, naming
// the key, and moves nothing.
func TestMovePartitionPageRefusesAnOccupiedKey(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		from, to := testPartition("old"), pairPartition{"ns", "new"}
		mustApply(t, l, from, store.NewBatch().Put(store.Key("a"), store.Value("old a")).Put(store.Key("b"), store.Value("old b")))
		mustApply(t, l, to, store.NewBatch().Put(store.Key("b"), store.Value("new b")))
		n, _, err := l.MovePartitionPage(t.Context(), identity(t, from), identity(t, to), 10)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "holds key 62 already")
		require.Zero(t, n)
		require.Equal(t, map[string]string{"a": "old a", "b": "old b"}, rowsOf(t, l, from))
		require.Equal(t, map[string]string{"b": "new b"}, rowsOf(t, l, to))
	})
}

func TestMovePartitionPageRefusesBadInput(t *testing.T) {
	l := openLayer(t, memengine.New())
	ns := func(s ...string) []byte {
		var b []byte
		for _, x := range s {
			b, _ = pairPartition{x, ""}.AppendTuple(b)
			b = b[:len(b)-2] // drop the empty second string
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		from, to []byte
		limit    int
	}{
		{"limit 0", ns("a"), ns("b"), 0},
		{"from not a tuple", []byte{0x02, 'a'}, ns("b"), 1},
		{"to empty", ns("a"), nil, 1},
		{"to starts with 0xff", ns("a"), []byte{0xFF}, 1},
		{"from a prefix of to", ns("a"), ns("a", "b"), 1},
		{"the same", ns("a"), ns("a"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := l.MovePartitionPage(t.Context(), tc.from, tc.to, tc.limit)
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
}

// A commit whose result is unknown (it landed) is retried, and the retry
// moves what is left: every row arrives once, and none is lost.
func TestMovePartitionPageAfterAnUnknownResult(t *testing.T) {
	var commits atomic.Int32
	e := fdbsim.InjectFaults(memengine.New(), func(context.Context) (fdbsim.Fault, func()) {
		if commits.Add(1)%2 == 0 {
			return fdbsim.CommitThenUnknown, nil
		}
		return fdbsim.CommitNormally, nil
	})
	l := openLayer(t, e)
	from, to := testPartition("old"), pairPartition{"ns", "new"}
	b := store.NewBatch()
	want := map[string]string{}
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		b.Put(store.Key(k), store.Value(k))
		want[k] = k
	}
	mustApply(t, l, from, b.WakeAt(t0.Add(time.Second)))
	for {
		_, more, err := l.MovePartitionPage(t.Context(), identity(t, from), identity(t, to), 7)
		require.NoError(t, err)
		if !more {
			break
		}
	}
	require.Empty(t, rowsOf(t, l, from))
	require.Equal(t, want, rowsOf(t, l, to))
	require.Equal(t, t0.Add(time.Second), wakeOf(t, l, to))
	require.True(t, wakeOf(t, l, from).IsZero())
}

// ListIdentities lists what ListPartitions lists, as bytes.
func TestListIdentities(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		mustApply(t, l, pairPartition{"ns", "a"}, store.NewBatch().Put(store.Key("k"), store.Value("v")))
		mustApply(t, l, pairPartition{"other", "b"}, store.NewBatch().Put(store.Key("k"), store.Value("v")))
		mustApply(t, l, pairPartition{"ns", "c"}, store.NewBatch().WakeAt(t0.Add(time.Second)))
		var got []string
		err := l.ListIdentities(t.Context(), nil, pairSplitter, func(prefix []byte, whole bool) error {
			got = append(got, fmt.Sprintf("%x %v", prefix, whole))
			return nil
		})
		require.NoError(t, err)
		var want []string
		err = l.ListPartitions(t.Context(), nil, pairSplitter, func(p ListedPartition) error {
			want = append(want, fmt.Sprintf("%x %v", p.Prefix, !p.Unsplit))
			return nil
		})
		require.NoError(t, err)
		// The evolution partition (a new store's format rows), which
		// pairSplitter does not split, then the three partitions.
		require.Equal(t, []string{"00 false", "026e7300026100 true", "026e7300026300 true", "026f7468657200 false"}, got)
		require.Equal(t, want, got)
	})
}
