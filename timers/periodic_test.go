package timers_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

const (
	kindEvery timers.Kind = 2000 // every 15 minutes
	kindCron  timers.Kind = 2001 // "0 * * * *": on the hour
)

// dayStart is the simulated day's midnight, UTC.
var dayStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// periodRow is the row a periodic fire's own batch counts itself in: the
// value is how many outcomes of that period landed.
func periodRow(kind timers.Kind, ref string, period time.Time) store.Key {
	return store.Key(fmt.Sprintf("fired/%d/%s/%s", kind, ref, period.UTC().Format("15:04:05")))
}

// periodCounter is a periodic kind's handler: its outcome adds one to the
// period's row, guarded by the value it read, so that two outcomes of one
// period landing would leave 2.
type periodCounter struct{ kind timers.Kind }

func (h periodCounter) Kind() timers.Kind { return h.kind }

func (h periodCounter) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	if t.Period.IsZero() {
		return nil, errors.New("a periodic fire without its period")
	}
	key := periodRow(h.kind, t.Reference, t.Period)
	v, _, err := c.Store.Get(ctx, c.Partition, key)
	if err != nil {
		return nil, err
	}
	n := 0
	if v != nil {
		n, _ = strconv.Atoi(string(v))
	}
	b := store.NewBatch().Require(store.Guard(key, v)).Put(key, store.Value(strconv.Itoa(n+1)))
	return timers.Done{Batch: b}, nil
}

// Over a simulated day two schedulers race over three partitions, each
// with a timer of a kind firing every 15 minutes and one on the hour;
// some fire batches fail before they commit and some commit and then
// report an unknown result (a crash between the fire and its reschedule);
// at 12:07 a producer rewrites one timer's schedule (to 12:20, shifting
// its 15-minute periods); from 15:00 to 18:00 nothing runs. Every period
// fires exactly once, at the periods the schedules and the documented rule
// for missed periods (one fire for all of them, then the first period
// after it) say, and the due index invariant holds after every step.
func TestPeriodicTimersFireExactlyOncePerPeriodOverADay(t *testing.T) {
	forEachSchedEngine(t, dayStart, func(t *testing.T, e *schedEnv) {
		hourly, err := timers.Cron("0 * * * *")
		require.NoError(t, err)
		reg := &timers.Registry{}
		require.NoError(t, reg.Register(periodCounter{kindEvery}, timers.KindConfig{Period: timers.Every(15 * time.Minute)}))
		require.NoError(t, reg.Register(periodCounter{kindCron}, timers.KindConfig{Period: hourly}))
		ps := []store.Partition{part(0), part(1), part(2)}
		for _, p := range ps {
			e.schedule(t, p, timers.Timer{Kind: kindEvery, Reference: "q", DueAt: dayStart})
			e.schedule(t, p, timers.Timer{Kind: kindCron, Reference: "h", DueAt: dayStart})
		}
		e.checkDueIndex(t)
		// Faults on the fire batches (those that count a period), by
		// their commit number: some fail before committing, some commit
		// and then fail.
		// A fire batch is an Apply's, or one of a Commit's (the fires of
		// partitions claimed together).
		firing := func(c storetest.Call) bool {
			bs := []*store.Batch{c.Batch}
			for _, pb := range c.Batches {
				bs = append(bs, pb.Batch)
			}
			for _, b := range bs {
				if b == nil {
					continue
				}
				for _, w := range b.Writes {
					if strings.HasPrefix(string(w.Key), "fired/") {
						return true
					}
				}
			}
			return false
		}
		e.faults.FailWhen(storetest.MethodApply, func(c storetest.Call) bool { return firing(c) && c.Commit%11 == 4 }, storetest.ErrInjected)
		e.faults.FailWhen(storetest.MethodCommit, func(c storetest.Call) bool { return firing(c) && c.Commit%11 == 4 }, storetest.ErrInjected)
		e.faults.CommitThenFailWhen(func(c storetest.Call) bool { return firing(c) && c.Commit%7 == 2 })

		s1 := e.scheduler(t, "one", reg, nil)
		s2 := e.scheduler(t, "two", reg, nil)
		const step = 5 * time.Minute
		var ticks []time.Time
		rewritten := false
		var mu sync.Mutex
		failed, fired := 0, 0
		for at := dayStart; at.Before(dayStart.Add(24 * time.Hour)); at = at.Add(step) {
			if !at.Before(dayStart.Add(15*time.Hour)) && at.Before(dayStart.Add(18*time.Hour)) {
				continue // nothing runs
			}
			if !rewritten && !at.Before(dayStart.Add(12*time.Hour+5*time.Minute)) {
				e.clock.Set(dayStart.Add(12*time.Hour + 7*time.Minute))
				e.schedule(t, ps[0], timers.Timer{Kind: kindEvery, Reference: "q", DueAt: dayStart.Add(12*time.Hour + 20*time.Minute)})
				rewritten = true
			}
			ticks = append(ticks, at)
			// Both schedulers at once, then twice more after the leases
			// of failed fires expired, within the step.
			for i := range 3 {
				e.clock.Set(at.Add(time.Duration(i) * (leaseDuration + time.Second)))
				var wg sync.WaitGroup
				for _, s := range []*timers.Scheduler{s1, s2} {
					wg.Go(func() {
						rep, _ := s.Tick(e.ctx)
						mu.Lock()
						failed += rep.Errors
						fired += rep.Timers.Fired
						mu.Unlock()
					})
				}
				wg.Wait()
				e.checkDueIndex(t, ps...)
			}
		}
		assert.Greater(t, failed, 20, "fire batches failed, before or after committing")
		t.Logf("%d fires reported, %d partition runs failed", fired, failed)

		// The periods each timer must have fired for, by the rule.
		want := func(anchor time.Time, next func(time.Time) time.Time, from, until time.Time) []string {
			var out []string
			cur := anchor
			for _, tk := range ticks {
				if tk.Before(from) || !tk.Before(until) {
					continue
				}
				if !cur.After(tk) {
					out = append(out, cur.Format("15:04:05"))
					cur = next(tk) // the first period after the fire
				}
			}
			return out
		}
		every := func(anchor time.Time) func(time.Time) time.Time {
			return func(now time.Time) time.Time {
				k := now.Sub(anchor)/(15*time.Minute) + 1
				return anchor.Add(k * 15 * time.Minute)
			}
		}
		onTheHour := func(now time.Time) time.Time { return now.Truncate(time.Hour).Add(time.Hour) }
		end := dayStart.Add(24 * time.Hour)
		noon := dayStart.Add(12*time.Hour + 7*time.Minute)
		wantEvery := want(dayStart, every(dayStart), dayStart, end)
		wantEvery0 := append(want(dayStart, every(dayStart), dayStart, noon),
			want(dayStart.Add(12*time.Hour+20*time.Minute), every(dayStart.Add(12*time.Hour+20*time.Minute)), noon, end)...)
		wantHourly := want(dayStart, onTheHour, dayStart, end)
		assert.Contains(t, wantEvery, "15:00:00", "the missed periods fire once, late")
		assert.NotContains(t, wantEvery, "15:15:00")
		assert.Contains(t, wantEvery, "18:15:00", "then the first period after that fire")
		assert.NotContains(t, wantHourly, "18:00:00")

		for i, p := range ps {
			we := wantEvery
			if i == 0 {
				we = wantEvery0
			}
			assert.Equal(t, we, e.periods(t, p, kindEvery, "q"), "partition %d, every 15 minutes", i)
			assert.Equal(t, wantHourly, e.periods(t, p, kindCron, "h"), "partition %d, on the hour", i)
		}
	})
}

// periods lists the periods kind's timer ref fired for in p, in order,
// requiring each exactly once.
func (e *schedEnv) periods(t testing.TB, p store.Partition, kind timers.Kind, ref string) []string {
	t.Helper()
	prefix := fmt.Sprintf("fired/%d/%s/", kind, ref)
	page, err := e.layer.Scan(e.ctx, p, store.Key(prefix), store.Key(prefix+"\xff"), nil, 1000)
	require.NoError(t, err)
	var out []string
	for _, kv := range page.Entries {
		assert.Equal(t, "1", string(kv.Value), "%s fired %s times", kv.Key, kv.Value)
		out = append(out, strings.TrimPrefix(string(kv.Key), prefix))
	}
	return out
}

// A periodic timer that fails retries within its period and keeps the
// period's scheduled time: when it succeeds, its next period follows the
// schedule, not the retry; when it uses its attempts it leaves a dead
// letter and goes on to its next period. Snooze keeps the period too.
func TestAFailingPeriodicTimerKeepsItsScheduleAndDeadLettersOnePeriod(t *testing.T) {
	e := newEnv(t, memengine.New(), dayStart)
	var outcomes []func(timers.DueTimer) (timers.Fired, error)
	h := &handler{kind: kindEvery, fire: func(_ context.Context, _ *timers.Ctx, tm timers.DueTimer) (timers.Fired, error) {
		f := outcomes[0]
		outcomes = outcomes[1:]
		return f(tm)
	}}
	fail := func(timers.DueTimer) (timers.Fired, error) { return nil, errors.New("down") }
	ok := func(timers.DueTimer) (timers.Fired, error) { return timers.Done{}, nil }
	snooze := func(timers.DueTimer) (timers.Fired, error) { return timers.Snooze{For: 90 * time.Second}, nil }
	reg := &timers.Registry{}
	require.NoError(t, reg.Register(h, timers.KindConfig{Period: timers.Every(time.Hour),
		Retry: timers.RetryPolicy{InitialInterval: time.Minute, BackoffFactor: 2, MaxInterval: time.Hour, MaxAttempts: 3}}))
	e.schedule(t, timers.Timer{Kind: kindEvery, Reference: "p", DueAt: dayStart, Value: store.Value("v")})
	outcomes = append(outcomes, fail, snooze, fail, ok, fail, fail, fail, ok)
	var dues []string
	for len(outcomes) > 0 {
		due, ok := e.refDue(t, kindEvery, "p")
		require.True(t, ok, "a periodic timer is never deleted")
		e.clock.Set(due)
		dues = append(dues, e.clock.Now().Format("15:04:05"))
		e.run(t, reg, timers.RunConfig{})
	}
	assert.Equal(t, []string{
		"00:00:00", "00:01:00", // failed; snoozed 90 s
		"00:02:30", "00:04:30", // failed again (2 minutes); succeeded
		"01:00:00", "01:01:00", "01:03:00", // failed three times: a dead letter
		"02:00:00", // its next period
	}, dues)
	periods := make([]string, len(h.calls))
	for i, c := range h.calls {
		periods[i] = c.Period.UTC().Format("15:04")
	}
	assert.Equal(t, []string{"00:00", "00:00", "00:00", "00:00", "01:00", "01:00", "01:00", "02:00"}, periods)
	dls, _, err := timers.DeadLetters(e.ctx, store.ReaderOf(e.inner, e.p), nil, 10)
	require.NoError(t, err)
	require.Len(t, dls, 1)
	assert.Equal(t, 3, dls[0].Attempts)
	assert.Equal(t, "01:03", dls[0].DueAt.UTC().Format("15:04"))
	due, _ := e.refDue(t, kindEvery, "p")
	assert.Equal(t, dayStart.Add(3*time.Hour), due.UTC())
}

// Cron and Every are validated; a cron schedule's next time is UTC.
func TestPeriodsAreValidated(t *testing.T) {
	_, err := timers.Cron("61 * * * *")
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = timers.Cron("@every 1h")
	assert.NoError(t, err)
	h := &handler{kind: kindA, fire: done}
	reg := &timers.Registry{}
	assert.ErrorIs(t, reg.Register(h, timers.KindConfig{Period: timers.Every(0)}), store.ErrInvalid)
	assert.ErrorIs(t, reg.Register(h, timers.KindConfig{Period: timers.Every(-time.Hour)}), store.ErrInvalid)
	daily, err := timers.Cron("@daily")
	require.NoError(t, err)
	assert.Equal(t, dayStart.Add(24*time.Hour), daily.Next(dayStart.Add(time.Minute)))
}

// A periodic timer whose schedule has no time after its fire ends: Done
// deletes it.
func TestAPeriodicTimerWithoutANextPeriodEnds(t *testing.T) {
	e := newEnv(t, memengine.New(), now)
	never, err := timers.Cron("0 0 30 2 *") // February 30th
	require.NoError(t, err)
	reg := &timers.Registry{}
	require.NoError(t, reg.Register(&handler{kind: kindEvery, fire: done}, timers.KindConfig{Period: never}))
	e.schedule(t, timers.Timer{Kind: kindEvery, Reference: "p", DueAt: now})
	rep := e.run(t, reg, timers.RunConfig{})
	assert.Equal(t, 1, rep.Fired)
	_, ok := e.refDue(t, kindEvery, "p")
	assert.False(t, ok)
	rows, _ := e.timersIn(t)
	assert.Empty(t, rows)
}
