package timers_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// The batched outcome model: a partition holds timers of one kind whose
// handlers do one of the behaviours below, so that a page's outcomes,
// committed together, meet each other: independent writes, a chain of
// counter increments (each guarded by the value its handler read, so that
// a later one depends on an earlier one's write), guards that fail
// (always, or because an outside writer changed the guarded key or the
// timer itself during the fire), handler errors, retries and
// reschedules, and permanent failures (a Retry with a Permanent error),
// which make dead letters; runs alone or under a Scheduler's claim, with
// injected store failures, among them failed reads of a dead letter's key.
// Every outcome writes a marker, so that the check knows which landed.
// After each run it checks that
//   - replaying, in firing order, exactly the outcomes that landed on a
//     model of the handlers' keys finds every guard holding at its turn and
//     ends with the store's values: the combined batches were equivalent
//     to applying the outcomes one after another;
//   - no outcome whose guard failed landed;
//   - in a run without a store failure, every outcome that depends on no
//     other (a write, a reschedule) landed, and the report counts exactly
//     the outcomes that landed: a failed guard lost no other timer's work;
//   - a permanent failure spends no attempt: its handler never sees one
//     recorded (a store failure while the dead letter is made fails the
//     run, and is not taken for the handler's failure), and every dead
//     letter is a permanent failure's, after one attempt, its last error
//     the handler's own;
//   - the due index invariant holds.

type behaviour int

const (
	bWrite      behaviour = iota // an independent write
	bCounter                     // increments a shared counter, guarded by what it read
	bFailGuard                   // a guard that never holds
	bError                       // the handler fails
	bRetry                       // Retry
	bReschedule                  // Reschedule, with an independent write
	bRaceOwn                     // an outside writer changes the timer during its fire
	bRaceKey                     // an outside writer changes the key it guards during its fire
	bPermanent                   // Retry with a Permanent error: a dead letter at once
	behaviours
)

func (b behaviour) String() string {
	return [...]string{"write", "counter", "fail-guard", "error", "retry", "reschedule", "race-own", "race-key", "permanent"}[b]
}

// batchFire is one fire the model saw: its timer, behaviour, and the
// outcome batch its handler returned (nil: none).
type batchFire struct {
	run   int
	ref   string
	b     behaviour
	batch *store.Batch
	mark  store.Key
}

type batchModel struct {
	t       *testing.T
	e       *env
	rng     *rand.Rand
	kind    map[string]behaviour
	mu      sync.Mutex
	fires   []batchFire
	run     int
	nfires  int
	layer   *fdblayer.Layer
	counter []store.Key
	// spent lists the permanent failures' fires that saw an attempt
	// recorded: none may.
	spent []string
}

// permanentErr is the error a bPermanent timer's handler fails with.
func permanentErr(ref string) error { return fmt.Errorf("%s fails for good", ref) }

const batchKind = kindA

func (m *batchModel) Kind() timers.Kind { return batchKind }

func (m *batchModel) Fire(ctx context.Context, c *timers.Ctx, dt timers.DueTimer) (timers.Fired, error) {
	m.mu.Lock()
	m.nfires++
	mark := store.Key(fmt.Sprintf("mark/%s/%04d", dt.Reference, m.nfires))
	b := m.kind[dt.Reference]
	f := batchFire{run: m.run, ref: dt.Reference, b: b, mark: mark}
	m.mu.Unlock()
	batch := store.NewBatch().Put(mark, store.Value("1"))
	var fired timers.Fired = timers.Done{Batch: batch}
	switch b {
	case bWrite:
		batch.Put(store.Key("out/"+dt.Reference), store.Value(mark))
	case bCounter:
		key := m.counter[len(dt.Reference)%len(m.counter)]
		v, _, err := c.Store.Get(ctx, c.Partition, key)
		if err != nil {
			return nil, err
		}
		batch.Require(store.Guard(key, v)).Put(key, next(v))
	case bFailGuard:
		batch.Require(store.Equals(store.Key("never"), store.Value("x")))
	case bError:
		batch = nil
		fired = nil
	case bRetry:
		batch, fired = nil, timers.Retry{}
	case bPermanent:
		if dt.Attempts != 0 {
			m.mu.Lock()
			m.spent = append(m.spent, fmt.Sprintf("%s: attempt %d, last error %q", dt.Reference, dt.Attempts+1, dt.LastError))
			m.mu.Unlock()
		}
		batch, fired = nil, timers.Retry{Err: timers.Permanent(permanentErr(dt.Reference))}
	case bReschedule:
		batch.Put(store.Key("out/"+dt.Reference), store.Value(mark))
		fired = timers.Reschedule{DueAt: dt.DueAt.Add(50 * time.Second), Value: dt.Value, Batch: batch}
	case bRaceOwn:
		// Another writer gives the timer a new value meanwhile.
		m.e.schedule(m.t, timers.Timer{Kind: batchKind, Reference: dt.Reference, DueAt: dt.DueAt, Value: store.Value(string(mark))})
	case bRaceKey:
		key := store.Key("ext/" + dt.Reference)
		v, _, err := c.Store.Get(ctx, c.Partition, key)
		if err != nil {
			return nil, err
		}
		m.e.apply(m.t, store.NewBatch().Put(key, next(v)))
		batch.Require(store.Guard(key, v))
	}
	f.batch = batch
	m.mu.Lock()
	m.fires = append(m.fires, f)
	m.mu.Unlock()
	if fired == nil {
		return nil, errors.New("the handler fails")
	}
	return fired, nil
}

// next is a counter's value after v (absent: 0).
func next(v store.Value) store.Value {
	n := uint64(0)
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	return binary.BigEndian.AppendUint64(nil, n+1)
}

func TestBatchedOutcomesModel(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	staged := map[string]int{}
	for _, eng := range []testengine.Engine{testengine.Memory, testengine.MVCC} {
		t.Run(eng.Name, func(t *testing.T) {
			for seed := range seeds {
				if err := playBatchSeed(t, eng, uint64(seed), staged); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		})
	}
	t.Logf("staged: %v", staged)
	for _, what := range []string{"failed guard beside a landed outcome", "split at a written key", "claimed", "store failure", "failed dead letter read", "dead letter"} {
		if staged[what] == 0 {
			t.Errorf("no seed staged a %s", what)
		}
	}
}

// TestBatchedOutcomesModelCatchesADroppedNeighbour: a version of the
// commit that drops, with a timer whose guard failed, its neighbour's
// outcome is caught.
func TestBatchedOutcomesModelCatchesADroppedNeighbour(t *testing.T) {
	restore := timers.DropRacedNeighbourToo()
	defer restore()
	for seed := range 30 {
		if err := playBatchSeed(t, testengine.Memory, uint64(seed), map[string]int{}); err != nil {
			t.Logf("seed %d caught the mutant: %v", seed, err)
			return
		}
	}
	t.Fatal("no seed caught an outcome dropped beside a failed guard")
}

func playBatchSeed(t *testing.T, eng testengine.Engine, seed uint64, staged map[string]int) error {
	e := newEnv(t, eng.Open(t, "batch.bbolt"), now)
	rng := rand.New(rand.NewPCG(seed, 23))
	m := &batchModel{t: t, e: e, rng: rng, kind: map[string]behaviour{}, layer: e.inner.(*fdblayer.Layer),
		counter: []store.Key{store.Key("counter/a"), store.Key("counter/b")}}
	n := 4 + rng.IntN(60)
	for i := range n {
		ref := fmt.Sprintf("t%03d", i)
		b := behaviour(rng.IntN(int(behaviours)))
		if rng.IntN(3) == 0 {
			b = bWrite
		}
		m.kind[ref] = b
		e.schedule(t, timers.Timer{Kind: batchKind, Reference: ref, DueAt: now.Add(-time.Duration(rng.IntN(20)) * time.Millisecond)})
	}
	reg := registry(t, m)
	model := map[string]string{}
	clk := e.clock
	for run := range 4 {
		m.mu.Lock()
		m.run, m.fires = run, m.fires[:0]
		m.mu.Unlock()
		failing := rng.IntN(4) == 0
		e.faults.Clear()
		if failing {
			e.faults.FailNth(storetest.MethodApply, 1+rng.IntN(3), nil)
			staged["store failure"]++
		}
		if rng.IntN(3) == 0 {
			// The store fails some reads of a dead letter's key, briefly:
			// each by the seed's coin, drawn here so that a seed replays.
			coins := make([]bool, 64)
			for i := range coins {
				coins[i] = rng.IntN(2) == 0
			}
			var mu sync.Mutex
			e.faults.FailWhen(storetest.MethodGet, func(c storetest.Call) bool {
				if _, err := gen.ParseDeadLetterKey(c.Key); err != nil {
					return false
				}
				mu.Lock()
				defer mu.Unlock()
				fail := coins[0]
				coins = append(coins[1:], fail)
				if fail {
					staged["failed dead letter read"]++
				}
				return fail
			}, nil)
		}
		claimed := rng.IntN(2) == 0
		var rep timers.Report
		var err error
		if claimed {
			staged["claimed"]++
			s, serr := timers.NewScheduler(timers.SchedulerConfig{Store: e.faults, Registry: reg, Owner: "model", Workers: 1,
				Clock: clk, Logger: e.logger, Metrics: e.metrics})
			require.NoError(t, serr)
			var tr timers.TickReport
			tr, err = s.Tick(e.ctx)
			rep = tr.Timers
		} else {
			rep, err = timers.RunDue(e.ctx, e.faults, e.p, reg, clk.Now(), timers.RunConfig{Clock: clk, Logger: e.logger})
		}
		if err != nil && !errors.Is(err, storetest.ErrInjected) {
			return fmt.Errorf("run %d: %v", run, err)
		}
		e.faults.Clear()
		if err := m.check(run, model, rep, err == nil && !failing, staged); err != nil {
			return fmt.Errorf("run %d (claimed %v): %v", run, claimed, err)
		}
		if err := timerstest.CheckDueIndex(e.ctx, e.inner, []store.Partition{e.p}); err != nil {
			return fmt.Errorf("run %d: %v", run, err)
		}
		clk.Advance(2 * time.Second)
	}
	return nil
}

// check replays the run's landed outcomes on model (see the design note
// above TestBatchedOutcomesModel).
func (m *batchModel) check(run int, model map[string]string, rep timers.Report, clean bool, staged map[string]int) error {
	ctx := context.Background()
	landed, fired := 0, 0
	anyRaced, anyLanded := false, false
	written := map[string]bool{}
	for _, f := range m.fires {
		if f.batch == nil {
			continue
		}
		_, ok, err := m.layer.Get(ctx, m.e.p, f.mark)
		if err != nil {
			return err
		}
		if !ok {
			if f.b == bWrite || f.b == bReschedule {
				if clean {
					return fmt.Errorf("%s (%v): its outcome, which depends on no other, did not land", f.ref, f.b)
				}
			}
			if f.b == bFailGuard || f.b == bRaceKey || f.b == bRaceOwn {
				anyRaced = true
			}
			if f.b == bCounter && written[string(f.batch.Preconditions[0].Key)] {
				staged["split at a written key"]++
			}
			continue
		}
		switch f.b {
		case bFailGuard, bRaceKey, bRaceOwn:
			return fmt.Errorf("%s (%v): its outcome landed although its guard failed", f.ref, f.b)
		}
		anyLanded = true
		landed++
		if f.b != bRetry {
			fired++
		}
		for _, c := range f.batch.Preconditions {
			if !strings.HasPrefix(string(c.Key), "counter/") {
				continue
			}
			cur, ok := model[string(c.Key)]
			var v store.Value
			if ok {
				v = store.Value(cur)
			}
			if !c.Holds(v) {
				return fmt.Errorf("%s (%v): landed, but its guard %v does not hold after the outcomes before it", f.ref, f.b, c)
			}
		}
		for _, w := range f.batch.Writes {
			if strings.HasPrefix(string(w.Key), "counter/") || strings.HasPrefix(string(w.Key), "out/") {
				model[string(w.Key)] = string(w.Value)
				written[string(w.Key)] = true
			}
		}
	}
	if anyRaced && anyLanded {
		staged["failed guard beside a landed outcome"]++
	}
	m.mu.Lock()
	spent := m.spent
	m.mu.Unlock()
	if len(spent) > 0 {
		return fmt.Errorf("a permanent failure spent an attempt: %v", spent)
	}
	dls, _, err := timers.DeadLetters(ctx, store.ReaderOf(m.layer, m.e.p), nil, 1000)
	if err != nil {
		return err
	}
	for _, d := range dls {
		if b := m.kind[d.Reference]; b != bPermanent {
			return fmt.Errorf("%s (%v) is a dead letter (%s)", d.Reference, b, d.LastError)
		}
		if want := permanentErr(d.Reference).Error(); d.LastError != want || !d.Permanent || d.Attempts != 1 {
			return fmt.Errorf("%s: dead letter after %d attempts, permanent %v, last error %q; want 1, true, %q",
				d.Reference, d.Attempts, d.Permanent, d.LastError, want)
		}
		staged["dead letter"]++
	}
	if clean && rep.Fired != fired {
		return fmt.Errorf("the report counts %d fired, %d outcomes landed", rep.Fired, fired)
	}
	// The store holds what the model does.
	for _, prefix := range []string{"counter/", "out/"} {
		page, err := m.layer.Scan(ctx, m.e.p, store.Key(prefix), store.Key(prefix[:len(prefix)-1]+"0"), nil, 10_000)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, kv := range page.Entries {
			got[string(kv.Key)] = string(kv.Value)
		}
		for k, v := range model {
			if strings.HasPrefix(k, prefix) && got[k] != v {
				return fmt.Errorf("%s holds %x, the sequential replay %x", k, got[k], v)
			}
		}
		if extra := keysNotIn(got, model); len(extra) > 0 {
			return fmt.Errorf("the store holds %v, which no landed outcome wrote", extra)
		}
	}
	_ = landed
	return nil
}

func keysNotIn(got, model map[string]string) []string {
	var out []string
	for k := range got {
		if _, ok := model[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
