// Package timers keeps durable timers in the store and fires them through
// handlers registered by kind.
//
// A timer is two rows of its partition, always written together in one
// guarded batch:
//
//	TimerKey(due_at_ms, kind, reference)  ->  the handler's value
//	TimerRefKey(kind, reference)           ->  U64Value(due_at_ms)
//
// The timer row orders timers by due time, so [RunDue] finds the due ones with
// one forward scan; the reference entry makes (kind, reference) name at
// most one timer and lets a writer find, guard and move it without a scan
// ([Schedule], [Cancel], [ReadRef]). Every batch that writes a timer also lowers
// the partition's wake time in the store's due index ([store.Batch.WakeAt]),
// so a scheduler finds the partition when the timer falls due.
//
// RunDue fires a partition's due timers oldest first, within a [Budget]. A
// handler returns a [Fired] outcome ([Done], [Reschedule] or [Retry]) carrying a
// batch of its own; RunDue applies that batch together with the timer's own
// change atomically, guarded by the timer row and reference entry still
// holding what the handler saw, and commits the outcomes of a page of
// timers together, in as few batches as the store's limits allow (see
// [Handler] for what that means to a handler). A timer changed meanwhile by
// another writer makes its guard fail and nothing of its outcome lands:
// each fire takes effect at most once per observed timer value.
//
// A [Scheduler] fires every partition of a store: it lists the due
// partitions, claims each under a lease and runs RunDue. On a store that
// commits several partitions at once ([store.Committer]) a worker claims
// up to [SchedulerConfig].ClaimBatch due partitions in one transaction and
// commits their outcomes and releases together, each partition's guards
// and outcome its own, so that partitions of a timer or two each cost two
// commits per batch rather than two each.
//
// Handlers are registered by [Kind] in a [Registry]. Kinds 1 to 255 are
// reserved for the library's own handlers; a service's handlers take kinds
// 256 to 65535, so that no kind the library adds later can collide with
// one a service uses (see Kind).
//
// # Traces
//
// With a tracer provider that records ([RunConfig].TracerProvider,
// [SchedulerConfig].TracerProvider, or the global one), each fire is a
// span, mkitfdb.timers.fire, with the timer's kind, its partition's kind
// and its attempt (1 on a first fire), an error when the handler failed or
// asked to retry; the handler's ctx holds it, so the library's handlers'
// spans (relay and outcome delivery) link or nest under it. A fire is a
// child of the span its caller's ctx holds, if any (a Scheduler's: the
// ctx of Run or Tick), a root span otherwise. Without a provider that records, no span is
// started and nothing is allocated for one.
//
// # Stores at mkit format 1
//
// A timer's failed attempts, last error and period are kept in its
// reference entry as a gen.TimerRefV2, which is format 2 of the library's
// namespace, mkit: a binary that reads only U64Value entries predates it.
// Writers write it only to a store whose mkit format is 2 or more
// (store.FormatOf; fdblayer's Layer keeps the format, package evolve
// raises it). A store that holds rows and no format row, one written
// before formats existed, is at format 1 until an operator raises mkit to
// 2 (mkitfdb formats raise); a new store starts at 2. At format 1 a
// reference entry holds the due time only (a U64Value), so what a failed
// or snoozed fire records is lost by the next fire:
//
//   - DueTimer.Attempts is 0 and LastError "" at every fire: a failure
//     waits its kind's RetryPolicy's first interval, never a longer one,
//     and a timer becomes a dead letter only when its error wraps
//     Permanent or its policy's MaxAttempts is 1; it is retried for ever
//     otherwise, as before retry policies.
//   - A periodic timer that failed or snoozed keeps no period time: its
//     retry's due time stands for it. DueTimer.Period is that due time,
//     and the period after a later Done is counted from it: an Every(d)
//     kind's periods shift by the retry's delay (each shift one retry's
//     wait), a Cron kind's do not (its next period is the schedule's first
//     time after the fire either way). A fire that succeeds loses nothing.
//
// Reference entries written before (TimerRefV2 of a store that had them)
// are read at every format, and rewritten as the format allows at their
// timer's next move. Readers read every version at every format.
package timers

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Kind says which handler fires a timer. Kinds are stored in timer keys:
// a kind's number never changes once released.
//
// Kinds come in two ranges, so that a service's kinds and the library's
// never collide, whatever either adds later:
//
//   - 1 to MaxLibraryKind (255) are reserved for the library's own
//     handlers (KindRelay, KindOutcomeDelivery, and any it adds).
//     Registry.Register accepts a handler of a reserved kind only if it is
//     a LibraryHandler;
//   - MinUserKind (256) to 65535 are for importing services' handlers; the
//     library never uses them;
//   - 0 is no kind: Register and Schedule reject it.
type Kind uint16

// The kind ranges (see Kind).
const (
	// MaxLibraryKind is the highest kind reserved for the library.
	MaxLibraryKind Kind = 255
	// MinUserKind is the lowest kind for importing services' handlers.
	MinUserKind Kind = 256
)

// The library's timer kinds, in the reserved range.
const (
	// KindRelay is the outbox relay's timer (reference "").
	KindRelay Kind = 7
	// KindOutcomeDelivery is the outcome-delivery timer (reference "").
	KindOutcomeDelivery Kind = 8
)

// String names the library's kinds and formats others as kind(N).
func (k Kind) String() string {
	switch k {
	case KindRelay:
		return "relay"
	case KindOutcomeDelivery:
		return "outcome-delivery"
	}
	return "kind(" + strconv.FormatUint(uint64(k), 10) + ")"
}

// checkUsable fails with an error wrapping store.ErrInvalid, naming k and
// the users' range, when k is 0, or reserved and reserved is false.
func (k Kind) checkUsable(reserved bool) error {
	switch {
	case k == 0:
		return fmt.Errorf("kind 0 is no kind; a service's kinds are %d to %d: %w",
			MinUserKind, uint16(math.MaxUint16), store.ErrInvalid)
	case k <= MaxLibraryKind && !reserved:
		return fmt.Errorf("kind %d is reserved for the library's handlers (1 to %d); a service's kinds are %d to %d: %w",
			uint16(k), MaxLibraryKind, MinUserKind, uint16(math.MaxUint16), store.ErrInvalid)
	}
	return nil
}

// label is the kind in decimal, for metrics.
func (k Kind) label() string { return strconv.FormatUint(uint64(k), 10) }

// RetryBackoff is how long a timer of the library's own kinds waits after
// a failure before it is due again (see DefaultRetryPolicy for a
// service's kinds).
const RetryBackoff = time.Second

// retryBackoffMs is RetryBackoff in the milliseconds of stored due times.
const retryBackoffMs = uint64(RetryBackoff / time.Millisecond)

// Timer is a timer to write: its identity (Kind, Reference), its due time
// and its handler-owned value. DueAt is kept to the millisecond
// (truncated, see store.EncodeTime).
type Timer struct {
	Kind      Kind
	Reference string
	DueAt     time.Time
	Value     store.Value
}

// DueTimer is a due timer as RunDue hands it to its handler: the stored row
// and its decoded key. Value is the value RunDue read; the handler's
// outcome lands only if the row still holds it.
type DueTimer struct {
	Key       store.Key
	DueAt     time.Time
	Kind      Kind
	Reference string
	Value     store.Value
	// Attempts counts the fires of this timer that failed since it last
	// succeeded (see RetryPolicy): 0 on a first fire.
	Attempts int
	// LastError is the last failure's text (truncated), "" when none.
	LastError string
	// Period is, for a periodic kind (see KindConfig.Period), the scheduled time
	// of the period this fire is for: the due time, unless the timer is
	// retrying or was snoozed. It is zero for other kinds.
	Period time.Time
}

// Ctx is what a handler sees of the run firing it. One Ctx is shared by
// every handler of a run: read it, never modify it.
type Ctx struct {
	// Store is the store the run reads and applies to.
	Store store.Store
	// Partition is the partition whose timers are firing.
	Partition store.Partition
	// Now is the run's time, to the millisecond: every timer fired has
	// DueAt <= Now.
	Now time.Time
	// Clock is the run's clock, for handlers that bound their own work.
	Clock clock.Clock
	// Logger is never nil.
	Logger *slog.Logger
	// Metrics is never nil.
	Metrics telemetry.Metrics
}

// Handler fires the timers of one kind. Fire is called with a due timer and
// returns its outcome: it reads what it needs through c.Store and puts its
// writes in the outcome's batch instead of applying them, so that they land
// atomically with the timer's own change. ctx bounds the fire. The batch
// may hold what HandlerCapabilities leaves; one that does not fit fails
// the timer.
//
// What a handler reads: RunDue fires the due timers of a page one after
// another and then commits their outcomes together, so a handler fires
// before the outcomes of the timers of its kind fired before it in the
// same run have committed, and reads the state without them (other
// kinds' outcomes have committed: RunDue commits them before a handler of
// another kind fires). The outcomes land as if applied one after another,
// in order: a handler that guards what it read (store.Guard, Equals,
// Absent) never overwrites an earlier outcome's write with a value
// computed from the state before it. Such a guard on a key an earlier
// outcome of the run writes holds only if that write leaves exactly what
// it requires; when it does not, the timer's outcome fails its guard
// (Report.Raced), nothing of it lands, and the timer stays due for the
// next run, which reads the earlier write. So a handler must guard every
// row its outcome depends on, as it must against other writers anyway,
// and a handler whose fire has effects outside its batch (a call to
// another system) must expect to fire again after a failed guard. A guard
// that fails for one timer never loses another timer's outcome.
//
// An error or a panic fails this timer only: RunDue logs it, counts it,
// records the attempt and the error's text with the timer and moves it
// later as the kind's [RetryPolicy] says, or makes it a dead letter when
// that was its last attempt or the error wraps [Permanent] (see
// [DeadLetter]). An error wrapping store.ErrCorrupt says stored data is
// corrupt: RunDue logs it, counts it in Report.Corrupt and Report.Held
// (not Failed) and moves the timer, value unchanged and guarded like any
// outcome, HeldBackoff after the run's time ([RunConfig].HeldBackoff), spending
// no attempt, so that it fires again once the data is repaired, without
// waking the partition at every poll. A Handler is called from one
// goroutine at a time per run, but several runs (of several partitions) may
// call it concurrently.
type Handler interface {
	Kind() Kind
	Fire(ctx context.Context, c *Ctx, t DueTimer) (Fired, error)
}

// LibraryHandler is a Handler of the library's own, whose kind lies in the
// range reserved for the library (1 to MaxLibraryKind): Registry.Register
// accepts a handler of a reserved kind only when it implements
// LibraryHandler and ReservedKind reports true. It is for the library's
// handlers only (relay.Handler, the outcome-delivery handler). A
// service's handler takes a kind from MinUserKind up instead: one that
// claimed a reserved kind could collide with a kind the library releases
// later, and its timers would be fired by the wrong handler. A wrapper of
// a library handler (a decorator adding tracing, say) must implement
// ReservedKind too, as embedding the handler's concrete type does and
// embedding the Handler interface does not.
type LibraryHandler interface {
	Handler
	// ReservedKind reports that the handler's kind is one the library
	// reserved for it.
	ReservedKind() bool
}

// Fired is a handler's outcome: Done, Reschedule, Retry or Snooze.
type Fired interface{ isFired() }

// Done completes the timer: RunDue deletes it (and its reference entry) in
// the same Apply as Batch, which may be nil. A timer of a periodic kind
// is moved to its next period instead (see KindConfig.Period).
type Done struct {
	Batch *store.Batch
}

// Reschedule moves the timer to DueAt (truncated to the millisecond) with
// Value, in the same Apply as Batch (which may be nil), and clears its
// failed attempts. A due time at or before the timer's own (the zero Time
// too) is moved to one millisecond after it, so a timer never fires twice
// at one due time and a run always makes progress; a DueAt before the
// Unix epoch fails the timer.
type Reschedule struct {
	DueAt time.Time
	Value store.Value
	Batch *store.Batch
}

// Retry fails this fire without an error: it spends an attempt of the
// kind's RetryPolicy, recording Err's text (nil: "retry"), and moves the
// timer, value unchanged, After the run's time, or as the policy says when
// After is 0 (always at least one millisecond after its own due time);
// when it was the last attempt, or Err wraps Permanent, the timer becomes a
// dead letter. It carries no batch: nothing the handler planned lands.
type Retry struct {
	After time.Duration
	Err   error
}

// Snooze moves the timer, value unchanged, For after the run's time (and
// at least one millisecond after its own due time), spending no attempt.
// It carries no batch.
type Snooze struct {
	For time.Duration
}

func (Done) isFired()       {}
func (Reschedule) isFired() {}
func (Retry) isFired()      {}
func (Snooze) isFired()     {}
