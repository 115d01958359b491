package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: the model's service timers with retry policies.
//
// Beside the relay, the outcome delivery and the user timers, the sources
// hold two more of a service's kinds:
//
//   - jobs (jobKind): a producer schedules one now and then, whose value
//     is its plan: how many fires fail before one succeeds, whether the
//     failures are Permanent, and whether the handler fails with an error
//     or returns a Retry carrying it. Its kind allows three attempts, so a
//     job planned to fail three times or more, or permanently, ends as a
//     dead letter; a success writes the job's done row in its outcome
//     batch. A step now and then re-drives a dead letter, which fails
//     again as planned. The workers' stores fail a third of the reads of a
//     dead letter's key (the read a run makes before it writes one), on
//     top of the chaos every call meets: a store failure fails the run and
//     spends nothing, so the plan still decides. After every step each job
//     the producer landed is in exactly one place (a live timer, its done
//     row, or one dead letter), and each dead letter holds what the
//     handler failed with: its plan's error, Permanent as planned, after
//     the attempts its plan spends; when the queues drain each job is
//     where its plan says: nothing is dropped or doubled.
//   - a periodic timer (periodicKind, every modelPeriod) per source, whose
//     fire counts its period in a row of its own, guarded, and fails the
//     first attempt of every third period: each period's count stays 1,
//     every counted period lies on the schedule, and the timer is never
//     lost.

// The service's kinds of the timers model.
const (
	jobKind      timers.Kind = 301
	periodicKind timers.Kind = 302
	modelPeriod              = 4 * time.Second
)

// jobPolicy is jobKind's retry policy: three attempts.
var jobPolicy = timers.RetryPolicy{InitialInterval: 300 * time.Millisecond, BackoffFactor: 2, MaxInterval: time.Second, MaxAttempts: 3, Jitter: 0.5}

// modelJob is a job the producer landed.
type modelJob struct {
	src       int
	ref       string
	failures  int
	permanent bool
	retry     bool // the handler returns Retry{Err} rather than the error
}

// dead says where the job's plan ends: a dead letter.
func (j modelJob) dead() bool {
	return j.failures >= jobPolicy.MaxAttempts || j.permanent && j.failures > 0
}

// attempts is what its dead letter records.
func (j modelJob) attempts() int {
	if j.permanent {
		return 1
	}
	return jobPolicy.MaxAttempts
}

// jobError is the error a job's n-th attempt fails with, by its plan: the
// last error its dead letter records.
func jobError(ref string, n int) string {
	return fmt.Sprintf("job %s: attempt %d fails as planned", ref, n)
}

func jobDoneKey(ref string) store.Key { return store.Key("jobs/done/" + ref) }

// jobTimer fires jobs by their plans.
type jobTimer struct{}

func (jobTimer) Kind() timers.Kind { return jobKind }

func (jobTimer) Fire(_ context.Context, _ *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	f, how, ok := strings.Cut(string(t.Value), "/")
	failures, err := strconv.Atoi(f)
	if !ok || err != nil {
		return nil, fmt.Errorf("job %s: bad plan %q: %w", t.Reference, t.Value, store.ErrCorrupt)
	}
	if t.Attempts < failures {
		err := errors.New(jobError(t.Reference, t.Attempts+1))
		if strings.Contains(how, "p") {
			err = timers.Permanent(err)
		}
		if strings.Contains(how, "r") {
			return timers.Retry{Err: err}, nil
		}
		return nil, err
	}
	key := jobDoneKey(t.Reference)
	return timers.Done{Batch: store.NewBatch().Require(store.Absent(key)).Put(key, store.Value("done"))}, nil
}

// periodicTimer counts its periods, failing the first attempt of every
// third one.
type periodicTimer struct{}

func (periodicTimer) Kind() timers.Kind { return periodicKind }

func (periodicTimer) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	if t.Period.IsZero() {
		return nil, errors.New("a periodic fire without its period")
	}
	// The period's count is kept under the period's stored time.
	periodMs, err := store.EncodeTime(t.Period)
	if err != nil {
		return nil, err
	}
	if (t.Period.Sub(time.Unix(0, 0))/modelPeriod)%3 == 1 && t.Attempts == 0 {
		return nil, errors.New("the first attempt of every third period fails")
	}
	key := store.Key(fmt.Sprintf("per/%020d", periodMs))
	v, _, err := c.Store.Get(ctx, c.Partition, key)
	if err != nil {
		return nil, err
	}
	n := 0
	if v != nil {
		n, _ = strconv.Atoi(string(v))
	}
	return timers.Done{Batch: store.NewBatch().Require(store.Guard(key, v)).Put(key, store.Value(strconv.Itoa(n+1)))}, nil
}

// registerServiceTimers adds the jobs' and the periodic timer's kinds to
// reg.
func registerServiceTimers(reg *timers.Registry) error {
	if err := reg.Register(jobTimer{}, timers.KindConfig{Retry: jobPolicy}); err != nil {
		return err
	}
	return reg.Register(periodicTimer{}, timers.KindConfig{Period: timers.Every(modelPeriod),
		Retry: timers.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffFactor: 1, MaxInterval: 200 * time.Millisecond}})
}

// startPeriodic schedules each source's periodic timer, a period from now.
func (w *world) startPeriodic() {
	for _, p := range w.sources {
		b := store.NewBatch()
		due := w.clock.Now().Add(modelPeriod)
		if err := timers.Schedule(b, w.layer.Capabilities(), nil, timers.Timer{Kind: periodicKind, Reference: "tick", DueAt: due}); err != nil {
			panic(err)
		}
		if out, err := w.layer.Apply(w.ctx, p, b); err != nil || !out.Committed() {
			panic(fmt.Sprintf("start periodic: %v %v", out, err))
		}
	}
}

// produceJob lands a job with a plan of the seed's choosing, due within
// two seconds.
func (w *world) produceJob() {
	j := modelJob{src: w.rng.IntN(modelSources), ref: fmt.Sprintf("job-%d", len(w.jobs)), failures: w.rng.IntN(5),
		permanent: w.rng.IntN(4) == 0, retry: w.rng.IntN(2) == 0}
	plan := planOf(j)
	b := store.NewBatch()
	due := w.clock.Now().Add(time.Duration(w.rng.IntN(2000)) * time.Millisecond)
	if err := timers.Schedule(b, w.layer.Capabilities(), nil, timers.Timer{Kind: jobKind, Reference: j.ref, DueAt: due, Value: store.Value(plan)}); err != nil {
		panic(err)
	}
	out, err := w.layer.Apply(w.ctx, w.sources[j.src], b)
	if err != nil || !out.Committed() {
		panic(fmt.Sprintf("produce job: %v %v", out, err))
	}
	w.jobs = append(w.jobs, j)
	w.note("job %s in src%d at +%v: plan %s", j.ref, j.src, due.Sub(w.clock.Now()), plan)
}

// redrive re-drives a dead letter of a source the seed picks, if any.
func (w *world) redrive() {
	src := w.rng.IntN(modelSources)
	p := w.sources[src]
	dls, _, err := timers.DeadLetters(w.ctx, store.ReaderOf(w.layer, p), nil, 100)
	if err != nil {
		panic(err)
	}
	if len(dls) == 0 {
		return
	}
	d := dls[w.rng.IntN(len(dls))]
	b := store.NewBatch()
	if err := timers.Redrive(b, w.layer.Capabilities(), d, w.clock.Now()); err != nil {
		panic(err)
	}
	out, err := w.layer.Apply(w.ctx, p, b)
	if err != nil || !out.Committed() {
		panic(fmt.Sprintf("redrive: %v %v", out, err))
	}
	w.seen.redriven++
	w.note("redrive %s in src%d", d.Reference, src)
}

// checkServiceTimers checks the jobs and the periodic timers of the
// design note; final: the queues drained, so every job is where its plan
// ends.
func (w *world) checkServiceTimers(final bool) error {
	dead := map[string][]timers.DeadLetter{}
	for src, p := range w.sources {
		var after store.Cursor
		for {
			dls, next, err := timers.DeadLetters(w.ctx, store.ReaderOf(w.layer, p), after, 7)
			if err != nil {
				return err
			}
			for _, d := range dls {
				if d.Kind != jobKind {
					return fmt.Errorf("src%d: a dead letter of %v %q (%s)", src, d.Kind, d.Reference, d.LastError)
				}
				dead[d.Reference] = append(dead[d.Reference], d)
			}
			if next == nil {
				break
			}
			after = next
		}
		if err := w.checkPeriodic(src, final); err != nil {
			return err
		}
	}
	for _, j := range w.jobs {
		p := w.sources[j.src]
		ref, _, err := timers.ReadRef(w.ctx, w.layer, p, jobKind, j.ref)
		if err != nil {
			return err
		}
		_, done, err := w.layer.Get(w.ctx, p, jobDoneKey(j.ref))
		if err != nil {
			return err
		}
		live, dl := ref != nil, dead[j.ref]
		n := len(dl)
		if live {
			n++
		}
		if done {
			n++
		}
		if n != 1 {
			return fmt.Errorf("job %s (src%d, plan %s) is in %d places: live %v, done %v, %d dead letters", j.ref, j.src, planOf(j), n, live, done, len(dl))
		}
		// A dead letter holds the handler's own failure: a store failure
		// while it was made fails the run instead of standing for it.
		for _, d := range dl {
			if want := jobError(j.ref, d.Attempts); !j.dead() || d.LastError != want || d.Permanent != j.permanent || d.Attempts != j.attempts() {
				return fmt.Errorf("job %s (plan %s): a dead letter after %d attempts, permanent %v, last error %q; the plan fails %d attempts with %q, permanent %v",
					j.ref, planOf(j), d.Attempts, d.Permanent, d.LastError, j.attempts(), jobError(j.ref, j.attempts()), j.permanent)
			}
		}
		if !final {
			continue
		}
		switch {
		case live:
			return fmt.Errorf("job %s still live after the drain", j.ref)
		case j.dead() && done:
			return fmt.Errorf("job %s (plan %s) is done; it must be a dead letter", j.ref, planOf(j))
		case !j.dead() && !done:
			return fmt.Errorf("job %s (plan %s) is a dead letter (%s); it must be done", j.ref, planOf(j), dl[0].LastError)
		case !done && (dl[0].Attempts != j.attempts() || string(dl[0].Value) != planOf(j)):
			return fmt.Errorf("job %s (plan %s): dead letter %+v", j.ref, planOf(j), dl[0])
		}
	}
	for ref := range dead {
		if !slices.ContainsFunc(w.jobs, func(j modelJob) bool { return j.ref == ref }) {
			return fmt.Errorf("a dead letter of job %s, never produced", ref)
		}
	}
	return nil
}

func planOf(j modelJob) string {
	plan := strconv.Itoa(j.failures) + "/"
	if j.permanent {
		plan += "p"
	}
	if j.retry {
		plan += "r"
	}
	return plan
}

// isDeadLetterKey reports whether key is a dead letter's (its record's).
func isDeadLetterKey(key store.Key) bool {
	_, err := gen.ParseDeadLetterKey(key)
	return err == nil
}

// checkPeriodic checks source src's periodic timer: it exists, and every
// period it counted lies on its schedule, before its due time, and was
// counted once. final: the run's counted periods are added to its stats.
func (w *world) checkPeriodic(src int, final bool) error {
	p := w.sources[src]
	ref, due, err := timers.ReadRef(w.ctx, w.layer, p, periodicKind, "tick")
	if err != nil {
		return err
	}
	if ref == nil {
		return fmt.Errorf("src%d lost its periodic timer", src)
	}
	page, err := w.layer.Scan(w.ctx, p, store.Key("per/"), store.Key("per/\xff"), nil, 10_000)
	if err != nil {
		return err
	}
	for _, kv := range page.Entries {
		periodMs, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), "per/"), 10, 64)
		if err != nil {
			return err
		}
		at := store.DecodeTime(periodMs).Sub(start) // the period's time, after the start
		if at%modelPeriod != 0 {
			return fmt.Errorf("src%d counted period +%v, off its schedule", src, at)
		}
		if string(kv.Value) != "1" {
			return fmt.Errorf("src%d counted period +%v %s times", src, at, kv.Value)
		}
		if !start.Add(at).Before(due) {
			return fmt.Errorf("src%d counted period +%v, at or after its timer's due time +%v", src, at, due.Sub(start))
		}
	}
	if final {
		w.seen.periods += len(page.Entries)
	}
	return nil
}

// loseLastAttempt is the mutant of timers losing a timer on its last
// attempt: a worker's batch that makes a dead letter loses the dead
// letter's rows (and their guards) but still deletes the timer.
func loseLastAttempt(b *store.Batch) *store.Batch {
	isDead := func(k store.Key) bool {
		_, e1 := gen.ParseDeadLetterKey(k)
		_, e2 := gen.ParseDeadLetterValueKey(k)
		return e1 == nil || e2 == nil
	}
	if !slices.ContainsFunc(b.Writes, func(w store.Write) bool { return isDead(w.Key) }) {
		return b
	}
	c := b.Clone()
	c.Writes = slices.DeleteFunc(c.Writes, func(w store.Write) bool { return isDead(w.Key) })
	c.Preconditions = slices.DeleteFunc(c.Preconditions, func(p store.Precondition) bool { return isDead(p.Key) })
	return c
}
