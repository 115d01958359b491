package fdbsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// openLayer opens a Layer over e, logging nowhere, closed when t ends.
func openLayer(t testing.TB, e kv.Engine, cfg fdblayer.Config) *fdblayer.Layer {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	l, err := fdblayer.Open(e, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// mvccKey is a raw engine key for the engine-level tests.
func mvccKey(s string) []byte { return []byte("\x02t\x00" + s) }

// requireCode fails unless err carries FoundationDB error code.
func requireCode(t *testing.T, err error, code int) {
	t.Helper()
	var fe FDBError
	require.Truef(t, errors.As(err, &fe), "want FoundationDB error %d, got %v", code, err)
	require.Equal(t, code, fe.Code, "error %v", err)
}

// mvccSeed writes rows in one commit.
func mvccSeed(t *testing.T, e *MVCCEngine, kv ...string) {
	t.Helper()
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer txn.Close()
	for i := 0; i < len(kv); i += 2 {
		txn.Set(mvccKey(kv[i]), []byte(kv[i+1]))
	}
	require.NoError(t, txn.Commit())
}

func mvccGet(t *testing.T, txn kv.ReadTxn, key string) []byte {
	t.Helper()
	vals, err := txn.GetMany(nil, [][]byte{mvccKey(key)})
	require.NoError(t, err)
	return vals[0]
}

// TestMVCCSnapshots: a transaction reads the version it began on while
// others commit beside it, without waiting for them.
func TestMVCCSnapshots(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{})
	mvccSeed(t, e, "k", "v1")
	old, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer old.Close()
	reader, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	defer reader.Close()

	mvccSeed(t, e, "k", "v2", "new", "x") // commits while both are open
	require.Equal(t, []byte("v1"), mvccGet(t, old, "k"))
	require.Nil(t, mvccGet(t, old, "new"), "a later commit's insert is invisible")
	require.Equal(t, []byte("v1"), mvccGet(t, reader, "k"))
	rows, err := reader.GetRange(nil, mvccKey(""), mvccKey("\xff"), 10, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)

	fresh, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	defer fresh.Close()
	require.Equal(t, []byte("v2"), mvccGet(t, fresh, "k"))
}

// TestMVCCWriteSkewRefused: two transactions each read x and y and write
// the other one; serializable isolation admits only one of them.
func TestMVCCWriteSkewRefused(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{})
	mvccSeed(t, e, "x", "1", "y", "1")
	t1, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer t1.Close()
	t2, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer t2.Close()
	for _, txn := range []kv.Txn{t1, t2} {
		vals, err := txn.GetMany(nil, [][]byte{mvccKey("x"), mvccKey("y")})
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("1"), []byte("1")}, vals, "both see x+y = 2, so each may take one away")
	}
	t1.Set(mvccKey("x"), []byte("0"))
	t2.Set(mvccKey("y"), []byte("0"))
	require.NoError(t, t1.Commit())
	err = t2.Commit()
	requireCode(t, err, fdbcode.NotCommitted)
	require.NotErrorIs(t, err, store.ErrUnknownResult, "a conflict wrote nothing")

	require.NoError(t, t2.OnError(err), "OnError retries a conflict")
	require.Equal(t, []byte("0"), mvccGet(t, t2, "x"), "the retry reads the later version")
	require.Equal(t, []byte("1"), mvccGet(t, t2, "y"), "the refused write did not land")
	// The seed and the two transactions took read versions, and so did the
	// retry; x and y were read by each, then each once more.
	require.Equal(t, MVCCStats{Begun: 3, Reads: 4, KeysRead: 6, Commits: 2, Conflicts: 1, Retries: 1}, e.Stats())
}

// TestMVCCPhantom: an insert into a range another transaction read fails
// that transaction's commit; the conflict range of a read that stopped at
// its limit or its byte budget ends just after its last row.
func TestMVCCPhantom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int
		maxBytes int
		insert   string
		conflict bool
	}{
		{"whole range read, insert inside", 10, 0, "m", true},
		{"whole range read, insert at its begin", 10, 0, "a", true},
		{"whole range read, insert before", 10, 0, "0", false},
		{"whole range read, insert at its end", 10, 0, "q", false},
		{"limit hit, insert before the last row", 2, 0, "b0", true},
		{"limit hit, insert replaces the last row", 2, 0, "c", true},
		{"limit hit, insert just past the last row", 2, 0, "c\x00", false},
		{"limit hit, insert past the last row", 2, 0, "m", false},
		{"limit hit by the last row", 3, 0, "p", false},
		{"limit not hit", 4, 0, "p", true},
		// Each row holds 5 bytes: the budget of 6 stops the read at c.
		{"budget hit, insert before the last row", 10, 6, "b0", true},
		{"budget hit, insert past the last row", 10, 6, "c\x00", false},
		{"budget not hit", 10, 15, "p", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewMVCCEngine(MVCCConfig{})
			mvccSeed(t, e, "b", "1", "c", "2", "d", "3")
			reader, err := e.Begin(t.Context())
			require.NoError(t, err)
			defer reader.Close()
			rows, err := reader.GetRange(nil, mvccKey("a"), mvccKey("q"), tc.limit, tc.maxBytes)
			require.NoError(t, err)
			if tc.maxBytes == 0 {
				require.Len(t, rows, min(tc.limit, 3))
			}

			mvccSeed(t, e, tc.insert, "phantom")
			reader.Set(mvccKey("count"), []byte{byte(len(rows))})
			err = reader.Commit()
			if tc.conflict {
				requireCode(t, err, fdbcode.NotCommitted)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

// TestMVCCReadOnlyNeverConflicts: transactions that write nothing commit
// whatever was written after their reads; blind writes never conflict.
func TestMVCCReadOnlyNeverConflicts(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{})
	mvccSeed(t, e, "k", "1")
	rw, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer rw.Close()
	ro, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	defer ro.Close()
	blind, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer blind.Close()
	mvccGet(t, rw, "k")
	_, err = rw.GetRange(nil, mvccKey(""), mvccKey("\xff"), 10, 0)
	require.NoError(t, err)
	mvccGet(t, ro, "k")

	mvccSeed(t, e, "k", "2", "other", "x")
	require.NoError(t, rw.Commit(), "a transaction that read and wrote nothing commits")
	require.Equal(t, []byte("1"), mvccGet(t, ro, "k"), "the read-only snapshot still reads its version")
	blind.Set(mvccKey("k"), []byte("3"))
	require.NoError(t, blind.Commit(), "a write read nothing, so conflicts with nothing")
	require.Equal(t, uint64(0), e.Stats().Conflicts)
}

// TestMVCCTransactionTooOld: reads and commits more than the lifetime
// after the read version fail with 1007, which OnError retries on a fresh
// version.
func TestMVCCTransactionTooOld(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000))
	e := NewMVCCEngine(MVCCConfig{Clock: clk, Backoff: time.Microsecond})
	mvccSeed(t, e, "k", "1")

	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer txn.Close()
	clk.Advance(MVCCLifetime)
	require.Equal(t, []byte("1"), mvccGet(t, txn, "k"), "exactly the lifetime is still young enough")
	txn.Set(mvccKey("k"), []byte("2"))
	clk.Advance(time.Millisecond)
	_, err = txn.GetMany(nil, [][]byte{mvccKey("k")})
	requireCode(t, err, fdbcode.TransactionTooOld)
	err = txn.Commit()
	requireCode(t, err, fdbcode.TransactionTooOld)
	require.NotErrorIs(t, err, store.ErrUnknownResult)

	require.NoError(t, txn.OnError(err))
	txn.Set(mvccKey("k"), []byte("3"))
	require.NoError(t, txn.Commit(), "the retry starts a new lifetime")
	ro, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	defer ro.Close()
	require.Equal(t, []byte("3"), mvccGet(t, ro, "k"), "the too-old write never landed")
	clk.Advance(MVCCLifetime + time.Millisecond)
	_, err = ro.GetRange(nil, mvccKey(""), mvccKey("\xff"), 1, 0)
	requireCode(t, err, fdbcode.TransactionTooOld)
}

// TestMVCCLimits: every FoundationDB limit is refused with its code at
// commit, nothing written; the bound itself is accepted. A transaction's
// size counts its mutations and its read and write conflict ranges.
func TestMVCCLimits(t *testing.T) {
	big := func(n int) []byte { return bytes.Repeat([]byte{'v'}, n) }
	// A set of a 10-byte key costs 3*10+1 bytes plus its value; fill's
	// 100 sets and the marker every case writes (3*6+1 bytes) come to
	// exactly FDBMaxTxnBytes.
	const marker = 3*len("marker") + 1
	fill := func(txn kv.Txn) {
		for i := range 100 {
			n := kv.FDBMaxTxnBytes/100 - 31
			if i == 0 {
				n -= marker
			}
			txn.Set([]byte{'k', byte(i), 2, 3, 4, 5, 6, 7, 8, 9}, big(n))
		}
	}
	for _, tc := range []struct {
		name string
		txn  func(t *testing.T, txn kv.Txn)
		code int // 0: commits
	}{
		{"key at the limit", func(_ *testing.T, txn kv.Txn) { txn.Set(big(kv.FDBMaxKeyBytes), nil) }, 0},
		{"key over the limit", func(_ *testing.T, txn kv.Txn) { txn.Set(big(kv.FDBMaxKeyBytes+1), nil) }, fdbcode.KeyTooLarge},
		{"cleared key over the limit", func(_ *testing.T, txn kv.Txn) { txn.Clear(big(kv.FDBMaxKeyBytes + 1)) }, fdbcode.KeyTooLarge},
		{"value at the limit", func(_ *testing.T, txn kv.Txn) { txn.Set([]byte("k"), big(kv.FDBMaxValueBytes)) }, 0},
		{"value over the limit", func(_ *testing.T, txn kv.Txn) { txn.Set([]byte("k"), big(kv.FDBMaxValueBytes+1)) }, fdbcode.ValueTooLarge},
		{"transaction at the limit", func(_ *testing.T, txn kv.Txn) { fill(txn) }, 0},
		{"transaction over the limit by a point read's conflict range", func(t *testing.T, txn kv.Txn) {
			fill(txn)
			_, err := txn.GetMany(nil, [][]byte{{}})
			require.NoError(t, err)
		}, fdbcode.TransactionTooLarge},
		{"transaction over the limit by a range read's conflict range", func(t *testing.T, txn kv.Txn) {
			fill(txn)
			_, err := txn.GetRange(nil, []byte{}, []byte{0}, 1, 0)
			require.NoError(t, err)
		}, fdbcode.TransactionTooLarge},
		{"transaction over the limit by a clear", func(_ *testing.T, txn kv.Txn) {
			fill(txn)
			txn.Clear(nil)
		}, fdbcode.TransactionTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewMVCCEngine(MVCCConfig{})
			txn, err := e.Begin(t.Context())
			require.NoError(t, err)
			defer txn.Close()
			tc.txn(t, txn)
			txn.Set([]byte("marker"), nil)
			err = txn.Commit()
			if tc.code == 0 {
				require.NoError(t, err)
				return
			}
			requireCode(t, err, tc.code)
			require.Equal(t, err, txn.OnError(err), "OnError does not retry a limit")
			n, err := e.EstimateRangeSize(t.Context(), nil, []byte{0xff})
			require.NoError(t, err)
			require.Zero(t, n, "nothing written")
		})
	}
}

// TestMVCCUnknownResultThroughLayer: a commit_unknown_result that landed
// and one that did not both reach the Layer's caller as
// store.ErrUnknownResult when no retry may decide; with retries, the
// retry's guard decides, as Apply documents.
func TestMVCCUnknownResultThroughLayer(t *testing.T) {
	p, key := storetest.Partition{Name: "p"}, store.Key("row")
	for _, tc := range []struct {
		name    string
		fault   Fault
		retries int
		landed  bool
		outcome store.Outcome // with retries
	}{
		{"landed, no retry", CommitThenUnknown, fdblayer.NoRetries, true, 0},
		{"not landed, no retry", UnknownWithoutCommit, fdblayer.NoRetries, false, 0},
		{"landed, the retry's guard fails", CommitThenUnknown, 3, true, store.PreconditionFailed},
		{"not landed, the retry commits", UnknownWithoutCommit, 3, true, store.Committed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, armed := true, false // armed once open: Open's commit (its gate's) is not the one faulted
			e := NewMVCCEngine(MVCCConfig{Backoff: time.Microsecond, Fault: func(context.Context) (Fault, func()) {
				if first && armed {
					first = false
					return tc.fault, nil
				}
				return CommitNormally, nil
			}})
			l := openLayer(t, e, fdblayer.Config{RetryLimit: tc.retries})
			armed = true
			out, err := l.Apply(t.Context(), p, store.NewBatch().Require(store.Absent(key)).Put(key, store.Value("v")))
			if tc.retries == fdblayer.NoRetries {
				require.ErrorIs(t, err, store.ErrUnknownResult)
				requireCode(t, err, fdbcode.CommitUnknownResult)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.outcome, out.Outcome)
			}
			_, ok, err := l.Get(t.Context(), p, key)
			require.NoError(t, err)
			require.Equal(t, tc.landed, ok, "landed")
			require.Equal(t, uint64(1), e.Stats().Unknown)
		})
	}
}

// TestMVCCRandomFaultsAreSeeded: the random unknown results follow the
// seed: one seed replays the same outcomes, another draws others.
func TestMVCCRandomFaultsAreSeeded(t *testing.T) {
	run := func(seed uint64) (outcomes []int) {
		e := NewMVCCEngine(MVCCConfig{Seed: seed, UnknownLanded: 0.3, UnknownNotLanded: 0.3})
		for i := range 64 {
			txn, err := e.Begin(t.Context())
			require.NoError(t, err)
			txn.Set([]byte{byte(i)}, nil)
			err = txn.Commit()
			txn.Close()
			code := 0
			if err != nil {
				require.ErrorIs(t, err, store.ErrUnknownResult)
				requireCode(t, err, fdbcode.CommitUnknownResult)
				code = 1
			}
			ro, err := e.BeginRead(t.Context())
			require.NoError(t, err)
			vals, err := ro.GetMany(nil, [][]byte{{byte(i)}})
			require.NoError(t, err)
			ro.Close()
			if vals[0] != nil {
				code += 2
			}
			outcomes = append(outcomes, code) // 2 landed, 3 unknown landed, 1 unknown not landed
		}
		return outcomes
	}
	a := run(1)
	require.Equal(t, a, run(1))
	require.NotEqual(t, a, run(2))
	require.Contains(t, a, 1)
	require.Contains(t, a, 2)
	require.Contains(t, a, 3)
	require.NotContains(t, a, 0, "a commit reported landed always landed")
}

// TestMVCCLatencyIsInjected: Begin, every read and Commit wait the
// injected latency; a context ending during the wait ends the operation.
func TestMVCCLatencyIsInjected(t *testing.T) {
	for _, op := range []string{"begin", "get", "range", "commit"} {
		t.Run(op, func(t *testing.T) {
			e := NewMVCCEngine(MVCCConfig{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			txn, err := e.Begin(ctx)
			require.NoError(t, err)
			defer txn.Close()
			txn.Set(mvccKey("k"), nil)
			e.opts.Latency = time.Hour // from here on
			time.AfterFunc(10*time.Millisecond, cancel)
			switch op {
			case "begin":
				_, err = e.Begin(ctx)
			case "get":
				_, err = txn.GetMany(nil, [][]byte{mvccKey("k")})
			case "range":
				_, err = txn.GetRange(nil, mvccKey(""), mvccKey("\xff"), 1, 0)
			case "commit":
				err = txn.Commit()
			}
			require.ErrorIs(t, err, context.Canceled)
		})
	}
}

// TestMVCCBackoff: OnError's delay is a random fraction of a bound that
// doubles from Backoff up to MaxBackoff, FoundationDB's shape.
func TestMVCCBackoff(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{Backoff: time.Microsecond, MaxBackoff: 20 * time.Microsecond})
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer txn.Close()
	mt := txn.(*mvccTxn)
	var bounds []time.Duration
	for range 7 {
		bounds = append(bounds, mt.backoff)
		require.NoError(t, txn.OnError(FDBError{Code: fdbcode.NotCommitted}))
	}
	us := time.Microsecond
	require.Equal(t, []time.Duration{us, 2 * us, 4 * us, 8 * us, 16 * us, 20 * us, 20 * us}, bounds)
	require.Equal(t, uint64(7), e.Stats().Retries)
	require.NoError(t, txn.OnError(FDBError{Code: fdbcode.TransactionTooOld}))
	require.NoError(t, txn.OnError(FDBError{Code: fdbcode.CommitUnknownResult}))
	for _, err := range []error{FDBError{Code: fdbcode.TransactionTooLarge}, ErrInjectedFatal, context.Canceled} {
		require.Equal(t, err, txn.OnError(err), "not retried")
	}
}

// TestMVCCHistoryIsPruned: the resolver forgets writes no open transaction
// can conflict with, and keeps those an open one can.
func TestMVCCHistoryIsPruned(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{})
	for i := range 100 {
		mvccSeed(t, e, string(rune('a'+i%26)), "v")
	}
	require.Zero(t, e.store.hist.last.Len(), "no transaction open: nothing to remember")
	old, err := e.Begin(t.Context())
	require.NoError(t, err)
	mvccGet(t, old, "a")
	for range 10 {
		mvccSeed(t, e, "a", "w", "b", "w")
	}
	require.Equal(t, 2, e.store.hist.last.Len())
	require.Len(t, e.store.hist.commits, 10)
	old.Set(mvccKey("z"), nil)
	requireCode(t, old.Commit(), fdbcode.NotCommitted)
	old.Close()
	mvccSeed(t, e, "c", "v")
	require.Zero(t, e.store.hist.last.Len())
	require.Empty(t, e.store.hist.commits)
}

// TestMVCCClosed: nothing begins or commits on a closed engine.
func TestMVCCClosed(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{})
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	defer txn.Close()
	require.NoError(t, e.Close())
	txn.Set(mvccKey("k"), nil)
	require.ErrorIs(t, txn.Commit(), kv.ErrClosed)
	_, err = e.BeginRead(t.Context())
	require.ErrorIs(t, err, kv.ErrClosed)
	require.ErrorIs(t, e.Probe(t.Context()), kv.ErrClosed)
	require.ErrorIs(t, e.Close(), kv.ErrClosed)
}

// TestMVCCOldVersionsAreCollected: the store keeps the versions an open
// transaction reads, and once it ends keeps one per live key, no
// tombstones.
func TestMVCCOldVersionsAreCollected(t *testing.T) {
	e := NewMVCCEngine(MVCCConfig{})
	mvccSeed(t, e, "k", "v1", "d", "x")
	require.Equal(t, 2, e.store.rows.tree.Len())
	reader, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	mvccSeed(t, e, "k", "v2")
	mvccSeed(t, e, "k", "v3")
	txn, err := e.Begin(t.Context())
	require.NoError(t, err)
	txn.Clear(mvccKey("d"))
	require.NoError(t, txn.Commit())
	txn.Close()
	require.Equal(t, []byte("v1"), mvccGet(t, reader, "k"))
	require.Equal(t, []byte("x"), mvccGet(t, reader, "d"), "the reader still sees the cleared key")
	require.Greater(t, e.store.rows.tree.Len(), 2, "the reader's versions are kept")

	reader.Close()
	require.Equal(t, 1, e.store.rows.tree.Len(), "one version of k; d's tombstone gone")
	ro, err := e.BeginRead(t.Context())
	require.NoError(t, err)
	defer ro.Close()
	require.Equal(t, []byte("v3"), mvccGet(t, ro, "k"))
	require.Nil(t, mvccGet(t, ro, "d"))
}

// TestMVCCSnapshotsMatchModel: random commits of puts and clears over a
// few keys, with snapshots opened and closed among them; every read of
// every open snapshot equals the state its version committed, and once
// all are closed the store holds exactly the live keys.
func TestMVCCSnapshotsMatchModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		e := NewMVCCEngine(MVCCConfig{})
		keys := make([][]byte, 6)
		for i := range keys {
			keys[i] = mvccKey(string(rune('a' + i)))
		}
		states := []map[string]string{{}} // committed state per version, from 0
		type open struct {
			txn     kv.ReadTxn
			version int
		}
		var snaps []open
		check := func(o open) {
			want := states[o.version]
			vals, err := o.txn.GetMany(nil, keys)
			require.NoError(t, err)
			for i, k := range keys {
				v, ok := want[string(k)]
				if !ok {
					require.Nil(t, vals[i], "seed %d key %s at version %d", seed, k, o.version)
					continue
				}
				require.Equal(t, v, string(vals[i]), "seed %d key %s at version %d", seed, k, o.version)
			}
			rows, err := o.txn.GetRange(nil, mvccKey(""), mvccKey("\xff"), 100, 0)
			require.NoError(t, err)
			require.Len(t, rows, len(want), "seed %d range at version %d", seed, o.version)
			for _, r := range rows {
				require.Equal(t, want[string(r.Key)], string(r.Value))
			}
		}
		for step := range 300 {
			switch op := rng.IntN(10); {
			case op < 3:
				txn, err := e.BeginRead(t.Context())
				require.NoError(t, err)
				snaps = append(snaps, open{txn, len(states) - 1})
			case op < 4 && len(snaps) > 0:
				i := rng.IntN(len(snaps))
				snaps[i].txn.Close()
				snaps = append(snaps[:i], snaps[i+1:]...)
			case op < 7:
				txn, err := e.Begin(t.Context())
				require.NoError(t, err)
				next := maps.Clone(states[len(states)-1])
				for range 1 + rng.IntN(3) {
					k := keys[rng.IntN(len(keys))]
					if rng.IntN(3) == 0 {
						txn.Clear(k)
						delete(next, string(k))
					} else {
						v := fmt.Sprintf("v%d", step)
						txn.Set(k, []byte(v))
						next[string(k)] = v
					}
				}
				require.NoError(t, txn.Commit())
				txn.Close()
				states = append(states, next)
			default:
				if len(snaps) > 0 {
					check(snaps[rng.IntN(len(snaps))])
				}
			}
		}
		for _, o := range snaps {
			check(o)
			o.txn.Close()
		}
		require.Equal(t, len(states[len(states)-1]), e.store.rows.tree.Len(), "seed %d: versions left behind", seed)
	}
}
