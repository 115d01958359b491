package fdblayer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// gatedEngine is a memory engine whose commits share a sync
// (kv.GroupCommitter): its write transactions wait at Begin while the
// gate is shut, and it counts its commits, and fails them with failCommit
// when set.
type gatedEngine struct {
	*memengine.Engine
	mu         sync.Mutex
	gate       chan struct{} // nil: open
	commits    atomic.Int64
	failCommit error
}

func (e *gatedEngine) GroupCommits() bool { return true }

func (e *gatedEngine) Begin(ctx context.Context) (kv.Txn, error) {
	e.mu.Lock()
	gate := e.gate
	e.mu.Unlock()
	if gate != nil {
		<-gate
	}
	txn, err := e.Engine.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &countedTxn{Txn: txn, e: e}, nil
}

// shut makes the next write transactions wait until the returned open
// is called.
func (e *gatedEngine) shut() (open func()) {
	g := make(chan struct{})
	e.mu.Lock()
	e.gate = g
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.gate = nil
		e.mu.Unlock()
		close(g)
	}
}

type countedTxn struct {
	kv.Txn
	e *gatedEngine
}

func (t *countedTxn) Commit() error {
	if err := t.e.failCommit; err != nil {
		t.Txn.Close()
		return err
	}
	t.e.commits.Add(1)
	return t.Txn.Commit()
}

// queue starts calls, one after another, each once the one before waits
// in l's group commit queue behind a leader held at the engine's Begin,
// and returns their results once open lets the leader go.
func queue(t *testing.T, l *Layer, open func(), calls ...func() (store.CommitOutcome, error)) ([]store.CommitOutcome, []error) {
	t.Helper()
	outs := make([]store.CommitOutcome, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { outs[i], errs[i] = call() })
		// The first call leads and leaves the queue only when the engine
		// lets it begin; each call after it waits in the queue.
		require.Eventually(t, func() bool { return l.GroupQueued() == i+1 }, 10*time.Second, time.Millisecond)
	}
	open()
	wg.Wait()
	return outs, errs
}

func applyCall(ctx context.Context, l *Layer, p store.Partition, b *store.Batch) func() (store.CommitOutcome, error) {
	return func() (store.CommitOutcome, error) {
		out, err := l.Apply(ctx, p, b)
		return store.CommitOutcome{BatchOutcome: out}, err
	}
}

// TestGroupCommitOneCommitForQueuedCalls: calls that wait for the writer
// together commit in one engine commit, each with its own outcome: a
// guard that fails on a write an earlier call of the group made fails
// that call alone, a multi-partition commit whose second batch fails
// writes nothing, and the calls after them land.
func TestGroupCommitOneCommitForQueuedCalls(t *testing.T) {
	e := &gatedEngine{Engine: memengine.New()}
	l := openLayer(t, e, Config{Gate: noGateRows})
	ctx := t.Context()
	p, q, r := storetest.Partition{Name: "p"}, storetest.Partition{Name: "q"}, storetest.Partition{Name: "r"}
	k := store.Key("k")
	open := e.shut()
	outs, errs := queue(t, l, open,
		applyCall(ctx, l, p, store.NewBatch().Require(store.Absent(k)).Put(k, store.Value("first")).WakeAt(t0.Add(time.Second))),
		// Sees the first call's write: its guard fails.
		applyCall(ctx, l, p, store.NewBatch().Require(store.Absent(k)).Put(k, store.Value("second"))),
		// Sees it too, and holds.
		applyCall(ctx, l, p, store.NewBatch().Require(store.Equals(k, store.Value("first"))).Put(store.Key("j"), store.Value("third"))),
		func() (store.CommitOutcome, error) {
			return l.Commit(ctx, []store.PartitionBatch{
				{Partition: q, Batch: store.NewBatch().Put(k, store.Value("q"))},
				{Partition: r, Batch: store.NewBatch().Require(store.Absent(k)).Put(k, store.Value("r")).Require(store.Equals(k, store.Value("no")))},
			})
		},
		func() (store.CommitOutcome, error) {
			return l.Commit(ctx, []store.PartitionBatch{
				{Partition: q, Batch: store.NewBatch().Put(store.Key("m"), store.Value("q")).WakeAt(t0.Add(2 * time.Second))},
				{Partition: r, Batch: store.NewBatch().Put(store.Key("m"), store.Value("r"))},
			})
		},
	)
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	require.Equal(t, int64(1), e.commits.Load(), "one engine commit for the group")
	require.True(t, outs[0].Committed())
	require.Equal(t, store.PreconditionFailed, outs[1].Outcome)
	require.True(t, outs[2].Committed())
	require.Equal(t, store.PreconditionFailed, outs[3].Outcome)
	require.Equal(t, 1, outs[3].Index)
	require.Equal(t, store.Partition(r), outs[3].Partition)
	require.True(t, outs[4].Committed())
	wantValue(t, l, p, "k", "first")
	wantValue(t, l, p, "j", "third")
	wantValue(t, l, q, "k", "")
	wantValue(t, l, r, "k", "")
	wantValue(t, l, q, "m", "q")
	wantValue(t, l, r, "m", "r")
	due, err := l.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 10})
	require.NoError(t, err)
	require.Len(t, due, 2, "the wake times of p and q: %v", due)
}

// wantValue fails t unless key of p holds want ("": absent).
func wantValue(t *testing.T, l *Layer, p store.Partition, key, want string) {
	t.Helper()
	v, ok, err := l.Get(t.Context(), p, store.Key(key))
	require.NoError(t, err)
	if want == "" {
		require.False(t, ok, "%s of %v holds %q, want absent", key, p, v)
		return
	}
	require.Equal(t, want, string(v), "%s of %v", key, p)
}

// TestGroupCommitEndedContextAlone: a call whose context ends while it
// waits in the queue fails with its context's error and writes nothing;
// the others of its group land.
func TestGroupCommitEndedContextAlone(t *testing.T) {
	e := &gatedEngine{Engine: memengine.New()}
	l := openLayer(t, e, Config{Gate: noGateRows})
	p := storetest.Partition{Name: "p"}
	cancelled, cancel := context.WithCancel(t.Context())
	open := e.shut()
	outs, errs := queue(t, l, func() { cancel(); open() },
		applyCall(t.Context(), l, p, store.NewBatch().Put(store.Key("a"), store.Value("a"))),
		applyCall(cancelled, l, p, store.NewBatch().Put(store.Key("b"), store.Value("b"))),
		applyCall(t.Context(), l, p, store.NewBatch().Put(store.Key("c"), store.Value("c"))),
	)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], context.Canceled)
	require.ErrorIs(t, errs[1], store.ErrUnavailable)
	require.NoError(t, errs[2])
	require.True(t, outs[0].Committed() && outs[2].Committed())
	wantValue(t, l, p, "a", "a")
	wantValue(t, l, p, "b", "")
	wantValue(t, l, p, "c", "c")
}

// TestGroupCommitFailedCommitAnswersEveryCall: a commit whose result is
// unknown answers every call of the group with ErrUnknownResult, none
// with an outcome.
func TestGroupCommitFailedCommitAnswersEveryCall(t *testing.T) {
	e := &gatedEngine{Engine: memengine.New(), failCommit: fmt.Errorf("disk gone: %w", store.ErrUnknownResult)}
	l := openLayer(t, e, Config{Gate: noGateRows})
	p := storetest.Partition{Name: "p"}
	open := e.shut()
	outs, errs := queue(t, l, open,
		applyCall(t.Context(), l, p, store.NewBatch().Put(store.Key("a"), store.Value("a"))),
		applyCall(t.Context(), l, p, store.NewBatch().Require(store.Absent(store.Key("a"))).Put(store.Key("b"), store.Value("b"))),
	)
	for i := range errs {
		require.ErrorIs(t, errs[i], store.ErrUnknownResult, "call %d", i)
		require.Zero(t, outs[i].Outcome, "call %d", i)
	}
}

// TestGroupCommitBoundsTheGroup: a group takes at most MaxGroupBatches
// calls; the rest form the next groups, in the order they came, and every
// call is answered.
func TestGroupCommitBoundsTheGroup(t *testing.T) {
	e := &gatedEngine{Engine: memengine.New()}
	l := openLayer(t, e, Config{MaxGroupBatches: 2, Gate: noGateRows})
	p := storetest.Partition{Name: "p"}
	open := e.shut()
	var calls []func() (store.CommitOutcome, error)
	for i := range 5 {
		calls = append(calls, applyCall(t.Context(), l, p, store.NewBatch().Put(store.Key(fmt.Sprintf("k%d", i)), store.Value("v"))))
	}
	outs, errs := queue(t, l, open, calls...)
	for i := range calls {
		require.NoError(t, errs[i])
		require.True(t, outs[i].Committed())
	}
	require.Equal(t, int64(3), e.commits.Load(), "groups of 2, 2 and 1")
}

// TestNoGroupCommit: with NoGroupCommit every call commits on its own.
func TestNoGroupCommit(t *testing.T) {
	e := &gatedEngine{Engine: memengine.New()}
	l := openLayer(t, e, Config{MaxGroupBatches: NoGroupCommit, Gate: noGateRows})
	require.Equal(t, -1, l.GroupQueued())
	p := storetest.Partition{Name: "p"}
	for i := range 3 {
		out, err := l.Apply(t.Context(), p, store.NewBatch().Put(store.Key(fmt.Sprintf("k%d", i)), store.Value("v")))
		require.NoError(t, err)
		require.True(t, out.Committed())
	}
	require.Equal(t, int64(3), e.commits.Load())
}
