package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// lanesScenario is a relay's queue, its targets' state and faults, and a
// budget: what TestConcurrentLanesDeliverWhatSequentialDeliveryDoes plays
// at several concurrencies.
type lanesScenario struct {
	targets int
	rows    []int          // each row's target
	marks   map[int]uint64 // high-water marks set beforehand: duplicates
	failAt  map[int]int    // a target's calls from this one (1-based) on fail
	method  map[int]storetest.Method
	budget  relay.Budget
}

func randomLanesScenario(r *rand.Rand) lanesScenario {
	sc := lanesScenario{
		targets: 1 + r.IntN(24),
		marks:   map[int]uint64{},
		failAt:  map[int]int{},
		method:  map[int]storetest.Method{},
		budget:  relay.Budget{MaxRows: 1 + r.IntN(12), MaxTargets: 1 + r.IntN(10)},
	}
	if r.IntN(3) == 0 {
		sc.budget.MaxTargetCalls = 2 + r.IntN(4)
	}
	for range 1 + r.IntN(70) {
		sc.rows = append(sc.rows, r.IntN(sc.targets))
	}
	for tg := range sc.targets {
		switch r.IntN(6) {
		case 0:
			sc.failAt[tg], sc.method[tg] = 1+r.IntN(3), applyMethod
		case 1:
			sc.failAt[tg], sc.method[tg] = 1+r.IntN(3), storetest.MethodGet
		case 2:
			// Its rows up to some sequence were delivered before.
			sc.marks[tg] = uint64(r.IntN(len(sc.rows) + 1))
		}
	}
	return sc
}

// lanesTarget is target i of a scenario.
func lanesTarget(i int) store.Partition {
	return refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("lane%02d", i))}
}

// play queues the scenario's rows and fires the relay up to 12 times, its
// lanes run by a turnstile whose order rng chooses (nil: one lane at a
// time), and returns what the fires did and what they left.
func (sc lanesScenario) play(t *testing.T, concurrency int, rng *rand.Rand) string {
	e := newEnv(t, testengine.Memory.Open, func(_ testing.TB, e *env, _ func(testing.TB, string) kv.Engine) {
		e.hc.Hook = relay.NoHook{} // the audit hook numbers batches in the order they come
		e.hc.Budget = sc.budget
		e.hc.Budget.Concurrency = concurrency
		if rng != nil {
			e.lanes = func() relay.LaneRunner { return newTurnstile(rng) }
		}
	})
	var rows []row
	for i, tg := range sc.rows {
		rows = append(rows, put(lanesTarget(tg), "k", fmt.Sprint(i+1), fmt.Sprintf("r%d", i+1), "v"))
	}
	e.queue(t, rows...)
	for tg, mark := range sc.marks {
		if mark > 0 {
			e.setHighWater(t, lanesTarget(tg), mark)
		}
	}
	// Faults by target and call: the same whatever order the lanes run
	// in. Every target call yields to the turnstile first.
	var mu sync.Mutex
	calls := map[string]int{}
	fails := func(m storetest.Method) func(storetest.Call) bool {
		return func(c storetest.Call) bool {
			if m == applyMethod && !isApply(c) {
				return false // a read of duplicates or past a budget: no apply
			}
			mu.Lock()
			defer mu.Unlock()
			id := string(ids(c.Partition)[0])
			calls[id]++
			for tg, at := range sc.failAt {
				if id == string(ids(lanesTarget(tg))[0]) && sc.method[tg] == m && calls[id] >= at {
					return true
				}
			}
			return false
		}
	}
	yield := func(ctx context.Context) {
		if lt := laneOf(ctx); lt != nil {
			lt.yield()
		}
	}
	e.target.BeforeApply(func(ctx context.Context, _ store.Partition, _ *store.Batch) error { yield(ctx); return nil })
	e.target.AfterRead(func(ctx context.Context, _ storetest.Call) error { yield(ctx); return nil })
	e.target.FailWhen(applyMethod, fails(applyMethod), nil)
	e.target.FailWhen(storetest.MethodGet, fails(storetest.MethodGet), nil)

	var b strings.Builder
	for fire := range 12 {
		due, ok := e.timerDue(t)
		if !ok {
			break
		}
		if due.After(e.now()) {
			e.clock.Set(due)
		}
		rep := e.run(t)
		st := e.scanState(t)
		fmt.Fprintf(&b, "fire %d: fired %d retried %d raced %d; state %d/%d blocked %d; queued %v\n",
			fire, rep.Fired, rep.Retried, rep.Raced, st.Cursor, st.CycleEnd, len(st.Blocked), e.queued(t))
	}
	for tg := range sc.targets {
		page, err := e.tinner.Scan(e.ctx, lanesTarget(tg), nil, nil, nil, 1000)
		require.NoError(t, err)
		fmt.Fprintf(&b, "target %d: hw %d,", tg, e.highWater(t, lanesTarget(tg)))
		for _, kv := range page.Entries {
			if _, err := gen.ParseRelayHighWaterKey(kv.Key); err != nil {
				fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Concurrency changes when target batches are applied, never which: from
// random queues over up to 24 targets, with targets that fail (at once or
// after some calls, reading their marks or applying), duplicates, and
// random row, target and call budgets (so that fires pause, block
// targets, reach the blocked-target cap and span cycles), the relay with
// 2 or 8 lanes, run in an order a seed chooses, leaves every fire's
// outcome, scan state and queue, and every target, exactly as delivering
// one target after another does.
func TestConcurrentLanesDeliverWhatSequentialDeliveryDoes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 150
	if testing.Short() {
		n = 40
	}
	for i := range n {
		sc := randomLanesScenario(r)
		want := sc.play(t, 1, nil)
		for _, lanes := range []int{2, 8} {
			got := sc.play(t, lanes, rand.New(rand.NewPCG(uint64(i), uint64(lanes))))
			require.Equal(t, want, got, "scenario %d with %d lanes: %+v", i, lanes, sc)
		}
	}
}

// The blocked-target cap needs many failing targets: with all of them
// failing among 20 targets, a fire blocks MaxBlockedTargets and stops at
// the first undelivered row of the next one, as one lane would.
func TestConcurrentLanesStopAtTheBlockedTargetCap(t *testing.T) {
	sc := lanesScenario{targets: relay.MaxBlockedTargets + 4, failAt: map[int]int{}, method: map[int]storetest.Method{}, marks: map[int]uint64{},
		budget: relay.Budget{MaxTargets: 64}}
	for tg := range sc.targets {
		sc.rows = append(sc.rows, tg, tg)
		if tg != relay.MaxBlockedTargets+2 {
			sc.failAt[tg], sc.method[tg] = 1, applyMethod
		}
	}
	want := sc.play(t, 1, nil)
	require.Contains(t, want, fmt.Sprintf("blocked %d", relay.MaxBlockedTargets))
	for seed := range uint64(10) {
		require.Equal(t, want, sc.play(t, 8, rand.New(rand.NewPCG(seed, 1))), "order %d", seed)
	}
}

// With the default runner, lanes run at once: two targets' hooks meet
// inside one fire (the first called waits, up to 10 s, for the other to be
// called), on a target store that overlaps calls (the MVCC engine; a hook
// runs inside its target's transaction).
func TestLanesRunAtOnceWhenTargetCallsWait(t *testing.T) {
	met := make(chan struct{})
	var once sync.Once
	arrived := map[string]chan struct{}{string(ids(ta)[0]): make(chan struct{}), string(ids(tb)[0]): make(chan struct{})}
	e := newEnv(t, testengine.MVCC.Open)
	e.audit.beforeApply = func(target store.Partition, _ []relay.Row, _ []store.KeyValue, _ *store.Batch) error {
		me := string(ids(target)[0])
		close(arrived[me])
		for id, ch := range arrived {
			if id == me {
				continue
			}
			select {
			case <-ch:
				continue // the second to arrive: waiting proves nothing
			default:
			}
			// The first to arrive: the other arrives while it waits only if
			// the lanes run at once.
			select {
			case <-ch:
				once.Do(func() { close(met) })
			case <-time.After(10 * time.Second):
			}
		}
		return nil
	}
	e.queue(t, put(ta, "k", "a"), put(tb, "k", "b"))
	e.run(t)
	select {
	case <-met:
	default:
		t.Fatal("the two targets' lanes did not run at once")
	}
	e.requireAppliedOnce(t, ta, 1)
	e.requireAppliedOnce(t, tb, 2)
}
