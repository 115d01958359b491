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
	// DefaultPageSize is the most timer rows one scan page reads (as
	// relay.ScanPageRows).
	DefaultPageSize = 64
)

// Budget bounds one RunDue. A zero field takes its default.
type Budget struct {
	// MaxTimers bounds the handler calls of the run.
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
	// RetryBackoffMs later (guarded like any outcome).
	Failed int
	// UnknownKind counts the kinds without a handler among the due timers,
	// each once per run. Their timers are left untouched.
	UnknownKind int
	// Corrupt counts due timers left in place because their key, reference
	// entry or value (a handler error wrapping store.ErrCorrupt) is corrupt.
	Corrupt int
	// Held counts due timers left untouched for a reason another run will
	// not fix by itself (an unknown kind, corrupt data). NextDueMs leaves
	// them out, so that they do not keep waking the partition; they are
	// examined again whenever it runs.
	Held int
	// More: the budget ended the run while a due timer it could fire
	// remained; run the partition again soon.
	More bool
	// NextDueMs is the earliest due time of a timer the run saw and could
	// fire later (held timers aside), 0 when it saw none. At or before the
	// run's time it names a timer still due: cut by the budget, or moved to
	// a due time the run had already passed (each timer fires at most once
	// per run).
	NextDueMs uint64
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
}

// WithClock sets the clock the duration budget is measured on and handlers
// see as Ctx.Clock (default clock.Real).
func WithClock(c clock.Clock) Option { return func(o *config) { o.clock = c } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *config) { o.logger = l } }

// WithMetrics sets where the run's counters go (default telemetry.Noop).
func WithMetrics(m telemetry.Metrics) Option { return func(o *config) { o.metrics = m } }

// WithPageSize bounds the timer rows of one scan page (default
// DefaultPageSize); values below 1 mean the default.
func WithPageSize(n int) Option { return func(o *config) { o.pageSize = n } }
