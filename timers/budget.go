package timers

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Defaults of a Budget and of a RunConfig. A scheduler's lease on
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
	// fire now (see RunConfig.HeldBackoff).
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
	// returned an outcome the store rejected; the timer was moved as its
	// kind's RetryPolicy says, or made a dead letter (guarded like any
	// outcome; a timer changed meanwhile is left as it is, still due).
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
	// Newer counts due timers not fired because a newer binary wrote what
	// they need (store.ErrNewerVersion): a reference entry of a newer
	// version, left in place (the partition woken HeldBackoff later), or a
	// row their handler read, the timer moved HeldBackoff later, no
	// attempt spent. Never corrupt, never skipped: a process of the newer
	// binary fires them. Counted in Held too.
	Newer int
	// DeadLettered counts the timers made dead letters, their attempts
	// used or their handler's error permanent (see DeadLetter).
	DeadLettered int
	// Snoozed: the handler asked for a Snooze, and the move committed.
	Snoozed int
	// Held counts due timers no handler could fire in this run (an unknown
	// kind, corrupt data, a row of a newer version): each waits HeldBackoff, and NextDue covers it,
	// so that a handler registered later or a repair fires it.
	Held int
	// Paused counts due timers the run left where they are for a pause
	// (see PauseKind, PausePartition): not fired, not failed, not moved.
	// Only a Scheduler's runs leave any: RunDue alone knows no pause.
	// NextDue does not cover them; the Scheduler's paused wake time does.
	Paused int
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

// RunConfig configures one RunDue. A zero field takes its default; a
// negative one fails the run with store.ErrInvalid.
type RunConfig struct {
	// Budget bounds the run; each of its zero fields takes its default
	// (see DefaultBudget).
	Budget Budget
	// Clock is the clock the duration budget is measured on and handlers
	// see as Ctx.Clock (default clock.Real).
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives the run's counters (default telemetry.Noop).
	Metrics telemetry.Metrics
	// HeldBackoff is how long a timer waits that no handler can fire now
	// (default DefaultHeldBackoff): one of a kind without a handler, or
	// whose handler found corrupt data, is moved that much later, and a
	// row that cannot be moved (a corrupt key or reference entry) wakes
	// its partition that much later. Values under a millisecond mean the
	// default.
	HeldBackoff time.Duration
	// PageSize bounds the timer rows of one scan page (default
	// DefaultPageSize; a page reads one row more, to tell whether another
	// is due).
	PageSize int
	// TracerProvider traces each fire: a span, mkitfdb.timers.fire, with
	// the timer's kind, its partition's kind and its attempt, in whose
	// context the handler runs. Nil means otel.GetTracerProvider() at each
	// fire: while no SDK is installed there, nothing is recorded or
	// allocated.
	TracerProvider trace.TracerProvider
}

// check fails with an error wrapping store.ErrInvalid naming the first
// negative field.
func (c RunConfig) check() error {
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"Budget.MaxTimers", c.Budget.MaxTimers < 0},
		{"Budget.MaxDuration", c.Budget.MaxDuration < 0},
		{"HeldBackoff", c.HeldBackoff < 0},
		{"PageSize", c.PageSize < 0},
	} {
		if f.neg {
			return fmt.Errorf("timers: run due: negative %s: %w", f.name, store.ErrInvalid)
		}
	}
	return nil
}

// config is a RunConfig with its defaults, and the Scheduler's claim.
type config struct {
	clock    clock.Clock
	logger   *slog.Logger
	metrics  telemetry.Metrics
	pageSize int
	// heldBackoff is how long a timer its handler cannot fire waits.
	heldBackoff time.Duration
	// claim is the Scheduler's claim the run fires under (nil: none).
	claim *claimHold
	// tracer starts the fires' spans.
	tracer tracing.Tracer
}

// config returns c's settings with their defaults filled in.
func (c RunConfig) config() config {
	cfg := config{clock: c.Clock, logger: c.Logger, metrics: telemetry.OrNoop(c.Metrics), pageSize: c.PageSize, heldBackoff: c.HeldBackoff,
		tracer: tracing.New(c.TracerProvider, tracing.Scope+"timers")}
	if cfg.clock == nil {
		cfg.clock = clock.Real{}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.pageSize < 1 {
		cfg.pageSize = DefaultPageSize
	}
	if cfg.heldBackoff < time.Millisecond {
		cfg.heldBackoff = DefaultHeldBackoff
	}
	return cfg
}
