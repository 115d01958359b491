package timers

import (
	"errors"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: a store whose format this binary does not know.
//
// A store that refuses this process's writes because its format of a
// namespace was raised past what the binary knows (store.ErrNewerFormat:
// fdblayer's Layer once its gate saw the raise) would fail every claim.
// The first claim that meets it makes the Scheduler claim nothing for
// fenceRecheck (the partitions it lists are counted in TickReport.Fenced,
// not as errors, and left to the schedulers of a binary that knows the
// format) and log it once; then one claim tries again. Partitions it
// already holds keep their leases until they expire, and are taken over
// then by another scheduler.

// fenceRecheck is how long a Scheduler claims nothing after a claim met a
// fenced store, and how often it logs it: the default refresh of the
// store's gate (evolve.DefaultRefresh), which decides the fence.
const fenceRecheck = 10 * time.Second

// fenced reports whether a claim met a fenced store less than
// fenceRecheck ago.
func (s *Scheduler) fenced() bool { return s.nowMs() < s.fencedUntil.Load() }

// fencedBy reports whether err is a fenced store's refusal
// (store.ErrNewerFormat) of a claim of n partitions, and if so counts
// them in r, stops claiming for fenceRecheck, and logs it (once per
// fenceRecheck).
func (s *Scheduler) fencedBy(err error, n int, r *TickReport) bool {
	if !errors.Is(err, store.ErrNewerFormat) {
		return false
	}
	r.Fenced += n
	now := s.nowMs()
	s.fencedUntil.Store(addMs(now, uint64(fenceRecheck/time.Millisecond)))
	if s.fenceLog.allow("fenced", now, fenceRecheck) {
		s.log.Error("timers: scheduler: the store refuses this binary's writes (its format was raised past what the binary knows); claiming nothing until it is replaced by one that knows it",
			"error", err)
	}
	return true
}
