package timers

import (
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// Waiter waits, for Run, between ticks. Tests pass one driven by a manual
// clock, so that they never sleep.
type Waiter interface {
	// Wait returns after d has passed, or with ctx's error when ctx ends
	// first. Any other error ends Run.
	Wait(ctx context.Context, d time.Duration) error
}

// RealWaiter waits in real time. Its zero value is ready to use and safe
// for concurrent use.
type RealWaiter struct{}

// Wait sleeps for d, or until ctx ends, returning ctx's error then.
func (RealWaiter) Wait(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, d) }

// Run ticks until ctx ends. After a tick that claimed a partition it ticks
// again at once; otherwise it waits, through the Waiter, until the
// earliest wake time in the due index that the tick did not cover, but
// never longer than PollInterval: entries the tick skipped (a lease held
// elsewhere, a corrupt entry, parked partitions) are looked at again after
// PollInterval, not in a busy loop. A tick that fails is logged, and
// followed by a PollInterval wait.
//
// Run returns nil once ctx has ended and the fires in flight have
// finished (with their finishing batches); it fails only when the Waiter
// returns an error other than ctx's.
func (s *Scheduler) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		rep, err := s.Tick(ctx)
		if ctx.Err() != nil {
			break
		}
		var d time.Duration
		switch {
		case err != nil:
			s.log.Error("timers: scheduler: tick failed", "error", err,
				"claimed", rep.Claimed, "errors", rep.Errors)
			d = s.poll
		case rep.Claimed > 0:
			continue
		default:
			d = s.idle(ctx, encodedTime(rep.Now))
		}
		if d <= 0 {
			continue
		}
		if err := s.waiter.Wait(ctx, d); err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("timers: scheduler: wait: %w", err)
		}
	}
	return nil
}

// idle is how long to wait after a tick at horizonMs that claimed
// nothing: until the first entry past what the tick listed, at most
// PollInterval. A paused wake time of the current generation counts at
// the due time of its partition's next timer no pause holds (see
// pause.go).
func (s *Scheduler) idle(ctx context.Context, horizonMs uint64) time.Duration {
	lo := pausedBaseMs + s.pauseView().generation%pausedGens*pausedSpanMs
	next := uint64(0)
	for _, q := range []struct{ from, until, off uint64 }{
		{horizonMs + 1, pausedBaseMs - 1, 0},
		{lo + min(horizonMs+1, pausedNone), lo + pausedNone - 1, lo},
	} {
		if q.from > q.until {
			continue
		}
		firsts, err := s.due.ScanDue(ctx, store.DueQuery{From: store.DecodeTime(q.from), Until: store.DecodeTime(q.until), Limit: s.due.DueBuckets(), PerBucket: 1})
		if err != nil {
			s.log.Warn("timers: scheduler: cannot read the next wake time; polling", "error", err)
			return s.poll
		}
		for _, e := range firsts {
			if at := encodedTime(e.At) - q.off; next == 0 || at < next {
				next = at
			}
		}
	}
	if next == 0 {
		return s.poll
	}
	nowMs := s.nowMs()
	if next <= nowMs {
		return 0
	}
	if ms := next - nowMs; ms < uint64(s.poll/time.Millisecond) {
		return time.Duration(ms) * time.Millisecond
	}
	return s.poll
}
