package timers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// queueRecorder is a recorder of a library kind: a LibraryHandler, as
// the relay and outcome delivery are.
type queueRecorder struct{ *recorder }

func (queueRecorder) ReservedKind() bool { return true }

// members reads MembersPartition, where kind pauses live.
func (e *schedEnv) members() store.Reader { return store.ReaderOf(e.layer, timers.MembersPartition) }

// pauseKind pauses k through timers.PauseKind, applied to MembersPartition.
func (e *schedEnv) pauseKind(t testing.TB, k timers.Kind) {
	t.Helper()
	b := store.NewBatch()
	_, err := timers.PauseKind(e.ctx, e.members(), b, k, timers.PauseNote{At: e.clock.Now(), Who: "ops", Reason: "carrier down"})
	require.NoError(t, err)
	e.apply(t, timers.MembersPartition, b)
}

// resumeKind resumes k through timers.ResumeKind.
func (e *schedEnv) resumeKind(t testing.TB, k timers.Kind) {
	t.Helper()
	b := store.NewBatch()
	p, err := timers.ResumeKind(e.ctx, e.members(), b, k)
	require.NoError(t, err)
	require.Equal(t, "ops", p.Who)
	e.apply(t, timers.MembersPartition, b)
}

// pausePartition and resumePartition pause and resume p's queues.
func (e *schedEnv) pausePartition(t testing.TB, p store.Partition) {
	t.Helper()
	b := store.NewBatch()
	_, err := timers.PausePartition(e.ctx, store.ReaderOf(e.layer, p), b, timers.PauseNote{At: e.clock.Now(), Who: "ops", Reason: "webhook down"})
	require.NoError(t, err)
	e.apply(t, p, b)
}

func (e *schedEnv) resumePartition(t testing.TB, p store.Partition) {
	t.Helper()
	b := store.NewBatch()
	_, err := timers.ResumePartition(e.ctx, store.ReaderOf(e.layer, p), b, e.clock.Now())
	require.NoError(t, err)
	e.apply(t, p, b)
}

// tickAll ticks every scheduler at once, then checks the due index
// invariant, and returns their reports summed.
func (e *schedEnv) tickAll(t testing.TB, ss ...*timers.Scheduler) timers.TickReport {
	t.Helper()
	reps := make([]timers.TickReport, len(ss))
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { reps[i], errs[i] = s.Tick(e.ctx) })
	}
	wg.Wait()
	var sum timers.TickReport
	for i := range ss {
		require.NoError(t, errs[i])
		sum.Claimed += reps[i].Claimed
		sum.Timers = timers.AddReports(sum.Timers, reps[i].Timers)
	}
	e.checkDueIndex(t)
	return sum
}

// firesOf counts a recorder's fires by reference.
func firesOf(r *recorder) map[string]int {
	n := map[string]int{}
	for _, f := range r.seen() {
		n[f.Reference]++
	}
	return n
}

// timerRows lists p's timer rows (kind, reference, due, value), as the
// store holds them.
func (e *schedEnv) timerRows(t testing.TB, p store.Partition) []string {
	t.Helper()
	start, end := gen.ClassRange(gen.TagTimerKey)
	page, err := e.layer.Scan(e.ctx, p, start, end, nil, 1000)
	require.NoError(t, err)
	var rows []string
	for _, kv := range page.Entries {
		k, err := gen.ParseTimerKey(kv.Key)
		require.NoError(t, err)
		rows = append(rows, fmt.Sprintf("%d %s %d %s", k.Kind, k.Reference, k.DueAtMs, kv.Value))
	}
	return rows
}

// TestAPausedKindWaitsAndFiresOnceOnResume: three schedulers share a
// store of eight partitions, each holding timers of two kinds, due and
// later, one kind paused for the whole store. While it is paused none of
// its timers fires, fails, moves or is lost, the other kind's fire when
// due, and a partition is claimed only when a timer the pause leaves out
// falls due (never at every tick); once resumed, every paused timer fires
// exactly once. The due index invariant holds after every step.
func TestAPausedKindWaitsAndFiresOnceOnResume(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		const n = 8
		recA, recB := &recorder{kind: kindA}, &recorder{kind: kindB}
		reg := registry(t, recA, recB)
		ss := []*timers.Scheduler{
			e.scheduler(t, "a", reg, nil),
			e.scheduler(t, "b", reg, func(c *timers.SchedulerConfig) { c.ClaimBatch = 1 }),
			e.scheduler(t, "c", reg, nil),
		}
		var ps []store.Partition
		for i := range n {
			p := part(i)
			ps = append(ps, p)
			e.schedule(t, p, timers.Timer{Kind: kindA, Reference: fmt.Sprintf("a%d/early", i), DueAt: now.Add(-time.Second), Value: store.Value("box")})
			e.schedule(t, p, timers.Timer{Kind: kindA, Reference: fmt.Sprintf("a%d/late", i), DueAt: now.Add(30 * time.Second)})
			e.schedule(t, p, timers.Timer{Kind: kindB, Reference: fmt.Sprintf("b%d/early", i), DueAt: now.Add(-time.Second)})
			e.schedule(t, p, timers.Timer{Kind: kindB, Reference: fmt.Sprintf("b%d/late", i), DueAt: now.Add(20 * time.Second)})
		}
		e.pauseKind(t, kindA)
		pausedRows := map[string][]string{}
		for _, p := range ps {
			for _, r := range e.timerRows(t, p) {
				if strings.HasPrefix(r, fmt.Sprint(uint16(kindA))+" ") {
					pausedRows[store.PartitionName(p)] = append(pausedRows[store.PartitionName(p)], r)
				}
			}
		}

		// Paused for a minute, in steps of 5 s: each partition is claimed
		// three times (its due timers at 0 s, the other kind's at 20 s,
		// the paused kind's late timer at 30 s), never more.
		claims, lastClaim := 0, time.Time{}
		for step := range 12 {
			rep := e.tickAll(t, ss...)
			claims += rep.Claimed
			if rep.Claimed > 0 {
				lastClaim = e.clock.Now()
			}
			assert.Zero(t, rep.Timers.Failed+rep.Timers.Retried+rep.Timers.DeadLettered+rep.Timers.Held, "step %d: %+v", step, rep.Timers)
			e.clock.Advance(5 * time.Second)
		}
		assert.Empty(t, recA.seen(), "a paused kind fires nothing")
		assert.Equal(t, 3*n, claims, "a partition is claimed when a timer the pause leaves out falls due, and for nothing else")
		assert.Equal(t, now.Add(30*time.Second), lastClaim)
		b := firesOf(recB)
		for i := range n {
			assert.Equal(t, 1, b[fmt.Sprintf("b%d/early", i)])
			assert.Equal(t, 1, b[fmt.Sprintf("b%d/late", i)])
		}
		for _, p := range ps {
			assert.Equal(t, pausedRows[store.PartitionName(p)], e.timerRows(t, p), "the paused timers keep their place and value")
			at, ok := e.wake(t, p)
			w := timers.DescribeWake(at, ok)
			assert.True(t, w.Paused && w.At.IsZero(), "%s: wake %+v: paused, with no other timer", store.PartitionName(p), w)
			dls, _, err := timers.DeadLetters(e.ctx, store.ReaderOf(e.layer, p), nil, 10)
			require.NoError(t, err)
			assert.Empty(t, dls)
		}
		assert.Zero(t, e.metrics.CounterSum(telemetry.MetricTimersFailed))

		// Resumed: every paused timer fires once, at the next tick, and
		// nothing is left.
		e.resumeKind(t, kindA)
		rep := e.tickAll(t, ss...)
		assert.Equal(t, n, rep.Claimed)
		assert.Equal(t, 2*n, rep.Timers.Fired)
		for range 3 {
			e.clock.Advance(5 * time.Second)
			assert.Zero(t, e.tickAll(t, ss...).Claimed)
		}
		a := firesOf(recA)
		assert.Len(t, a, 2*n)
		for ref, k := range a {
			assert.Equal(t, 1, k, "%s fired %d times", ref, k)
		}
		for _, p := range ps {
			assert.Empty(t, e.timerRows(t, p))
			_, ok := e.wake(t, p)
			assert.False(t, ok)
		}
		assert.Empty(t, recA.overlapping())
		assert.Empty(t, recB.overlapping())
	})
}

// TestAResumeDuringARunIsNotLost: a scheduler whose view of the pauses
// predates a resume (the resume lands while it fires) leaves the resumed
// kind's timers under the old pause generation; its next tick, and any
// other scheduler's, finds the partition due and fires them once.
func TestAResumeDuringARunIsNotLost(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "paused", DueAt: now.Add(-2 * time.Second)})
		e.schedule(t, p, timers.Timer{Kind: kindB, Reference: "resumes", DueAt: now.Add(-time.Second)})
		e.pauseKind(t, kindA)
		recA := &recorder{kind: kindA}
		recB := &recorder{kind: kindB, during: func(*timers.Ctx, timers.DueTimer) { e.resumeKind(t, kindA) }}
		s := e.scheduler(t, "a", registry(t, recA, recB), nil)

		rep := e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired)
		assert.Equal(t, 1, rep.Timers.Paused, "left for the pause the run read")
		assert.Empty(t, recA.seen())
		at, ok := e.wake(t, p)
		w := timers.DescribeWake(at, ok)
		pauses, err := timers.ReadPauses(e.ctx, e.members())
		require.NoError(t, err)
		assert.True(t, w.Paused && pauses.Ended(w), "wake %+v under generation %d: one the resume ended", w, pauses.Generation)

		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired)
		assert.Equal(t, []string{"paused"}, partitionsRefs(recA.seen()))
		assert.Zero(t, e.tick(t, s).Claimed)
	})
}

func partitionsRefs(fs []fire) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Reference
	}
	return out
}

// TestATimerWrittenIntoAPausedPartitionFires: a timer of a kind not
// paused, written into a partition left paused, fires at its due time,
// and the partition is left paused again.
func TestATimerWrittenIntoAPausedPartitionFires(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "paused", DueAt: now.Add(-time.Second)})
		e.pauseKind(t, kindA)
		recA, recB := &recorder{kind: kindA}, &recorder{kind: kindB}
		s := e.scheduler(t, "a", registry(t, recA, recB), nil)
		assert.Equal(t, 1, e.tick(t, s).Timers.Paused)
		assert.Zero(t, e.tick(t, s).Claimed)

		e.schedule(t, p, timers.Timer{Kind: kindB, Reference: "new", DueAt: now.Add(10 * time.Second)})
		at, _ := e.wake(t, p)
		assert.Equal(t, now.Add(-time.Second), at, "a timer write makes the partition due at its earliest paused timer (the paused wake time's ceiling)")
		rep := e.tick(t, s)
		assert.Equal(t, 1, rep.Claimed, "claimed once, to count the new timer")
		assert.Equal(t, 1, rep.Timers.Paused)
		at, ok := e.wake(t, p)
		assert.Equal(t, timers.WakeState{Paused: true, At: now.Add(10 * time.Second)}, timers.DescribeWake(at, ok))
		assert.Zero(t, e.tick(t, s).Claimed)
		e.clock.Advance(10 * time.Second)
		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired)
		assert.Equal(t, 1, rep.Timers.Paused)
		assert.Empty(t, recA.seen())
		at, ok = e.wake(t, p)
		assert.True(t, timers.DescribeWake(at, ok).Paused)
	})
}

// TestAPausedPartitionsQueuesWait: a partition's pause holds its queue
// timers (the library's kinds) and nothing else, in a batch of claims
// with a partition not paused; the run already firing when the pause
// lands finishes; a resume during a run is not lost; resumed, the queue
// timers fire once.
func TestAPausedPartitionsQueuesWait(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		relay := queueRecorder{&recorder{kind: timers.KindRelay}}
		// The runs of one tick fire side by side: the hooks' partitions
		// are taken under mu.
		var (
			mu                        sync.Mutex
			pauseDuring, resumeDuring store.Partition
		)
		take := func(p *store.Partition, c *timers.Ctx) store.Partition {
			mu.Lock()
			defer mu.Unlock()
			if q := *p; q != nil && store.PartitionName(q) == store.PartitionName(c.Partition) {
				*p = nil
				return q
			}
			return nil
		}
		recA := &recorder{kind: kindA, during: func(c *timers.Ctx, _ timers.DueTimer) {
			if p := take(&pauseDuring, c); p != nil {
				e.pausePartition(t, p)
			}
			if p := take(&resumeDuring, c); p != nil {
				e.resumePartition(t, p)
			}
		}}
		reg := &timers.Registry{}
		require.NoError(t, reg.Register(relay, timers.KindConfig{}))
		require.NoError(t, reg.Register(recA, timers.KindConfig{}))
		ss := []*timers.Scheduler{e.scheduler(t, "a", reg, nil), e.scheduler(t, "b", reg, nil)}
		paused, open, late := part(0), part(1), part(2)
		for _, p := range []store.Partition{paused, open, late} {
			e.schedule(t, p, timers.Timer{Kind: timers.KindRelay, DueAt: now.Add(-time.Second)})
			e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "job", DueAt: now.Add(-time.Second)})
		}
		e.pausePartition(t, paused)
		// late is paused while its run fires: that run's relay fires.
		mu.Lock()
		pauseDuring = late
		mu.Unlock()

		rep := e.tickAll(t, ss...)
		assert.Equal(t, 3, rep.Claimed)
		assert.Equal(t, 1, rep.Timers.Paused)
		fired := map[string]int{}
		for _, f := range relay.seen() {
			fired[f.Partition]++
		}
		assert.Equal(t, map[string]int{store.PartitionName(open): 1, store.PartitionName(late): 1}, fired)
		assert.Len(t, recA.seen(), 3, "a partition's pause holds its queues only")
		e.clock.Advance(time.Second)
		assert.Zero(t, e.tickAll(t, ss...).Claimed, "a paused queue is not claimed at every tick")

		// late's queue is paused now: its next relay timer waits.
		e.schedule(t, late, timers.Timer{Kind: timers.KindRelay, DueAt: e.clock.Now()})
		e.schedule(t, late, timers.Timer{Kind: kindA, Reference: "job2", DueAt: e.clock.Now()})
		mu.Lock()
		resumeDuring = paused
		mu.Unlock()
		e.schedule(t, paused, timers.Timer{Kind: kindA, Reference: "job2", DueAt: e.clock.Now()})
		// One scheduler, so that none claims paused again in this tick
		// once its resume landed.
		rep = e.tickAll(t, ss[0])
		assert.Equal(t, 2, rep.Timers.Paused, "late's relay, and paused's, whose run read the pause")
		assert.Equal(t, 2, len(relay.seen()))

		// paused was resumed during its run: the release keeps the
		// resume's wake time, and the next tick fires its relay once.
		e.clock.Advance(time.Second)
		rep = e.tickAll(t, ss...)
		assert.Equal(t, 1, rep.Timers.Fired)
		e.resumePartition(t, late)
		e.tickAll(t, ss...)
		fired = map[string]int{}
		for _, f := range relay.seen() {
			fired[f.Partition]++
		}
		assert.Equal(t, map[string]int{store.PartitionName(paused): 1, store.PartitionName(open): 1, store.PartitionName(late): 2}, fired)
		for _, p := range []store.Partition{paused, open, late} {
			assert.Empty(t, e.timerRows(t, p))
		}
		e.clock.Advance(time.Second)
		assert.Zero(t, e.tickAll(t, ss...).Claimed)
	})
}

// TestRunDueAloneKnowsNoPause: pauses are the Scheduler's; RunDue fires
// what is due.
func TestRunDueAloneKnowsNoPause(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now})
		e.pauseKind(t, kindA)
		e.pausePartition(t, p)
		rec := &recorder{kind: kindA}
		rep, err := timers.RunDue(e.ctx, e.layer, p, registry(t, rec), now, timers.RunConfig{Clock: e.clock, Logger: e.logger})
		require.NoError(t, err)
		assert.Equal(t, 1, rep.Fired)
		assert.Zero(t, rep.Paused)
	})
}

// TestPauseOperationsRefuse: each pause operation refuses what it cannot
// do, adding nothing to the batch, and guards what it read.
func TestPauseOperationsRefuse(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		note := timers.PauseNote{At: now, Who: "ops", Reason: "why"}
		empty := func(b *store.Batch) {
			t.Helper()
			assert.Zero(t, b.Ops())
			assert.Empty(t, b.Preconditions)
		}
		b := store.NewBatch()
		_, err := timers.PauseKind(e.ctx, store.ReaderOf(e.layer, p), b, kindA, note)
		assert.ErrorIs(t, err, store.ErrInvalid, "a kind's pause lives in MembersPartition")
		empty(b)
		_, err = timers.PauseKind(e.ctx, e.members(), b, 0, note)
		assert.ErrorIs(t, err, store.ErrInvalid)
		_, err = timers.PauseKind(e.ctx, e.members(), b, kindA, timers.PauseNote{At: now, Who: strings.Repeat("w", timers.MaxPauseWho+1)})
		assert.ErrorIs(t, err, store.ErrInvalid)
		_, err = timers.PausePartition(e.ctx, store.ReaderOf(e.layer, p), b, timers.PauseNote{At: now, Reason: strings.Repeat("r", timers.MaxPauseReason+1)})
		assert.ErrorIs(t, err, store.ErrInvalid)
		_, err = timers.PausePartition(e.ctx, store.ReaderOf(e.layer, p), b, timers.PauseNote{At: time.Unix(-1, 0)})
		assert.ErrorIs(t, err, store.ErrInvalid)
		_, err = timers.ResumeKind(e.ctx, e.members(), b, kindA)
		assert.ErrorIs(t, err, timers.ErrNotPaused)
		_, err = timers.ResumePartition(e.ctx, store.ReaderOf(e.layer, p), b, now)
		assert.ErrorIs(t, err, timers.ErrNotPaused)
		empty(b)

		e.pauseKind(t, kindA)
		e.pausePartition(t, p)
		got, err := timers.PauseKind(e.ctx, e.members(), b, kindA, note)
		assert.ErrorIs(t, err, timers.ErrPaused)
		assert.Equal(t, "carrier down", got.Reason, "the pause in the way")
		got, err = timers.PausePartition(e.ctx, store.ReaderOf(e.layer, p), b, note)
		assert.ErrorIs(t, err, timers.ErrPaused)
		assert.Equal(t, "webhook down", got.Reason)
		empty(b)
		pauses, err := timers.ReadPauses(e.ctx, e.members())
		require.NoError(t, err)
		require.Len(t, pauses.Kinds, 1)
		assert.Equal(t, timers.Pause{Kind: kindA, At: now, Who: "ops", Reason: "carrier down"}, withoutRecord(pauses.Kinds[0]))
		_, err = timers.ReadPauses(e.ctx, store.ReaderOf(e.layer, p))
		assert.ErrorIs(t, err, store.ErrInvalid)

		// A resume planned on a pause that changed since is refused by its
		// guard, and so is a second pause planned beside the first.
		stale := store.NewBatch()
		_, err = timers.ResumeKind(e.ctx, e.members(), stale, kindA)
		require.NoError(t, err)
		e.resumeKind(t, kindA)
		e.pauseKind(t, kindA)
		out, err := e.layer.Apply(e.ctx, timers.MembersPartition, stale)
		require.NoError(t, err)
		assert.False(t, out.Committed(), "a resume of a pause made again since")
		twice := store.NewBatch()
		_, err = timers.PauseKind(e.ctx, e.members(), twice, kindB, note)
		require.NoError(t, err)
		e.pauseKind(t, kindB)
		out, err = e.layer.Apply(e.ctx, timers.MembersPartition, twice)
		require.NoError(t, err)
		assert.False(t, out.Committed(), "a second pause of one kind")

		// A generation that does not decode fails the resume and every
		// reader, never guessed.
		e.apply(t, timers.MembersPartition, store.NewBatch().Put(gen.AppendPauseGenerationKey(nil), store.Value("junk")))
		_, err = timers.ResumeKind(e.ctx, e.members(), store.NewBatch(), kindA)
		assert.ErrorIs(t, err, store.ErrCorrupt)
		_, err = timers.ReadPauses(e.ctx, e.members())
		assert.ErrorIs(t, err, store.ErrCorrupt)
		e.apply(t, timers.MembersPartition, store.NewBatch().Delete(gen.AppendPauseGenerationKey(nil)))
	})
}

func withoutRecord(p timers.Pause) timers.Pause {
	return timers.Pause{Kind: p.Kind, At: p.At, Who: p.Who, Reason: p.Reason, Corrupt: p.Corrupt}
}

// TestASchedulerThatCannotReadThePausesFiresNothing: a Scheduler that has
// never read the pauses fails its tick rather than fire a paused kind;
// one that read them before goes on with what it read; one whose
// membership renewal fails after a whole read of them knows them.
func TestASchedulerThatCannotReadThePausesFiresNothing(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now})
		e.pauseKind(t, kindA)
		rec := &recorder{kind: kindA}
		s := e.scheduler(t, "a", registry(t, rec), nil)
		members, _ := timers.MembersPartition.AppendTuple(nil)
		broken := errors.New("members unreadable")
		unreadable := func() {
			e.faults.FailWhen(storetest.MethodScan, func(c storetest.Call) bool {
				id, _ := c.Partition.AppendTuple(nil)
				return string(id) == string(members)
			}, broken)
		}
		unreadable()
		_, err := s.Tick(e.ctx)
		assert.ErrorIs(t, err, broken)
		assert.Empty(t, rec.seen())
		e.faults.Clear()
		assert.Equal(t, 1, e.tick(t, s).Timers.Paused)
		unreadable()
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r2", DueAt: now})
		rep := e.tick(t, s)
		assert.Equal(t, 2, rep.Timers.Paused, "the pauses read before hold")
		assert.Empty(t, rec.seen())

		// A membership renewal that fails to commit after a whole read:
		// what the read saw is known, and holds.
		e.faults.Clear()
		e.faults.FailWhen(storetest.MethodTransact, func(c storetest.Call) bool {
			id, _ := c.Partition.AppendTuple(nil)
			return string(id) == string(members)
		}, broken)
		fresh := e.scheduler(t, "b", registry(t, rec), nil)
		e.clock.Advance(time.Minute)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r3", DueAt: e.clock.Now()})
		rep = e.tick(t, fresh)
		assert.Equal(t, 1, rep.Claimed)
		assert.Equal(t, 3, rep.Timers.Paused)
		assert.Empty(t, rec.seen())
		e.faults.Clear()
	})
}

// TestPauseMutantsAreCaught: a release that forgets the timers it left
// for a pause breaks the due index invariant, and one that wakes the
// partition at them claims it at every tick: the checks of the tests
// above catch both.
func TestPauseMutantsAreCaught(t *testing.T) {
	arrange := func(t *testing.T, e *schedEnv) *timers.Scheduler {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "paused", DueAt: now.Add(-time.Second)})
		e.schedule(t, p, timers.Timer{Kind: kindB, Reference: "later", DueAt: now.Add(time.Hour)})
		e.pauseKind(t, kindA)
		return e.scheduler(t, "a", registry(t, &recorder{kind: kindA}, &recorder{kind: kindB}), nil)
	}
	t.Run("forgets", func(t *testing.T) {
		defer timers.ReleasePausedAt("next")()
		forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
			s := arrange(t, e)
			_, err := s.Tick(e.ctx)
			require.NoError(t, err)
			err = timerstest.CheckDueIndex(e.ctx, e.layer, []store.Partition{part(0)})
			var v timerstest.Error
			require.ErrorAs(t, err, &v)
			assert.Contains(t, v[0].Problem, "later than its earliest timer")
			e.exempt(part(0))
		})
	})
	t.Run("spins", func(t *testing.T) {
		defer timers.ReleasePausedAt("paused")()
		forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
			s := arrange(t, e)
			claims := 0
			for range 3 {
				claims += e.tick(t, s).Claimed
				e.clock.Advance(time.Second)
			}
			assert.Equal(t, 3, claims, "claimed at every tick: the tests' count of claims fails")
		})
	})
}

// TestPauseOnMVCCWithSchedulersRunning: on the MVCC engine (FoundationDB's
// transaction semantics), three schedulers tick side by side over twelve
// partitions while timers of two kinds fall due and more are written;
// one kind is paused between ticks and resumed while the schedulers run.
// From the pause until the resume no timer of the paused kind fires,
// none fails, is retried or dead-lettered, and none is lost: after the
// resume every timer of both kinds, those written during the pause
// included, fires exactly once, and the due index invariant holds after
// every step.
func TestPauseOnMVCCWithSchedulersRunning(t *testing.T) {
	e := &schedEnv{env: newEnv(t, testengine.MVCC.Open(t, ""), now), seen: make(map[string]bool)}
	e.layer = e.inner.(*fdblayer.Layer)
	t.Cleanup(func() { e.checkDueIndex(t) })
	const n = 12
	var paused atomic.Bool // set once the pause committed, before the next tick
	var firedWhilePaused atomic.Int32
	recA := &recorder{kind: kindA, during: func(*timers.Ctx, timers.DueTimer) {
		if paused.Load() {
			firedWhilePaused.Add(1)
		}
	}}
	recB := &recorder{kind: kindB}
	reg := registry(t, recA, recB)
	ss := []*timers.Scheduler{
		e.scheduler(t, "a", reg, nil),
		e.scheduler(t, "b", reg, func(c *timers.SchedulerConfig) { c.ClaimBatch = 1 }),
		e.scheduler(t, "c", reg, func(c *timers.SchedulerConfig) { c.ClaimBatch = 4 }),
	}
	want := map[string]bool{}
	add := func(p store.Partition, k timers.Kind, ref string, due time.Time) {
		e.schedule(t, p, timers.Timer{Kind: k, Reference: ref, DueAt: due, Value: store.Value(ref)})
		want[fmt.Sprintf("%d/%s", k, ref)] = true
	}
	for i := range n {
		for j := range 4 {
			add(part(i), kindA, fmt.Sprintf("a%d-%d", i, j), now.Add(time.Duration(j*3-1)*time.Second))
			add(part(i), kindB, fmt.Sprintf("b%d-%d", i, j), now.Add(time.Duration(j*4-1)*time.Second))
		}
	}
	step := func() timers.TickReport {
		t.Helper()
		rep := e.tickAll(t, ss...)
		assert.Zero(t, rep.Timers.Failed+rep.Timers.Retried+rep.Timers.DeadLettered+rep.Timers.Held, "%+v", rep.Timers)
		e.clock.Advance(time.Second)
		return rep
	}
	// Two steps unpaused: some of kind A fire.
	step()
	step()
	firedBefore := len(recA.seen())
	require.NotZero(t, firedBefore)

	e.pauseKind(t, kindA)
	paused.Store(true)
	for i := range 20 {
		if i == 5 {
			// Written during the pause, due at once: they wait too.
			for p := range n {
				add(part(p), kindA, fmt.Sprintf("a%d-new", p), e.clock.Now())
			}
		}
		step()
	}
	assert.Zero(t, firedWhilePaused.Load(), "a paused kind fired")
	assert.Len(t, recA.seen(), firedBefore)
	b := firesOf(recB)
	assert.Len(t, b, 4*n, "the other kind fires meanwhile")

	// Resumed while the schedulers tick.
	paused.Store(false)
	var wg sync.WaitGroup
	reps := make([]timers.TickReport, len(ss))
	for i, s := range ss {
		wg.Go(func() {
			var err error
			reps[i], err = s.Tick(e.ctx)
			assert.NoError(t, err)
		})
	}
	e.resumeKind(t, kindA)
	wg.Wait()
	for range 4 {
		step()
	}
	got := map[string]int{}
	for _, f := range recA.seen() {
		got[fmt.Sprintf("%d/%s", kindA, f.Reference)]++
	}
	for _, f := range recB.seen() {
		got[fmt.Sprintf("%d/%s", kindB, f.Reference)]++
	}
	for k := range want {
		assert.Equal(t, 1, got[k], "%s fired %d times", k, got[k])
	}
	assert.Len(t, got, len(want))
	for i := range n {
		assert.Empty(t, e.timerRows(t, part(i)))
		dls, _, err := timers.DeadLetters(e.ctx, store.ReaderOf(e.layer, part(i)), nil, 10)
		require.NoError(t, err)
		assert.Empty(t, dls)
	}
	assert.Zero(t, e.metrics.CounterSum(telemetry.MetricTimersFailed))
	assert.Empty(t, recA.overlapping())
	assert.Empty(t, recB.overlapping())
}

// TestRunWakesForTheNextTimerOfAPausedPartition: Run sleeps until the next
// timer no pause holds in a partition it left paused timers in, as it
// does for any wake time, not a whole PollInterval past it.
func TestRunWakesForTheNextTimerOfAPausedPartition(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "paused", DueAt: now.Add(-time.Second)})
		e.schedule(t, p, timers.Timer{Kind: kindB, Reference: "soon", DueAt: now.Add(300 * time.Millisecond)})
		e.pauseKind(t, kindA)
		recA, recB := &recorder{kind: kindA}, &recorder{kind: kindB}
		ctx, cancel := context.WithCancel(e.ctx)
		defer cancel()
		w := &manualWaiter{clock: e.clock, stop: func(_ []time.Duration, at time.Time) {
			if at.After(now.Add(2 * time.Second)) {
				cancel()
			}
		}}
		e.stopSpinning(t, cancel, 100)
		s := e.scheduler(t, "me", registry(t, recA, recB), func(c *timers.SchedulerConfig) {
			c.Waiter, c.PollInterval = w, 10*time.Second
		})
		require.NoError(t, s.Run(ctx))
		assert.Equal(t, []fire{{"namespace(p000)", "soon", now.Add(300 * time.Millisecond), now.Add(300 * time.Millisecond)}}, recB.seen())
		assert.Empty(t, recA.seen())
		assert.Equal(t, 300*time.Millisecond, w.recorded()[0], "%v", w.recorded())
	})
}

// TestAPauseWaitsForTheFormatEveryProcessKnows: on a store at format 1 of
// the library's namespace (a binary of which knows no pause, and would
// fire what a pause holds) a pause is refused with wire.ErrFormatTooOld,
// writing nothing, through a Transact function's Reader as through
// ReaderOf; once the format is raised to gen.FormatPauseV1 it is taken.
func TestAPauseWaitsForTheFormatEveryProcessKnows(t *testing.T) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			ctx := context.Background()
			engine := fdbsim.AsDistributed(eng.Open(t, "pause.bbolt"))
			old, err := fdblayer.Open(engine, fdblayer.Config{Gate: evolve.GateConfig{Process: "old", Known: map[string]uint32{gen.SchemaNamespace: 1}}})
			require.NoError(t, err)
			require.Equal(t, uint32(1), store.FormatOf(old, gen.SchemaNamespace), "a new store starts at what its binary knows")
			note := timers.PauseNote{At: now, Who: "ops", Reason: "carrier down"}

			b := store.NewBatch()
			_, err = timers.PauseKind(ctx, store.ReaderOf(old, timers.MembersPartition), b, kindA, note)
			require.ErrorIs(t, err, wire.ErrFormatTooOld)
			require.ErrorIs(t, err, store.ErrInvalid)
			_, err = store.Transact(ctx, old, part(0), func(ctx context.Context, r store.Reader) (*store.Batch, error) {
				b := store.NewBatch()
				_, err := timers.PausePartition(ctx, r, b, note)
				return b, err
			}, store.TransactConfig{})
			require.ErrorIs(t, err, wire.ErrFormatTooOld)
			assert.Zero(t, b.Ops())

			newer, err := fdblayer.Open(engine, fdblayer.Config{Gate: evolve.GateConfig{Process: "new"}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = newer.Close() }) // closes the engine last
			require.NoError(t, old.Gate().Close())
			require.NoError(t, newer.Gate().Raise(ctx, gen.SchemaNamespace, gen.FormatPauseV1, evolve.RaiseConfig{By: "test", Reason: "pauses"}))
			_, err = timers.PauseKind(ctx, store.ReaderOf(newer, timers.MembersPartition), b, kindA, note)
			require.NoError(t, err)
			out, err := newer.Apply(ctx, timers.MembersPartition, b)
			require.NoError(t, err)
			require.True(t, out.Committed())
		})
	}
}
