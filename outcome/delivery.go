package outcome

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Defaults of a DeliveryConfig.
const (
	// DefaultMaxRows is how many pending rows one fire examines (and so
	// how many sink calls it attempts).
	DefaultMaxRows = 16
	// DefaultSinkTimeout bounds one sink call.
	DefaultSinkTimeout = 5 * time.Second
)

// MaxRows is the most pending rows one fire examines on a store with
// caps: each acknowledgment costs outbox.AckOps operations, and with the
// backlog's (outbox.AckFixedOps) and the timer's own (timers.OutcomeOps)
// they must fit one batch, so that a fire's acknowledgments land
// atomically. With the default 100-operation batch it is 30. At least 1.
func MaxRows(caps store.Capabilities) int {
	return max((caps.MaxBatchOps-caps.ReservedBatchOps-timers.OutcomeOps-outbox.AckFixedOps)/outbox.AckOps, 1)
}

// DeliveryConfig configures a Delivery. Sink and Sources are required; a zero
// field takes its default.
type DeliveryConfig struct {
	// Sink takes the outcomes.
	Sink Sink
	// Sources are the outcome sources whose pending rows the Delivery
	// delivers (built by NewSource), with distinct names. A pending row of
	// a source not listed is kept and logged.
	Sources []Source
	// Metrics receives the backlog gauges and the synthetic-outcome
	// counter (nil: the run's, timers.Ctx.Metrics).
	Metrics telemetry.Metrics
	// SinkTimeout bounds one sink call (default DefaultSinkTimeout): a
	// call still running then is a failed delivery, and the fire stops.
	SinkTimeout time.Duration
	// MaxRows bounds the pending rows one fire examines (default
	// DefaultMaxRows), clamped to MaxRows of the store's capabilities.
	MaxRows int
	// Clock times a fire against FireBudget (nil: the run's,
	// timers.Ctx.Clock).
	Clock clock.Clock
	// FireBudget bounds one fire's wall-clock time (default twice
	// SinkTimeout): once spent, the fire makes no further sink call and
	// reschedules itself at once, so that a slow but successful sink
	// cannot hold a scheduler worker.
	FireBudget time.Duration
	// Sleep waits out SinkTimeout, returning nil when it passed and ctx's
	// error when ctx ended first (nil: clock.Sleep, in real time). Tests
	// inject their own.
	Sleep func(ctx context.Context, d time.Duration) error
	// TracerProvider traces each sink call (a span continuing the trace
	// of the writer that queued the outcome; see Delivery). Nil means
	// otel.GetTracerProvider() at each call: while no SDK is installed
	// there, nothing is recorded or allocated.
	TracerProvider trace.TracerProvider
}

// Delivery is the outcome-delivery timer's handler (kind
// timers.KindOutcomeDelivery): register it in a timers.Registry, and the
// timers outbox.Builder creates as outcomes are queued fire it. It pushes
// each partition's terminal outcomes, of every source in its DeliveryConfig, to
// its Sink, at least once, in sequence order within a fire, and
// acknowledges the delivered ones (deletes their pending rows, and their
// records when the source says so). It serves partitions of any schema:
// each pending row names its source and its record's key.
//
// A Delivery is immutable once built and safe for concurrent use by runs
// of different partitions; two runs of one partition race each other's
// guards (a scheduler's lease keeps them apart), which keeps every
// acknowledgment exact.
type Delivery struct {
	sink    Sink
	sources map[gen.OutcomeSource]*sourceCore
	legacy  *sourceCore // the source of pending rows without a value
	metrics telemetry.Metrics
	timeout time.Duration
	maxRows int
	clock   clock.Clock
	budget  time.Duration
	sleep   func(context.Context, time.Duration) error
	tracer  tracing.Tracer
}

var _ timers.LibraryHandler = (*Delivery)(nil)

// NewDelivery builds a Delivery. It fails with an error wrapping
// store.ErrInvalid for a nil sink, no source, a nil source, two sources
// of one name or two that set SourceConfig.LegacyKey, or a negative
// SinkTimeout, MaxRows or FireBudget.
func NewDelivery(c DeliveryConfig) (*Delivery, error) {
	if c.Sink == nil {
		return nil, fmt.Errorf("outcome: delivery without a sink: %w", store.ErrInvalid)
	}
	if len(c.Sources) == 0 {
		return nil, fmt.Errorf("outcome: delivery without a source: %w", store.ErrInvalid)
	}
	sources := make(map[gen.OutcomeSource]*sourceCore, len(c.Sources))
	var legacy *sourceCore
	for i, src := range c.Sources {
		var sc *sourceCore
		if src != nil {
			sc = src.core()
		}
		if sc == nil {
			return nil, fmt.Errorf("outcome: delivery source %d is nil: %w", i, store.ErrInvalid)
		}
		if _, dup := sources[sc.name]; dup {
			return nil, fmt.Errorf("outcome: two delivery sources named %q: %w", sc.name, store.ErrInvalid)
		}
		sources[sc.name] = sc
		if sc.legacyKey != nil {
			if legacy != nil {
				return nil, fmt.Errorf("outcome: delivery sources %q and %q both resolve legacy pending rows: %w", legacy.name, sc.name, store.ErrInvalid)
			}
			legacy = sc
		}
	}
	switch {
	case c.SinkTimeout < 0:
		return nil, fmt.Errorf("outcome: DeliveryConfig.SinkTimeout %v is negative: %w", c.SinkTimeout, store.ErrInvalid)
	case c.MaxRows < 0:
		return nil, fmt.Errorf("outcome: DeliveryConfig.MaxRows %d is negative: %w", c.MaxRows, store.ErrInvalid)
	case c.FireBudget < 0:
		return nil, fmt.Errorf("outcome: DeliveryConfig.FireBudget %v is negative: %w", c.FireBudget, store.ErrInvalid)
	}
	d := &Delivery{sink: c.Sink, sources: sources, legacy: legacy, metrics: c.Metrics, timeout: c.SinkTimeout,
		maxRows: c.MaxRows, clock: c.Clock, budget: c.FireBudget, sleep: c.Sleep, tracer: tracing.New(c.TracerProvider, tracing.Scope+"outcome")}
	if d.timeout == 0 {
		d.timeout = DefaultSinkTimeout
	}
	if d.maxRows == 0 {
		d.maxRows = DefaultMaxRows
	}
	if d.budget == 0 {
		d.budget = 2 * d.timeout
		if d.budget < d.timeout { // overflow
			d.budget = math.MaxInt64
		}
	}
	if d.sleep == nil {
		d.sleep = clock.Sleep
	}
	return d, nil
}

// Kind returns timers.KindOutcomeDelivery.
func (*Delivery) Kind() timers.Kind { return timers.KindOutcomeDelivery }

// ReservedKind marks Delivery as the library's own (timers.LibraryHandler).
func (*Delivery) ReservedKind() bool { return true }

// Keys and ranges of the rows a fire reads.
var (
	backlogKey               = outbox.BacklogKey()
	pendingStart, pendingEnd = gen.ClassRange(gen.TagOutcomePendingKey)
)

// errSinkTimeout is the failure of a sink call cut at the sink timeout.
var errSinkTimeout = errors.New("the sink did not answer within the sink timeout")

// Fire runs one delivery fire of c.Partition:
//
//   - it reads the backlog (and sets the backlog gauges); an empty one
//     completes the timer, guarded by the backlog as read;
//   - it decodes the timer value (the backoff attempt and the cursor of
//     the last row examined) and scans one page of pending rows after the
//     cursor, wrapping to the head once when the cursor is past the end;
//   - for each row: an invalid index key or value, a source the Delivery
//     does not have, a missing or undecodable record, or one its source
//     cannot make an outcome of (not terminal, an invalid envelope) is
//     logged and kept; the records of the others are read in one GetMany;
//     synthetic outcomes (SourceConfig.Synthetic) are acknowledged locally
//     and counted; the others go to the sink, each call bounded by the
//     sink timeout.
//     The first failure or timeout stops the fire; so does the fire
//     budget, before the next sink call;
//   - it plans the acknowledgments (outbox.Acks) against the backlog read
//     again after the sink calls, and guards that value, so that an
//     outcome queued during the fire fails the guard and the next fire
//     plans again (and delivers the acknowledged rows again: at least
//     once). Each acknowledgment deletes the pending row, and the record
//     unless its source keeps it (SourceConfig.OnAck).
//
// It returns Done when the acknowledgments empty the backlog, else
// Reschedule: resuming just after the row that failed, or at the first
// row not tried; the attempt raised only by a failed or hung sink call;
// due at once after any delivery, else after the backoff (BaseBackoff
// doubling per attempt plus jitter, or the sink's retry-after hint if
// longer, at most MaxBackoff).
//
// Fire fails with store.ErrCorrupt for a backlog or timer value that does
// not decode (RunDue then keeps the timer, unchanged, for a later run),
// with store.ErrInvalid for a nil store or partition or a partition whose
// identity does not encode, with ctx's error when ctx ends, and with the
// store's errors. Nothing it planned lands then.
func (d *Delivery) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	if c == nil || c.Store == nil || c.Partition == nil {
		return nil, fmt.Errorf("outcome: fire without a store or partition: %w", store.ErrInvalid)
	}
	f := &fire{d: d, c: c, s: c.Store, p: c.Partition, log: c.Logger, metrics: d.metrics, clock: d.clock}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.metrics == nil {
		f.metrics = telemetry.OrNoop(c.Metrics)
	}
	if f.clock == nil {
		f.clock = c.Clock
	}
	if f.clock == nil {
		f.clock = clock.Real{}
	}
	id, err := f.p.AppendTuple(nil)
	if err != nil {
		return nil, fmt.Errorf("outcome: partition %s: %w", store.PartitionName(f.p), errInvalid(err))
	}
	f.id = id
	return f.run(ctx, t)
}

// errInvalid returns err, wrapping store.ErrInvalid when it does not
// already (a partition's AppendTuple may fail with an error of its own).
func errInvalid(err error) error {
	if errors.Is(err, store.ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrInvalid, err)
}
