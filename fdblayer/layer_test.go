package fdblayer_test

import (
	"context"
	"errors"
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
)

// TestCapabilities: the limits follow from FoundationDB's: keys lose the
// root prefix and the largest identity, batches keep three engine keys of
// room per operation, and options that leave no room fail Open.
func TestCapabilities(t *testing.T) {
	l := openLayer(t, memengine.New())
	require.Equal(t, store.Capabilities{
		MaxBatchOps:   100,
		MaxKeyBytes:   10_000 - len(DefaultRootPrefix) - DefaultMaxPartitionBytes,
		MaxValueBytes: 100_000,
		MaxBatchBytes: 10_000_000 - (100+5)*3*10_001,

		MaxScanBytes:         1 << 20,
		MaxTransactReadBytes: 4 << 20,

		MaxCommitBatches: 100,
		MaxCommitOps:     1000,
		// Every operation's key with the root and the largest identity
		// (and 12 bytes of a due index key), three times, and a wake
		// time's 16 bytes, for the thousand operations and each batch's
		// five of a wakeup: what is left of 10 MB, counted three times.
		MaxCommitBytes: (10_000_000 - (1000+5*100)*(3*(len(DefaultRootPrefix)+DefaultMaxPartitionBytes+12)+16)) / 3,
	}, l.Capabilities())

	l = openLayer(t, memengine.New(), Config{RootPrefix: []byte{}, MaxPartitionBytes: 100, MaxBatchOps: 10,
		MaxScanBytes: 1000, MaxTransactReadBytes: 3000})
	caps := l.Capabilities()
	require.Equal(t, 9_900, caps.MaxKeyBytes)
	require.Equal(t, 10, caps.MaxBatchOps)
	require.Equal(t, 10_000_000-(10+5)*3*10_001, caps.MaxBatchBytes)
	require.Equal(t, 1000, caps.MaxScanBytes)
	require.Equal(t, 3000, caps.MaxTransactReadBytes)
}

// TestOpenRejectsBadConfig: a Config out of range fails Open with
// ErrInvalid naming the field (or the limit the engine cannot meet), as
// does a nil engine.
func TestOpenRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"system root":                     {Config{RootPrefix: []byte{0xFF, 1}}, "Config.RootPrefix"},
		"negative batch ops":              {Config{MaxBatchOps: -1}, "Config.MaxBatchOps"},
		"batch ops beyond bytes":          {Config{MaxBatchOps: 400}, "400-operation batches"},
		"negative partition bytes":        {Config{MaxPartitionBytes: -1}, "Config.MaxPartitionBytes"},
		"identity fills keys":             {Config{MaxPartitionBytes: 10_000}, "leaves no room for keys"},
		"negative scan rows":              {Config{MaxScanRows: -1}, "Config.MaxScanRows"},
		"negative scan bytes":             {Config{MaxScanBytes: -5}, "Config.MaxScanBytes"},
		"negative transact read bytes":    {Config{MaxTransactReadBytes: -1}, "Config.MaxTransactReadBytes"},
		"root and identity fill the keys": {Config{RootPrefix: make([]byte, 9_000), MaxPartitionBytes: 1_000}, "leaves no room for keys"},
		"negative commit batches":         {Config{MaxCommitBatches: -1}, "Config.MaxCommitBatches"},
		"negative commit ops":             {Config{MaxCommitOps: -2}, "Config.MaxCommitOps"},
		"commit ops beyond bytes":         {Config{MaxCommitOps: 4000}, "Config.MaxCommitOps 4000"},
	} {
		_, err := Open(memengine.New(), tc.cfg)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, tc.want, name)
	}
	_, err := Open(nil, Config{})
	require.ErrorIs(t, err, store.ErrInvalid)
}

// TestZeroConfigIsTheDefaults: the zero Config opens the Layer every
// default does: the default root prefix, scan page and retry limit.
func TestZeroConfigIsTheDefaults(t *testing.T) {
	l := openLayer(t, memengine.New())
	require.Equal(t, []byte(DefaultRootPrefix), l.Root())
	require.Equal(t, DefaultRetryLimit, l.RetryLimit())
	require.Equal(t, DefaultMaxScanRows, l.MaxScanRows())
	require.Equal(t, 0, openLayer(t, memengine.New(), Config{RetryLimit: NoRetries}).RetryLimit())
	require.Equal(t, 0, openLayer(t, memengine.New(), Config{RetryLimit: -7}).RetryLimit())
	require.Empty(t, openLayer(t, memengine.New(), Config{RootPrefix: []byte{}}).Root())
}

// badPartition is an identity that encodes to fixed bytes.
type badPartition []byte

func (b badPartition) AppendTuple(dst []byte) ([]byte, error) { return append(dst, b...), nil }
func (badPartition) Kind() string                             { return "bad" }

// TestInvalidInputWritesNothing: every input the Layer rejects is
// ErrInvalid before any I/O, on every engine, and leaves the partition
// empty.
func TestInvalidInputWritesNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		p := testPartition("p")
		caps := l.Capabilities()
		big := func(n int) []byte { return make([]byte, n) }
		keyOver := store.Key(append([]byte("k"), big(caps.MaxKeyBytes)...))
		good := store.Put(k("good"), v("g"))
		batches := map[string]*store.Batch{
			"nil batch":        nil,
			"empty batch":      store.NewBatch(),
			"key over limit":   store.NewBatch().Add(good).Put(keyOver, v("x")),
			"value over limit": store.NewBatch().Add(good).Put(k("v"), big(caps.MaxValueBytes+1)),
			"guard key over":   store.NewBatch().Require(store.Absent(keyOver)).Add(good),
			"too many ops":     store.NewBatch().Add(make([]store.Write, caps.MaxBatchOps+1)...),
			"unknown op":       store.NewBatch().Add(good, store.Write{Op: 9, Key: k("u")}),
			"0xff key":         store.NewBatch().Add(good).Put(k("\xffk"), v("x")),
			"wakeup at 0":      store.NewBatch().Add(good).WakeAt(time.Time{}),
		}
		for i := range batches["too many ops"].Writes {
			batches["too many ops"].Writes[i] = store.Put(k("o"), v("o"))
		}
		over := store.NewBatch()
		for n := 0; n <= caps.MaxBatchBytes; n += caps.MaxValueBytes {
			over.Put(k("b"), big(caps.MaxValueBytes))
		}
		batches["batch bytes over limit"] = over
		for name, b := range batches {
			_, err := l.Apply(t.Context(), p, b)
			require.ErrorIs(t, err, store.ErrInvalid, name)
		}
		for name, bad := range map[string]store.Partition{
			"broken":           testPartition(""),
			"nil":              nil,
			"empty identity":   badPartition{},
			"identity too big": badPartition(big(DefaultMaxPartitionBytes + 1)),
			"identity at 0xff": badPartition{0xFF, 0x01},
		} {
			_, err := l.Apply(t.Context(), bad, store.NewBatch().Add(good))
			require.ErrorIs(t, err, store.ErrInvalid, name)
			_, err = l.GetMany(t.Context(), bad, []store.Key{k("good")})
			require.ErrorIs(t, err, store.ErrInvalid, name)
			_, err = l.Scan(t.Context(), bad, nil, nil, nil, 1)
			require.ErrorIs(t, err, store.ErrInvalid, name)
			_, err = l.Stats(t.Context(), bad)
			require.ErrorIs(t, err, store.ErrInvalid, name)
		}
		for name, cursor := range map[string]store.Cursor{"garbage": store.Cursor("garbage!!!"), "short": {1}} {
			_, err := l.Scan(t.Context(), p, nil, nil, cursor, 1)
			require.ErrorIs(t, err, store.ErrInvalid, name)
		}
		_, err := l.Scan(t.Context(), p, nil, nil, nil, 0)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = l.Scan(t.Context(), p, keyOver, nil, nil, 1)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Empty(t, scanAllRows(t, l, p, nil, nil, 10))
		st, err := l.Stats(t.Context(), p)
		require.NoError(t, err)
		require.Zero(t, st.ApproximateBytes)
	})
}

// TestProbe: Probe answers while the engine is open and fails with
// ErrUnavailable when it is closed or the context has ended.
func TestProbe(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			l, err := Open(ec.open(t), Config{})
			require.NoError(t, err)
			require.NoError(t, l.Probe(t.Context()))
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			err = l.Probe(ctx)
			require.ErrorIs(t, err, store.ErrUnavailable)
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, l.Close())
			require.ErrorIs(t, l.Probe(t.Context()), store.ErrUnavailable)
			_, _, err = l.Get(t.Context(), testPartition("p"), k("k"))
			require.ErrorIs(t, err, store.ErrUnavailable)
			_, err = l.Apply(t.Context(), testPartition("p"), store.NewBatch().Put(k("k"), v("v")))
			require.ErrorIs(t, err, store.ErrUnavailable)
		})
	}
}

// errFlaky is the retryable error of flakyEngine.
var errFlaky = errors.New("flaky read")

// flakyEngine wraps an engine so that its transactions' reads fail with a
// retryable error while failures remain, and fatally once fatal is set.
type flakyEngine struct {
	kv.Engine
	failures atomic.Int32
	fatal    atomic.Bool
	retries  atomic.Int32
}

func (f *flakyEngine) BeginRead(ctx context.Context) (kv.ReadTxn, error) {
	txn, err := f.Engine.BeginRead(ctx)
	if err != nil {
		return nil, err
	}
	return &flakyTxn{ReadTxn: txn, e: f}, nil
}

func (f *flakyEngine) Begin(ctx context.Context) (kv.Txn, error) {
	txn, err := f.Engine.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &flakyTxn{ReadTxn: txn, Txn: txn, e: f}, nil
}

type flakyTxn struct {
	kv.ReadTxn
	kv.Txn // nil for read transactions
	e      *flakyEngine
}

func (t *flakyTxn) fail() error {
	if t.e.fatal.Load() {
		return errors.New("fatal read")
	}
	if t.e.failures.Add(-1) >= 0 {
		return errFlaky
	}
	return nil
}

func (t *flakyTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	if err := t.fail(); err != nil {
		return dst, err
	}
	return t.ReadTxn.GetMany(dst, keys)
}

func (t *flakyTxn) GetRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) ([]kv.KeyValue, error) {
	if err := t.fail(); err != nil {
		return dst, err
	}
	return t.ReadTxn.GetRange(dst, begin, end, limit, maxBytes)
}

func (t *flakyTxn) OnError(err error) error {
	if errors.Is(err, errFlaky) {
		t.e.retries.Add(1)
		return nil
	}
	return t.ReadTxn.OnError(err)
}

func (t *flakyTxn) Close()                { t.ReadTxn.Close() }
func (t *flakyTxn) Set(key, value []byte) { t.Txn.Set(key, value) }
func (t *flakyTxn) Clear(key []byte)      { t.Txn.Clear(key) }
func (t *flakyTxn) Commit() error         { return t.Txn.Commit() }

// TestReadRetries: reads and Apply's guard reads retry a retryable engine
// error within the retry limit; past it, or on a fatal error, they fail
// with ErrUnavailable.
func TestReadRetries(t *testing.T) {
	f := &flakyEngine{Engine: memengine.New()}
	l := openLayer(t, f, Config{RetryLimit: 2})
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))

	f.failures.Store(2)
	require.Equal(t, v("1"), mustGet(t, l, p, k("a")))
	f.failures.Store(2)
	require.Len(t, scanAllRows(t, l, p, nil, nil, 5), 1)
	f.failures.Store(2)
	out := mustApply(t, l, p, store.NewBatch().Require(store.Equals(k("a"), v("1"))).Put(k("b"), v("2")))
	require.Equal(t, store.Committed, out.Outcome)
	require.Equal(t, int32(6), f.retries.Load())

	f.failures.Store(3)
	_, _, err := l.Get(t.Context(), p, k("a"))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, ErrRetriesExhausted)
	f.failures.Store(3)
	_, err = l.Apply(t.Context(), p, store.NewBatch().Require(store.Absent(k("c"))).Put(k("c"), v("3")))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, ErrRetriesExhausted)

	f.failures.Store(0)
	f.fatal.Store(true)
	_, err = l.Scan(t.Context(), p, nil, nil, nil, 5)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotErrorIs(t, err, ErrRetriesExhausted)
	f.fatal.Store(false)
	require.Nil(t, mustGet(t, l, p, k("c")))
}

// TestResultsAreCopies: values and keys a read returns are the caller's,
// separate from one another and from the engine.
func TestResultsAreCopies(t *testing.T) {
	forEachEngine(t, func(t *testing.T, l *Layer) {
		p := testPartition("p")
		mustApply(t, l, p, store.NewBatch().Put(k("a"), v("11")).Put(k("b"), v("22")).Put(k("e"), v("")))
		vals, err := l.GetMany(t.Context(), p, []store.Key{k("a"), k("b"), k("e"), k("missing")})
		require.NoError(t, err)
		require.Equal(t, []store.Value{v("11"), v("22"), {}, nil}, vals)
		require.NotNil(t, vals[2], "an empty value is present")
		vals[0] = append(vals[0], 'x') // must not spill into vals[1]
		require.Equal(t, v("22"), vals[1])
		page, err := l.Scan(t.Context(), p, nil, nil, nil, 10)
		require.NoError(t, err)
		page.Entries[0].Key = append(page.Entries[0].Key, 'x') // must not spill into the value
		require.Equal(t, v("11"), page.Entries[0].Value)
		page.Entries[0].Value[0] = '#'
		require.Equal(t, v("11"), mustGet(t, l, p, k("a")))
	})
}
