package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

var (
	txnP    = storetest.Partition{Name: "txn"}
	txnKey  = store.Key("slot")
	txnMine = store.Value("mine")
	errFn   = errors.New("fn says no")
)

// txnFixture is a memory store behind a Faults, with a manual clock, and a
// count of how often the function under test ran. Its store is a
// store.Transactor (the Layer) or, for the fallback path, only a
// store.Store over the same Layer.
type txnFixture struct {
	clk    *clock.Manual
	faults *storetest.Faults
	runs   int
}

// storeOnly hides every extension of the store it holds but the due
// index: Transact falls back on reads and Apply over it.
type storeOnly struct {
	store.Store
	store.DueIndex
}

func newTxnFixture(t *testing.T) *txnFixture { return newTxnFixtureOf(t, false) }

func newTxnFixtureOf(t *testing.T, transactor bool) *txnFixture {
	t.Helper()
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	var s store.Store = storeOnly{l, l}
	if transactor {
		s = l
	}
	return &txnFixture{clk: clk, faults: storetest.NewFaults(s)}
}

// claim is the function most cases run: it puts txnMine at txnKey,
// guarded by what it read there, and has nothing to do once the slot is
// already its own.
func (f *txnFixture) claim(ctx context.Context, r store.Reader) (*store.Batch, error) {
	f.runs++
	v, _, err := r.Get(ctx, txnKey)
	if err != nil {
		return nil, err
	}
	if string(v) == string(txnMine) {
		return nil, nil
	}
	return store.NewBatch().Require(store.Guard(txnKey, v)).Put(txnKey, txnMine), nil
}

// interfere makes the first n Applies (every Apply when n < 0) find txnKey
// changed since the function read it, by another writer's put just
// before each.
func (f *txnFixture) interfere(n int) {
	seen := 0
	f.faults.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
		seen++
		if n >= 0 && seen > n {
			return nil
		}
		_, err := f.faults.Inner().Apply(ctx, p, store.NewBatch().Put(txnKey, store.Value("theirs-"+strconv.Itoa(seen))))
		return err
	})
}

func (f *txnFixture) stored(t *testing.T, key store.Key) string {
	t.Helper()
	v, _, err := f.faults.Inner().Get(t.Context(), txnP, key)
	require.NoError(t, err)
	return string(v)
}

// fast keeps the tests' backoff short; the backoff's bounds are tested on
// jitter itself.
var fast = store.TransactConfig{MinBackoff: time.Microsecond, MaxBackoff: 50 * time.Microsecond}

// withFast is c with fast's backoff when c sets none.
func withFast(c store.TransactConfig) store.TransactConfig {
	if c.MinBackoff == 0 && c.MaxBackoff == 0 {
		c.MinBackoff, c.MaxBackoff = fast.MinBackoff, fast.MaxBackoff
	}
	return c
}

func TestTransact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *txnFixture)
		fn    func(f *txnFixture) store.TransactFunc // nil: f.claim
		cfg   store.TransactConfig                   // its backoff: fast's
		// want
		err     []error // nil: success
		outcome store.Outcome
		runs    int
		applies int
		stored  string
	}{
		{
			name:    "commits at once",
			outcome: store.Committed, runs: 1, applies: 1, stored: "mine",
		},
		{
			name:    "precondition fails twice, third run commits",
			setup:   func(f *txnFixture) { f.interfere(2) },
			cfg:     store.TransactConfig{Retries: 2},
			outcome: store.Committed, runs: 3, applies: 3, stored: "mine",
		},
		{
			name:    "retries exhausted",
			setup:   func(f *txnFixture) { f.interfere(-1) },
			cfg:     store.TransactConfig{Retries: 3},
			err:     []error{store.ErrPreconditionFailed},
			outcome: store.PreconditionFailed, runs: 4, applies: 4, stored: "theirs-4",
		},
		{
			name:    "no retries",
			setup:   func(f *txnFixture) { f.interfere(1) },
			cfg:     store.TransactConfig{Retries: -1},
			err:     []error{store.ErrPreconditionFailed},
			outcome: store.PreconditionFailed, runs: 1, applies: 1, stored: "theirs-1",
		},
		{
			name: "nothing to write",
			setup: func(f *txnFixture) {
				_, err := f.faults.Inner().Apply(context.Background(), txnP, store.NewBatch().Put(txnKey, txnMine))
				if err != nil {
					panic(err)
				}
			},
			runs: 1, applies: 0, stored: "mine",
		},
		{
			name: "empty batch is nothing to write",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) { f.runs++; return store.NewBatch(), nil }
			},
			runs: 1, applies: 0, stored: "",
		},
		{
			name: "fn error is returned, not retried",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) { f.runs++; return nil, errFn }
			},
			err:  []error{errFn},
			runs: 1, applies: 0, stored: "",
		},
		{
			name:  "fn error on a re-run",
			setup: func(f *txnFixture) { f.interfere(1) },
			fn: func(f *txnFixture) store.TransactFunc {
				return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
					if f.runs == 1 {
						f.runs++
						return nil, errFn
					}
					return f.claim(ctx, r)
				}
			},
			err:     []error{errFn},
			outcome: store.PreconditionFailed, runs: 2, applies: 1, stored: "theirs-1",
		},
		{
			name: "deadline passed is not retried",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
					b, err := f.claim(ctx, r)
					return b.WithDeadline(f.clk.Now().Add(-time.Millisecond)), err
				}
			},
			err:     []error{store.ErrDeadlinePassed},
			outcome: store.DeadlinePassed, runs: 1, applies: 1, stored: "",
		},
		{
			name:    "store failure is returned, not retried",
			setup:   func(f *txnFixture) { f.faults.FailNext(storetest.MethodApply, nil) },
			err:     []error{store.ErrUnavailable, storetest.ErrInjected},
			outcome: 0, runs: 1, applies: 1, stored: "",
		},
		{
			name: "invalid batch is returned, not retried",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) {
					f.runs++
					return store.NewBatch().Put(store.Key{0xFF}, nil), nil
				}
			},
			err:     []error{store.ErrInvalid},
			outcome: 0, runs: 1, applies: 1, stored: "",
		},
		{
			// The batch landed; the re-run reads it and has nothing to do.
			name:    "unknown result, re-run finds its work done",
			setup:   func(f *txnFixture) { f.faults.CommitThenFailNth(1) },
			outcome: 0, runs: 2, applies: 1, stored: "mine",
		},
		{
			name: "unknown result without landing, re-run commits",
			setup: func(f *txnFixture) {
				f.faults.FailNth(storetest.MethodApply, 1, fmt.Errorf("lost in flight: %w", store.ErrUnknownResult))
			},
			outcome: store.Committed, runs: 2, applies: 2, stored: "mine",
		},
		{
			// What Transact's doc warns of: a batch that guards nothing is
			// built again by the re-run and overwrites the value another
			// writer put after the first landing.
			name: "unknown result, unguarded put overwrites a later write",
			setup: func(f *txnFixture) {
				f.faults.CommitThenFailNth(1)
				f.faults.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
					if f.faults.Calls(storetest.MethodApply) != 2 {
						return nil
					}
					_, err := f.faults.Inner().Apply(ctx, p, store.NewBatch().Put(txnKey, store.Value("theirs")))
					return err
				})
			},
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) {
					f.runs++
					return store.NewBatch().Put(txnKey, txnMine), nil
				}
			},
			outcome: store.Committed, runs: 2, applies: 2, stored: "mine",
		},
		{
			name: "unknown result, then retries exhausted: both reported",
			setup: func(f *txnFixture) {
				f.faults.FailNth(storetest.MethodApply, 1, fmt.Errorf("lost in flight: %w", store.ErrUnknownResult))
				f.interfere(-1)
			},
			cfg:     store.TransactConfig{Retries: 2},
			err:     []error{store.ErrPreconditionFailed, store.ErrUnknownResult},
			outcome: store.PreconditionFailed, runs: 3, applies: 3, stored: "theirs-2", // Apply 1 failed before the hook ran
		},
		{
			name: "unknown result on the last attempt",
			setup: func(f *txnFixture) {
				f.faults.FailNth(storetest.MethodApply, 2, store.ErrUnknownResult)
				f.interfere(1)
			},
			cfg:     store.TransactConfig{Retries: 1},
			err:     []error{store.ErrUnknownResult},
			outcome: 0, runs: 2, applies: 2, stored: "theirs-1",
		},
		{
			name:    "negative max backoff",
			cfg:     store.TransactConfig{MaxBackoff: -time.Millisecond},
			err:     []error{store.ErrInvalid},
			outcome: 0, runs: 0, applies: 0, stored: "",
		},
		{
			name:    "backoff min over max",
			cfg:     store.TransactConfig{MinBackoff: time.Second, MaxBackoff: time.Millisecond},
			err:     []error{store.ErrInvalid},
			outcome: 0, runs: 0, applies: 0, stored: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTxnFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			fn := store.TransactFunc(f.claim)
			if tc.fn != nil {
				fn = tc.fn(f)
			}
			out, err := store.Transact(t.Context(), f.faults, txnP, fn, withFast(tc.cfg))
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				for _, want := range tc.err {
					require.ErrorIs(t, err, want)
				}
			}
			require.Equal(t, tc.outcome, out.Outcome, "outcome")
			require.Equal(t, tc.runs, f.runs, "function runs")
			require.Equal(t, tc.applies, f.faults.Calls(storetest.MethodApply), "Applies")
			require.Equal(t, tc.stored, f.stored(t, txnKey), "stored value")
		})
	}
}

// gate is the key the gated function guards without reading it: on a
// store.Transactor only such a guard can fail, since a row the function
// read and another writer changed makes the store run it again.
var gate = store.Key("gate")

// gated puts txnMine at txnKey, guarded by what it read there and by the
// gate being open, which it does not read.
func (f *txnFixture) gated(ctx context.Context, r store.Reader) (*store.Batch, error) {
	b, err := f.claim(ctx, r)
	if b != nil {
		b.Require(store.Equals(gate, store.Value("open")))
	}
	return b, err
}

// openGate opens the gate.
func (f *txnFixture) openGate() {
	if _, err := f.faults.Inner().Apply(context.Background(), txnP, store.NewBatch().Put(gate, store.Value("open"))); err != nil {
		panic(err)
	}
}

// openGateAfter opens the gate once n TransactOnce calls have been made.
func (f *txnFixture) openGateAfter(n int) {
	f.faults.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
		if f.faults.Calls(storetest.MethodTransact) != n+1 {
			return nil
		}
		_, err := f.faults.Inner().Apply(ctx, p, store.NewBatch().Put(gate, store.Value("open")))
		return err
	})
}

// TestTransactOnATransactor: over a store.Transactor each attempt is one
// TransactOnce, and the retry contract is the same: a failed guard backs
// off and runs the function again, an unknown result runs it again, a
// deadline or the function's error ends it. A writer that changes a row
// the function read does not fail a guard there: the store runs the
// function again within the attempt.
func TestTransactOnATransactor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *txnFixture)
		fn    func(f *txnFixture) store.TransactFunc // nil: f.gated
		cfg   store.TransactConfig                   // its backoff: fast's
		// want
		err       []error // nil: success
		outcome   store.Outcome
		runs      int
		transacts int
		stored    string
	}{
		{
			name:    "commits at once",
			setup:   func(f *txnFixture) { f.openGate() },
			outcome: store.Committed, runs: 1, transacts: 1, stored: "mine",
		},
		{
			name:    "a row the function read changes twice: run again within the attempt",
			setup:   func(f *txnFixture) { f.openGate(); f.interfere(2) },
			outcome: store.Committed, runs: 3, transacts: 1, stored: "mine",
		},
		{
			name:    "guard fails twice, third attempt commits",
			setup:   func(f *txnFixture) { f.openGateAfter(2) },
			cfg:     store.TransactConfig{Retries: 2},
			outcome: store.Committed, runs: 3, transacts: 3, stored: "mine",
		},
		{
			name:    "retries exhausted",
			cfg:     store.TransactConfig{Retries: 3},
			err:     []error{store.ErrPreconditionFailed},
			outcome: store.PreconditionFailed, runs: 4, transacts: 4, stored: "",
		},
		{
			name: "nothing to write",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) { f.runs++; return store.NewBatch(), nil }
			},
			runs: 1, transacts: 1, stored: "",
		},
		{
			name: "fn error is returned, not retried",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) { f.runs++; return nil, errFn }
			},
			err:  []error{errFn},
			runs: 1, transacts: 1, stored: "",
		},
		{
			name:  "deadline passed is not retried",
			setup: func(f *txnFixture) { f.openGate() },
			fn: func(f *txnFixture) store.TransactFunc {
				return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
					b, err := f.gated(ctx, r)
					return b.WithDeadline(f.clk.Now().Add(-time.Millisecond)), err
				}
			},
			err:     []error{store.ErrDeadlinePassed},
			outcome: store.DeadlinePassed, runs: 1, transacts: 1, stored: "",
		},
		{
			name:    "store failure is returned, not retried",
			setup:   func(f *txnFixture) { f.faults.FailNth(storetest.MethodTransact, 1, nil) },
			err:     []error{store.ErrUnavailable, storetest.ErrInjected},
			outcome: 0, runs: 1, transacts: 1, stored: "",
		},
		{
			name: "invalid batch is returned, not retried",
			fn: func(f *txnFixture) store.TransactFunc {
				return func(context.Context, store.Reader) (*store.Batch, error) {
					f.runs++
					return store.NewBatch().Put(store.Key{0xFF}, nil), nil
				}
			},
			err:     []error{store.ErrInvalid},
			outcome: 0, runs: 1, transacts: 1, stored: "",
		},
		{
			name:    "unknown result, re-run finds its work done",
			setup:   func(f *txnFixture) { f.openGate(); f.faults.CommitThenFailNth(1) },
			outcome: 0, runs: 2, transacts: 2, stored: "mine",
		},
		{
			name: "unknown result without landing, re-run commits",
			setup: func(f *txnFixture) {
				f.openGate()
				f.faults.FailNth(storetest.MethodTransact, 1, fmt.Errorf("lost in flight: %w", store.ErrUnknownResult))
			},
			outcome: store.Committed, runs: 2, transacts: 2, stored: "mine",
		},
		{
			name:    "unknown result, then retries exhausted: both reported",
			setup:   func(f *txnFixture) { f.faults.FailNth(storetest.MethodTransact, 1, store.ErrUnknownResult) },
			cfg:     store.TransactConfig{Retries: 2},
			err:     []error{store.ErrPreconditionFailed, store.ErrUnknownResult},
			outcome: store.PreconditionFailed, runs: 3, transacts: 3, stored: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTxnFixtureOf(t, true)
			if tc.setup != nil {
				tc.setup(f)
			}
			fn := store.TransactFunc(f.gated)
			if tc.fn != nil {
				fn = tc.fn(f)
			}
			out, err := store.Transact(t.Context(), f.faults, txnP, fn, withFast(tc.cfg))
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				for _, want := range tc.err {
					require.ErrorIs(t, err, want)
				}
			}
			require.Equal(t, tc.outcome, out.Outcome, "outcome")
			require.Equal(t, tc.runs, f.runs, "function runs")
			require.Equal(t, tc.transacts, f.faults.Calls(storetest.MethodTransact), "TransactOnce calls")
			require.Zero(t, f.faults.Calls(storetest.MethodApply), "Applies")
			require.Equal(t, tc.stored, f.stored(t, txnKey), "stored value")
		})
	}
}

// TestTransactErrorNamesPartitionAndPrecondition: the exhausted error
// names the partition and the failed precondition's key, never the value
// the guard expected.
func TestTransactErrorNamesPartitionAndPrecondition(t *testing.T) {
	f := newTxnFixture(t)
	secret := store.Value("s3cret-value")
	_, err := f.faults.Inner().Apply(t.Context(), txnP, store.NewBatch().Put(txnKey, secret))
	require.NoError(t, err)
	f.interfere(-1)

	_, err = store.Transact(t.Context(), f.faults, txnP, f.claim, withFast(store.TransactConfig{Retries: 1}))
	require.ErrorIs(t, err, store.ErrPreconditionFailed)
	msg := err.Error()
	require.Contains(t, msg, txnP.String())
	require.Contains(t, msg, fmt.Sprintf("%x", []byte(txnKey)))
	require.Contains(t, msg, "2 attempts")
	require.NotContains(t, msg, string(secret))
	require.NotContains(t, msg, fmt.Sprintf("%x", []byte(secret)))
}

// TestTransactFnErrorAsIs: fn's error comes back unwrapped.
func TestTransactFnErrorAsIs(t *testing.T) {
	f := newTxnFixture(t)
	_, err := store.Transact(t.Context(), f.faults, txnP, func(context.Context, store.Reader) (*store.Batch, error) { return nil, errFn }, fast)
	require.Same(t, errFn, err)
}

// cancelAfterApply is a store whose Apply cancels the caller's context
// once the inner Apply returned: the next thing the caller does is back
// off.
type cancelAfterApply struct {
	store.Store
	cancel context.CancelFunc
}

func (c cancelAfterApply) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	out, err := c.Store.Apply(ctx, p, b)
	c.cancel()
	return out, err
}

func TestTransactContext(t *testing.T) {
	t.Run("cancelled during backoff", func(t *testing.T) {
		f := newTxnFixture(t)
		f.interfere(-1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := cancelAfterApply{Store: f.faults, cancel: cancel}
		done := make(chan struct{})
		var (
			out store.BatchOutcome
			err error
		)
		go func() {
			defer close(done)
			// An hour's backoff: only the cancellation can end it.
			out, err = store.Transact(ctx, s, txnP, f.claim, store.TransactConfig{MinBackoff: time.Hour, MaxBackoff: time.Hour})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Transact did not return when its context was cancelled during the backoff")
		}
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, store.ErrPreconditionFailed)
		require.Contains(t, err.Error(), "during backoff")
		require.Equal(t, store.PreconditionFailed, out.Outcome, "the last outcome")
		require.Equal(t, 1, f.runs)
		require.Equal(t, 1, f.faults.Calls(storetest.MethodApply))
	})
	t.Run("cancelled before the first run", func(t *testing.T) {
		f := newTxnFixture(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := store.Transact(ctx, f.faults, txnP, f.claim, store.TransactConfig{})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 0, f.runs)
		require.Equal(t, 0, f.faults.Calls(storetest.MethodApply))
	})
	t.Run("cancelled after an unknown result", func(t *testing.T) {
		f := newTxnFixture(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f.faults.CommitThenFailNth(1)
		s := cancelAfterApply{Store: f.faults, cancel: cancel}
		_, err := store.Transact(ctx, s, txnP, f.claim, fast)
		require.ErrorIs(t, err, store.ErrUnknownResult)
		require.Equal(t, 1, f.runs)
		require.Equal(t, "mine", f.stored(t, txnKey))
	})
}

// TestTransactReaderIsBoundToPartition: the function reads through r the
// partition the batch goes to, and only that one.
func TestTransactReaderIsBoundToPartition(t *testing.T) {
	for _, transactor := range []bool{false, true} {
		t.Run(fmt.Sprintf("transactor=%v", transactor), func(t *testing.T) { testReaderIsBoundToPartition(t, transactor) })
	}
}

func testReaderIsBoundToPartition(t *testing.T, transactor bool) {
	f := newTxnFixtureOf(t, transactor)
	other := storetest.Partition{Name: "other"}
	for _, p := range []storetest.Partition{txnP, other} {
		b := store.NewBatch().Put(store.Key("a"), store.Value(p.Name+"-a")).Put(store.Key("b"), store.Value(p.Name+"-b"))
		_, err := f.faults.Inner().Apply(t.Context(), p, b)
		require.NoError(t, err)
	}
	var got []string
	_, err := store.Transact(t.Context(), f.faults, txnP, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		require.Equal(t, store.Partition(txnP), r.Partition())
		vs, err := r.GetMany(ctx, []store.Key{store.Key("a"), store.Key("b")})
		if err != nil {
			return nil, err
		}
		page, err := r.Scan(ctx, store.Key("a"), store.Key("c"), nil, 10)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			got = append(got, string(v))
		}
		for _, kv := range page.Entries {
			got = append(got, string(kv.Value))
		}
		return nil, nil
	}, store.TransactConfig{})
	require.NoError(t, err)
	require.Equal(t, []string{"txn-a", "txn-b", "txn-a", "txn-b"}, got)
}

// TestTransactConcurrentIncrements: writers racing on one counter each
// land their increment exactly once, whatever the interleaving.
func TestTransactConcurrentIncrements(t *testing.T) {
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	require.NoError(t, err)
	defer l.Close()
	const writers, each = 6, 25
	key := store.Key("counter")
	increment := func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		v, _, err := r.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		n := 0
		if v != nil {
			if n, err = strconv.Atoi(string(v)); err != nil {
				return nil, err
			}
		}
		return store.NewBatch().Require(store.Guard(key, v)).Put(key, store.Value(strconv.Itoa(n+1))), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := store.Transact(t.Context(), l, txnP, increment, store.TransactConfig{Retries: 10_000, MinBackoff: -1}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	v, _, err := l.Get(t.Context(), txnP, key)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(writers*each), string(v))
}

// Transact runs a read-then-guarded-batch function until its batch
// commits. This one counts each visit once, however often it runs: it
// guards the counter it read and the absence of the visit's own row, and
// finds a visit already counted when an earlier attempt's batch landed.
func ExampleTransact() {
	ctx := context.Background()
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	s := storetest.NewFaults(l)
	p := storetest.Partition{Name: "example"}
	total := store.Key("visits")

	count := func(visit string) store.TransactFunc {
		seen := store.Key("visit/" + visit)
		return func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			vs, err := r.GetMany(ctx, []store.Key{seen, total})
			if err != nil {
				return nil, err
			}
			if vs[0] != nil {
				return nil, nil // counted already
			}
			n := 0
			if vs[1] != nil {
				if n, err = strconv.Atoi(string(vs[1])); err != nil {
					return nil, fmt.Errorf("visits: %w", store.ErrCorrupt)
				}
			}
			return store.NewBatch().
				Require(store.Absent(seen), store.Guard(total, vs[1])).
				Put(seen, store.Value{}).
				Put(total, store.Value(strconv.Itoa(n+1))), nil
		}
	}

	report := func(visit string, out store.BatchOutcome, err error) {
		switch {
		case err != nil:
			fmt.Println(visit, "failed:", err)
		case out.Committed():
			fmt.Println(visit, "committed")
		default:
			fmt.Println(visit, "had nothing to write")
		}
	}

	out, err := store.Transact(ctx, s, p, count("a"), store.TransactConfig{})
	report("a", out, err)

	// Another writer sets the counter to 10 between the next read and its
	// commit: the store sees the row it read changed and runs the function
	// again (a store that is no store.Transactor fails the batch's guard
	// instead, and Transact runs it again).
	raced := false
	s.BeforeApply(func(ctx context.Context, p store.Partition, _ *store.Batch) error {
		if raced {
			return nil
		}
		raced = true
		_, err := s.Inner().Apply(ctx, p, store.NewBatch().Put(total, store.Value("10")))
		return err
	})
	out, err = store.Transact(ctx, s, p, count("b"), store.TransactConfig{})
	report("b", out, err)

	// The next commit lands but its result is lost: the re-run finds the
	// visit counted and has nothing to write.
	s.CommitThenFailNext()
	out, err = store.Transact(ctx, s, p, count("c"), store.TransactConfig{})
	report("c", out, err)

	v, _, _ := l.Get(ctx, p, total)
	fmt.Println("visits:", string(v), "after", s.Calls(storetest.MethodTransact), "transactions")
	// Output:
	// a committed
	// b committed
	// c had nothing to write
	// visits: 12 after 4 transactions
}

// TestTransactOnce: one attempt on either path: a failed guard is
// reported, not retried; fn's error comes back as it is; the Reader ends
// with fn; a nil store or function is ErrInvalid.
func TestTransactOnce(t *testing.T) {
	for _, transactor := range []bool{false, true} {
		t.Run(fmt.Sprintf("transactor=%v", transactor), func(t *testing.T) {
			f := newTxnFixtureOf(t, transactor)
			out, err := store.TransactOnce(t.Context(), f.faults, txnP, f.gated)
			require.NoError(t, err)
			require.Equal(t, store.PreconditionFailed, out.Outcome)
			require.Equal(t, 1, out.FailedIndex, "the gate's guard")
			require.Equal(t, 1, f.runs, "a failed guard is the caller's to retry")

			f.openGate()
			out, err = store.TransactOnce(t.Context(), f.faults, txnP, f.gated)
			require.NoError(t, err)
			require.Equal(t, store.Committed, out.Outcome)
			require.Equal(t, "mine", f.stored(t, txnKey))

			var kept store.Reader
			_, err = store.TransactOnce(t.Context(), f.faults, txnP, func(_ context.Context, r store.Reader) (*store.Batch, error) {
				kept = r
				return nil, errFn
			})
			require.Same(t, errFn, err)
			_, _, err = kept.Get(t.Context(), txnKey)
			require.ErrorIs(t, err, store.ErrInvalid, "a Reader used after its function returned")
			_, isWake := kept.(store.WakeReader)
			require.True(t, isWake, "the Reader of a store with a due index is a store.WakeReader")
		})
	}
	t.Run("a store that is no Transactor", func(t *testing.T) {
		// Not behind Faults, which is a store.Transactor over any store:
		// store.TransactOnce's own reads and Apply.
		l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
		require.NoError(t, err)
		defer l.Close()
		s := storeOnly{l, l}
		var kept store.Reader
		out, err := store.TransactOnce(t.Context(), s, txnP, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			kept = r
			at, ok, err := r.(store.WakeReader).NextWake(ctx)
			if err != nil || ok {
				return nil, fmt.Errorf("wake %v, %v, %v", at, ok, err)
			}
			return store.NewBatch().Put(txnKey, txnMine).SetWake(time.Time{}, store.DecodeTime(5000)), nil
		})
		require.NoError(t, err)
		require.Equal(t, store.Committed, out.Outcome)
		at, _, err := l.NextWake(t.Context(), txnP)
		require.NoError(t, err)
		require.Equal(t, int64(5000), at.UnixMilli())
		_, err = kept.Scan(t.Context(), nil, nil, nil, 1)
		require.ErrorIs(t, err, store.ErrInvalid, "a Reader used after its function returned")
	})
	_, err := store.TransactOnce(t.Context(), nil, txnP, func(context.Context, store.Reader) (*store.Batch, error) { return nil, nil })
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = store.TransactOnce(t.Context(), newTxnFixture(t).faults, txnP, nil)
	require.ErrorIs(t, err, store.ErrInvalid)
}
