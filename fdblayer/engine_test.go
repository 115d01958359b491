package fdblayer_test

import (
	"context"
	"encoding/binary"
	"errors"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
)

// TestEngineContract checks what the Layer relies on from every engine:
// atomic commits, reads that tell absent from empty, half-open bounded
// range reads, last-write-wins, discarded uncommitted writes, FoundationDB's
// limits, and no transactions after Close.
func TestEngineContract(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.open(t)
			root := []byte(DefaultRootPrefix)
			key := func(s string) []byte { return append(append([]byte{}, root...), s...) }
			ctx := t.Context()
			require.Equal(t, kv.FDBLimits(), e.Limits())

			txn, err := e.Begin(ctx)
			require.NoError(t, err)
			txn.Set(key("a"), []byte("1"))
			txn.Set(key("b"), []byte{})
			txn.Set(key("c"), []byte("3"))
			txn.Set(key("d"), []byte("4"))
			txn.Set(key("x"), []byte("1"))
			txn.Clear(key("x"))
			txn.Set(key("x"), []byte("last"))
			require.NoError(t, txn.Commit())
			txn.Close()

			txn, err = e.Begin(ctx)
			require.NoError(t, err)
			txn.Set(key("a"), []byte("discarded"))
			txn.Clear(key("b"))
			txn.Close()

			rt, err := e.BeginRead(ctx)
			require.NoError(t, err)
			vals, err := rt.GetMany(nil, [][]byte{key("a"), key("b"), key("missing"), key("x"), key("a")})
			require.NoError(t, err)
			require.Equal(t, [][]byte{[]byte("1"), {}, nil, []byte("last"), []byte("1")}, vals)
			require.NotNil(t, vals[1])
			rows, err := rt.GetRange(nil, key("b"), key("d"), 10, 0)
			require.NoError(t, err)
			require.Equal(t, []kv.KeyValue{{Key: key("b"), Value: []byte{}}, {Key: key("c"), Value: []byte("3")}}, rows)
			rows, err = rt.GetRange(rows[:0], key(""), key("z"), 2, 0)
			require.NoError(t, err)
			require.Equal(t, []kv.KeyValue{{Key: key("a"), Value: []byte("1")}, {Key: key("b"), Value: []byte{}}}, rows)
			// A byte budget stops the read at the first row that passes
			// it, that row included: a holds len(root)+2 bytes.
			rowA := len(root) + 2
			for _, tc := range []struct {
				maxBytes, limit int
				want            []string
			}{
				{1, 10, []string{"a"}},
				{rowA, 10, []string{"a", "b"}},
				{rowA + len(root) + 1, 10, []string{"a", "b", "c"}},
				{rowA + len(root) + 1, 2, []string{"a", "b"}},
				{1 << 20, 10, []string{"a", "b", "c", "d", "x"}},
			} {
				rows, err = rt.GetRange(rows[:0], key(""), key("z"), tc.limit, tc.maxBytes)
				require.NoError(t, err)
				var got []string
				for _, r := range rows {
					got = append(got, string(r.Key[len(root):]))
				}
				require.Equal(t, tc.want, got, "limit %d, %d bytes", tc.limit, tc.maxBytes)
			}
			rt.Close()

			n, err := e.EstimateRangeSize(ctx, key(""), key("z"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, n, int64(0))
			switch e.(type) {
			case *memengine.Engine, *boltengine.Engine, *fdbsim.MVCCEngine:
				require.Equal(t, int64(5*(len(root)+1)+1+0+1+1+4), n, "exact on this engine")
			}
			require.NoError(t, e.Probe(ctx))

			require.NoError(t, e.Close())
			_, err = e.Begin(ctx)
			require.ErrorIs(t, err, kv.ErrClosed)
			_, err = e.BeginRead(ctx)
			require.ErrorIs(t, err, kv.ErrClosed)
		})
	}
}

// TestGuardedIncrementsUnderFaults: workers increment one counter with
// guarded read-modify-write batches while the engine injects conflicts
// and unknown results at random (fixed seed). Every batch that landed
// incremented the counter exactly once: a retry after an unknown result
// never applies a batch twice.
func TestGuardedIncrementsUnderFaults(t *testing.T) {
	var (
		mu     sync.Mutex
		rng    = rand.New(rand.NewPCG(7, 11))
		landed int
		armed  bool // after Open: its gate's commit is not the counter's
	)
	fault := func(context.Context) (fdbsim.Fault, func()) {
		mu.Lock()
		defer mu.Unlock()
		if !armed {
			return fdbsim.CommitNormally, nil
		}
		f := []fdbsim.Fault{fdbsim.CommitNormally, fdbsim.CommitNormally, fdbsim.CommitConflict, fdbsim.CommitThenUnknown, fdbsim.UnknownWithoutCommit}[rng.IntN(5)]
		if f == fdbsim.CommitNormally || f == fdbsim.CommitThenUnknown {
			landed++
		}
		return f, nil
	}
	l := openLayer(t, fdbsim.InjectFaults(memengine.New(), fault), Config{RetryLimit: 50})
	mu.Lock()
	armed = true
	mu.Unlock()
	p, counter := testPartition("p"), k("counter")
	enc := func(n uint64) store.Value { return binary.BigEndian.AppendUint64(nil, n) }

	const workers, each = 4, 50
	var wg sync.WaitGroup
	var reported [workers]int
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for reported[w] < each {
				cur, _, err := l.Get(t.Context(), p, counter)
				if err != nil {
					t.Error(err)
					return
				}
				var n uint64
				if cur != nil {
					n = binary.BigEndian.Uint64(cur)
				}
				out, err := l.Apply(t.Context(), p, store.NewBatch().Require(store.Guard(counter, cur)).Put(counter, enc(n+1)))
				if err != nil && !errors.Is(err, store.ErrUnknownResult) {
					t.Error(err)
					return
				}
				if err == nil && out.Committed() {
					reported[w]++
				}
			}
		}()
	}
	wg.Wait()
	final := binary.BigEndian.Uint64(mustGet(t, l, p, counter))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, uint64(landed), final, "every landed batch increments exactly once")
	require.GreaterOrEqual(t, final, uint64(workers*each), "every reported commit landed")
}
