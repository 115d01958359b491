package timers_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// schedEnv is a scheduler test's store, clock and observers: the timers
// tests' env, plus the layer under its faults wrapper. Schedulers run
// against faults; the test writes and reads through layer.
type schedEnv struct {
	*env
	// t is the test, for hooks that write through the env's helpers.
	t     testing.TB
	layer *fdblayer.Layer
	// touched lists the partitions the test wrote to, in order, for the
	// due index invariant checks.
	touched []store.Partition
	seen    map[string]bool
}

// forEachSchedEngine runs fn as a subtest per engine on a fresh schedEnv
// whose clock reads now. After every tick (tick) and when the test ends,
// the partitions it wrote to are checked against the due index invariant.
func forEachSchedEngine(t *testing.T, now time.Time, fn func(t *testing.T, e *schedEnv)) {
	forEachEngine(t, now, func(t *testing.T, e *env) {
		se := &schedEnv{env: e, layer: e.inner.(*fdblayer.Layer), seen: make(map[string]bool)}
		t.Cleanup(func() { se.checkDueIndex(t) })
		fn(t, se)
	})
}

// checkDueIndex fails the test when a partition the test wrote to, or one
// of ps, breaks the due index invariant (timerstest.CheckDueIndex).
func (e *schedEnv) checkDueIndex(t testing.TB, ps ...store.Partition) {
	t.Helper()
	for _, p := range ps {
		e.touch(p)
	}
	require.NoError(t, timerstest.CheckDueIndex(e.ctx, e.layer, e.touched))
}

// exempt leaves ps out of the invariant checks: the test breaks the
// invariant on purpose (a wake time moved by hand, a corrupt lease) to see
// what the scheduler makes of it.
func (e *schedEnv) exempt(ps ...store.Partition) {
	for _, p := range ps {
		name := store.PartitionName(p)
		e.seen[name] = true
		for i, q := range e.touched {
			if store.PartitionName(q) == name {
				e.touched = append(e.touched[:i], e.touched[i+1:]...)
				break
			}
		}
	}
}

func (e *schedEnv) touch(p store.Partition) {
	if name := store.PartitionName(p); !e.seen[name] {
		e.seen[name] = true
		e.touched = append(e.touched, p)
	}
}

// scheduler returns a Scheduler over e's faults wrapper, owned by owner,
// with 2 workers, a 10 s lease, e's clock and observers, and a Waiter that
// fails the test; edit changes the config first.
func (e *schedEnv) scheduler(t testing.TB, owner string, reg *timers.Registry, edit func(*timers.SchedulerConfig)) *timers.Scheduler {
	t.Helper()
	cfg := timers.SchedulerConfig{
		Store:          e.faults,
		Registry:       reg,
		ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		Owner:          owner,
		Workers:        2,
		LeaseDuration:  leaseDuration,
		Clock:          e.clock,
		Waiter:         failWaiter{t},
		Logger:         e.logger,
		Metrics:        e.metrics,
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := timers.NewScheduler(cfg)
	require.NoError(t, err)
	return s
}

const leaseDuration = 10 * time.Second

// part is the i-th test partition.
func part(i int) refdomain.NamespacePartition {
	return refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("p%03d", i))}
}

func (e *schedEnv) apply(t testing.TB, p store.Partition, b *store.Batch) {
	t.Helper()
	e.touch(p)
	out, err := e.layer.Apply(e.ctx, p, b)
	require.NoError(t, err)
	require.True(t, out.Committed(), "%v", out)
}

// schedule writes timer tm into p, guarded by its current reference entry.
func (e *schedEnv) schedule(t testing.TB, p store.Partition, tm timers.Timer) {
	t.Helper()
	observed, _, err := timers.ReadRef(e.ctx, e.layer, p, tm.Kind, tm.Reference)
	require.NoError(t, err)
	b := store.NewBatch()
	require.NoError(t, timers.Schedule(b, e.layer.Capabilities(), observed, tm))
	e.apply(t, p, b)
}

// wake reads p's wake time; ok is false when it has none.
func (e *schedEnv) wake(t testing.TB, p store.Partition) (time.Time, bool) {
	t.Helper()
	at, ok, err := e.layer.NextWake(e.ctx, p)
	require.NoError(t, err)
	return at, ok
}

// setWake replaces p's wake time, whatever it is, with at (the zero Time:
// none).
func (e *schedEnv) setWake(t testing.TB, p store.Partition, at time.Time) {
	t.Helper()
	cur, _ := e.wake(t, p)
	e.apply(t, p, store.NewBatch().SetWake(cur, at))
}

// lease reads p's scheduler lease; ok is false when there is none.
func (e *schedEnv) lease(t testing.TB, p store.Partition) (gen.SchedulerLeaseV1, bool) {
	t.Helper()
	v, ok, err := e.layer.Get(e.ctx, p, gen.AppendSchedulerLeaseKey(nil))
	require.NoError(t, err)
	if !ok {
		return gen.SchedulerLeaseV1{}, false
	}
	l, err := gen.DecodeSchedulerLeaseV1(v)
	require.NoError(t, err)
	return l, true
}

// putLease writes a lease of owner expiring at expiresAt into p and parks
// p's wake time, as a claim does.
func (e *schedEnv) putLease(t testing.TB, p store.Partition, owner string, expiresAt time.Time) {
	t.Helper()
	expiresAtMs, err := store.EncodeTime(expiresAt) // as the lease row holds it
	require.NoError(t, err)
	v, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: owner, ExpiresAtMs: expiresAtMs})
	require.NoError(t, err)
	cur, _ := e.wake(t, p)
	e.apply(t, p, store.NewBatch().Put(gen.AppendSchedulerLeaseKey(nil), v).SetWake(cur, timers.ParkedWake))
}

// entries lists the whole due index, by time then identity, without
// buckets.
func (e *schedEnv) entries(t testing.TB) []store.DueEntry {
	t.Helper()
	es, err := e.layer.ScanDue(e.ctx, store.DueQuery{Until: store.MaxTime, Limit: 100_000})
	require.NoError(t, err)
	// By time, then identity; the buckets are the store's business.
	for i := range es {
		es[i].Bucket = 0
	}
	slices.SortFunc(es, func(a, b store.DueEntry) int {
		return cmp.Or(a.At.Compare(b.At), bytes.Compare(a.Partition, b.Partition))
	})
	return es
}

func (e *schedEnv) tick(t testing.TB, s *timers.Scheduler) timers.TickReport {
	t.Helper()
	rep, err := s.Tick(e.ctx)
	require.NoError(t, err)
	e.checkDueIndex(t)
	return rep
}

// fire is one handler call as a recorder saw it.
type fire struct {
	Partition string
	Reference string
	DueAt     time.Time
	Now       time.Time
}

// recorder is a Handler that records its fires, counts the fires of each
// partition in progress, and notes any overlap. outcome (nil: Done) picks
// each fire's outcome; during (nil: nothing) runs inside each fire.
type recorder struct {
	kind    timers.Kind
	outcome func(c *timers.Ctx, t timers.DueTimer) timers.Fired
	during  func(c *timers.Ctx, t timers.DueTimer)

	mu       sync.Mutex
	fires    []fire
	inFlight map[string]int
	overlaps []string
}

func (r *recorder) Kind() timers.Kind { return r.kind }

func (r *recorder) Fire(_ context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	name := store.PartitionName(c.Partition)
	r.mu.Lock()
	if r.inFlight == nil {
		r.inFlight = make(map[string]int)
	}
	r.inFlight[name]++
	if r.inFlight[name] > 1 {
		r.overlaps = append(r.overlaps, name)
	}
	r.fires = append(r.fires, fire{name, t.Reference, t.DueAt, c.Now})
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight[name]--
		r.mu.Unlock()
	}()
	if r.during != nil {
		r.during(c, t)
	}
	if r.outcome == nil {
		return timers.Done{}, nil
	}
	return r.outcome(c, t), nil
}

func (r *recorder) seen() []fire {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fire(nil), r.fires...)
}

func (r *recorder) overlapping() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.overlaps...)
}

// partitions lists the partitions of fires in order.
func partitionsOf(fs []fire) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Partition
	}
	return out
}

// failWaiter fails the test: Run is not expected to wait.
type failWaiter struct{ t testing.TB }

func (w failWaiter) Wait(context.Context, time.Duration) error {
	w.t.Errorf("unexpected Wait")
	return fmt.Errorf("unexpected Wait")
}

// manualWaiter records each wait and moves the clock by it instead of
// sleeping; stop, when set, is called after each wait with the waits so
// far and the clock's time.
type manualWaiter struct {
	clock *clock.Manual
	stop  func(waits []time.Duration, now time.Time)

	mu    sync.Mutex
	waits []time.Duration
}

func (w *manualWaiter) Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.clock.Advance(d)
	w.mu.Lock()
	w.waits = append(w.waits, d)
	waits := append([]time.Duration(nil), w.waits...)
	w.mu.Unlock()
	if w.stop != nil {
		w.stop(waits, w.clock.Now())
	}
	return nil
}

func (w *manualWaiter) recorded() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.waits...)
}

// schedLabel is the partition-kind label of the test partitions.
var schedLabel = telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "namespace"}

// identity is p's due index identity.
func identity(t testing.TB, p store.Partition) []byte {
	t.Helper()
	id, err := p.AppendTuple(nil)
	require.NoError(t, err)
	return id
}

// testPartition is a partition refdomain.ParsePartition cannot parse.
func testPartition(name string) storetest.Partition { return storetest.Partition{Name: name} }

// blockFirst returns a recorder's during hook that holds the first fire
// until release is closed, closing entered when it starts; later fires
// pass.
func blockFirst() (during func(*timers.Ctx, timers.DueTimer), entered <-chan struct{}, release chan struct{}) {
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	return func(*timers.Ctx, timers.DueTimer) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(in)
			<-out
		}
	}, in, out
}

// stopSpinning cancels a Run that lists the due index more than limit
// times, failing the test, instead of letting it spin forever.
func (e *schedEnv) stopSpinning(t testing.TB, cancel context.CancelFunc, limit int) {
	var n int
	var mu sync.Mutex
	e.faults.AfterRead(func(_ context.Context, c storetest.Call) error {
		if c.Method != storetest.MethodScanDue {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if n++; n == limit {
			t.Errorf("Run listed the due index %d times: it spins", n)
			cancel()
		}
		return nil
	})
}

// deletes reports whether b deletes key: a batch that releases a claim
// deletes its lease.
func deletes(b *store.Batch, key store.Key) bool {
	for _, w := range b.Writes {
		if w.Op == store.OpDelete && string(w.Key) == string(key) {
			return true
		}
	}
	return false
}

// withoutElapsed returns rep with its run time zeroed, for comparisons.
func withoutElapsed(rep timers.TickReport) timers.TickReport {
	rep.Timers.Elapsed = 0
	return rep
}
