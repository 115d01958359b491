package timers

import (
	"log/slog"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Defaults of a Budget and of RunDue's options. A scheduler's lease on
// a partition should outlast DefaultMaxDuration plus the longest single
// fire, since the duration is checked between fires.
const (
	DefaultMaxTimers   = 64
	DefaultMaxDuration = 15 * time.Second
	// DefaultPageSize bounds the timer rows of one scan page (as
	// relay.ScanPageRows); a page reads one row more, to tell whether its
	// last due timer is the partition's last.
	DefaultPageSize = 64
	// DefaultHeldBackoff is how long a timer waits that no handler can
	// fire now (see WithHeldBackoff).
	DefaultHeldBackoff = 30 * time.Second
)

// Budget bounds one RunDue. A zero field takes its default.
type Budget struct {
	// MaxTimers bounds the timers the run fires or moves: handler calls,
	// and timers of a kind without a handler.
	MaxTimers int
	// MaxDuration bounds the run's time on its clock. It is checked before
	// each fire; a fire in progress is bounded by ctx, not by the budget.
	MaxDuration time.Duration
}

// DefaultBudget is the budget of a run that names none; Budget{} means
// the same.
var DefaultBudget = Budget{MaxTimers: DefaultMaxTimers, MaxDuration: DefaultMaxDuration}

func (b Budget) withDefaults() Budget {
	if b.MaxTimers <= 0 {
		b.MaxTimers = DefaultMaxTimers
	}
	if b.MaxDuration <= 0 {
		b.MaxDuration = DefaultMaxDuration
	}
	return b
}

// Report says what one RunDue did, for the scheduler that runs it again.
// Every due timer the run examined lands in at most one of the counts.
type Report struct {
	// Fired: the handler ran and its Done or Reschedule committed.
	Fired int
	// Retried: the handler asked for a Retry, and the move committed.
	Retried int
	// Raced: the outcome's guards failed (another writer changed the
	// timer, or a row the handler guarded); nothing landed, and the timer
	// was not fired again in this run.
	Raced int
	// Failed: the handler returned an error or no outcome, panicked, or
	// returned an outcome the store rejected; the timer was moved
	// RetryBackoff later (guarded like any outcome; a timer changed
	// meanwhile is left as it is, still due).
	Failed int
	// UnknownKind counts the kinds without a handler among the due timers,
	// each once per run. Their timers are moved HeldBackoff later, value
	// unchanged (and counted in Held), so that they fire once a handler is
	// registered.
	UnknownKind int
	// Corrupt counts due timers whose key, reference entry or value (a
	// handler error wrapping store.ErrCorrupt) is corrupt. A row whose key
	// or reference entry is corrupt is left in place; a timer whose
	// handler found corrupt data is moved HeldBackoff later.
	Corrupt int
	// Held counts due timers no handler could fire in this run (an unknown
	// kind, corrupt data): each waits HeldBackoff, and NextDue covers it,
	// so that a handler registered later or a repair fires it.
	Held int
	// More: the budget ended the run while a due timer it could fire
	// remained; run the partition again soon.
	More bool
	// NextDue is the earliest time the partition needs running again, the
	// zero Time when it holds no timer the run knows of: the earliest due time of a
	// timer the run moved, left due (its outcome raced, the budget cut the
	// run, or it was moved to a due time the run had already passed) or
	// did not reach, and HeldBackoff after the run for a corrupt row. When
	// RunDue fails it is at or before the due time of every timer the run
	// did not finish. A scheduler that sets the partition's wake time to
	// it forgets no timer.
	NextDue time.Time
	// Elapsed is the run's time on its clock.
	Elapsed time.Duration
}

// Option configures one RunDue.
type Option func(*config)

type config struct {
	clock    clock.Clock
	logger   *slog.Logger
	metrics  telemetry.Metrics
	pageSize int
	// heldBackoff is how long a timer its handler cannot fire waits.
	heldBackoff time.Duration
	// claim is the Scheduler's claim the run fires under (nil: none).
	claim *claimHold
}

// WithClock sets the clock the duration budget is measured on and handlers
// see as Ctx.Clock (default clock.Real).
func WithClock(c clock.Clock) Option { return func(o *config) { o.clock = c } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *config) { o.logger = l } }

// WithMetrics sets where the run's counters go (default telemetry.Noop).
func WithMetrics(m telemetry.Metrics) Option { return func(o *config) { o.metrics = m } }

// WithHeldBackoff sets how long a timer waits that no handler can fire
// now (default DefaultHeldBackoff): one of a kind without a handler, or
// whose handler found corrupt data, is moved that much later, and a row
// that cannot be moved (a corrupt key or reference entry) wakes its
// partition that much later. Values under a millisecond mean the default.
func WithHeldBackoff(d time.Duration) Option { return func(o *config) { o.heldBackoff = d } }

// WithPageSize bounds the timer rows of one scan page (default
// DefaultPageSize; a page reads one row more, to tell whether another is
// due); values below 1 mean the default.
func WithPageSize(n int) Option { return func(o *config) { o.pageSize = n } }
