// Package relay drains a source partition's outbox: it delivers queued
// relay rows ([outbox.Builder.Relay]) to their target partitions, in
// sequence order per target, exactly once in effect, and deletes them from
// the source.
//
// # Rows
//
// In the source partition (the relay timer's partition):
//
//	OutboxSequenceKey   U64Value: the last sequence allocated
//	RelayKey(seq)       RelayV1: one queued row (target, puts, deletes, at_ms)
//	RelayScanKey        RelayScanV1: the cycle's end, the cursor, the blocked targets
//
// In each target partition:
//
//	RelayHighWaterKey(source)  U64Value: the highest sequence from source applied here
//
// Partitions are named by their tuple identities ([store.IdentityOf]): a
// row's target, a blocked target and a high-water key's source. So the
// source and the targets may be partitions of any schema, and the relay
// never parses them: it addresses each target as a [store.Identity].
//
// # One fire
//
// A fire reads a bounded window of queued rows after the scan cursor,
// groups them by target (in order of each target's first sequence) and
// delivers each group in target batches: the rows' writes plus the new
// high-water mark, guarded by the mark the relay read. A row at or below
// the mark was applied before (by an earlier fire whose checkpoint did not
// land, or whose apply's result was lost) and is never applied again.
// Different targets are delivered concurrently ([Budget.Concurrency]), each
// target's batches one after another; what the fire delivers, pauses at
// and blocks is what delivering the targets one after another, in order of
// first sequence, would give. Then it checkpoints: it deletes the
// delivered rows from the source, each guarded by its exact value,
// together with the new scan state, guarded by the state it read; the last
// checkpoint batch rides on the fire's outcome, with the timer's own
// change. A target whose delivery fails is blocked for the rest of the
// cycle (a cycle ends at the sequence that was current when it began); its
// rows stay queued and the next cycle retries them from the head. Nothing
// is ever skipped: a corrupt row stops the window, and the valid prefix
// before it is checkpointed. A fire completes the relay timer (Done) only
// when its reads showed nothing queued behind its cursor, well-formed or
// not: when nothing was queued after the cycle began, its window reads on
// past the cycle's end to the end of the queue class (a malformed key
// there is a corrupt row, a row there is the next cycle's), and a window
// its budget cut asks for one row more to see what follows. A key behind
// the cursor keeps the timer; the next fire meets it.
//
// On FoundationDB, where each transaction, read and commit waits for the
// cluster, a fire waits in sequence for: the outbox state and the queue's
// first page, read side by side (the whole window, when its rows fit one
// page of the store's byte bound: see ScanPageRows); any further page; the
// targets' lanes, up to Concurrency at once, each target batch one
// transaction (its high-water read and its commit); a commit per
// checkpoint batch but the last (the first one's guards read ahead beside
// the lanes, on a source store that is a [store.Prefetcher]); and the
// outcome's commit, which carries the last. It reads the queue's head for
// the backlog gauge only when the window does not show it (rows remain
// below the cursor for blocked targets), and it never reads the queue
// again after the checkpoint. It never holds a transaction while it waits
// for another call: a read ahead holds nothing another transaction waits
// for, so a fire cannot wait for itself, on whatever engine.
//
// A [Handler] is safe for concurrent use by runs of different partitions;
// two runs of one partition race each other's guards, which keep delivery
// exactly-once in effect (a scheduler's lease keeps them apart).
//
// # Corrupt rows
//
// A queued row whose key or value does not decode (or names no partition)
// stops the window: the rows before it are delivered and checkpointed,
// the row and every row after it stay queued, never skipped, and the
// source is held back. The fire logs the row ("relay: corrupt relay row;
// tick stopped", with the source, the row's key in hex and the decoding
// error) and moves the relay timer [CorruptHoldMin] later; each fire that
// still finds a corrupt row there holds the source twice as long, up to
// [CorruptHoldMax], and logs it again, so the log slows with the hold. The
// hold is kept in the relay timer's value (a [gen.RelayTimerV1]; the timer
// of a source held by nothing has an empty value), and ends with the row:
// the first fire that finds no corrupt row delivers on and clears it.
//
// A row of a newer version than this binary reads (store.ErrNewerVersion:
// a newer binary queued it, during a rolling deploy) is held the same way,
// never skipped and never taken for corrupt: the fire logs "relay: relay
// row of a newer version than this binary reads", counts it in
// mkitfdb_relay_newer_rows_total ([telemetry.MetricRelayNewerRows]), and
// holds the source until a process of a binary that reads it fires the
// relay timer. While the store's format is the one the older binary knows,
// newer binaries write no such row (see package evolve).
//
// To repair a row, an operator runs the operator's command (cmd/mkitfdb,
// or a service's own built from package admin): mkitfdb partitions shows
// the held source and the row with the decoder's reason (the key the
// relay logs in hex is what -key x:HEX takes), and mkitfdb quarantine
// moves the row aside into the partition's quarantine range,
// with who, when and why, in one batch guarded on the row as shown; the
// same batch moves the relay timer to now with its hold cleared, and the
// relay delivers the rows behind it at its next fire. The relay
// tolerates the gap in the sequence. mkitfdb restore puts the row back.
// The command does so through [QuarantineRow] and [RestoreRow], which a
// service's own tools can call too, and unblocks a target with [Unblock].
//
// # Traces
//
// With a tracer provider that records ([HandlerConfig].TracerProvider, or
// the global one), each attempt to deliver a target batch is a span,
// mkitfdb.relay.deliver, of kind consumer, with the source's partition
// kind, the attempt (1, then 2 after a failed guard), the rows offered and
// applied and their sequences; an attempt that blocks its target is an
// error. A row queued by a writer with an active span keeps the writer's
// trace context (a gen.RelayV2, see package outbox): a batch whose traced
// rows share one trace is a child of the first writer's span, linking the
// others and the timer's fire; a batch of several traces is a child of the
// fire's span and links each writer. A blocked target's next cycle tries
// again in a span of its own, in the same trace. Without a provider that
// records, no span is started and nothing is allocated for one.
//
// Sizes are accounted, not re-validated: each row's operations and bytes
// are computed once, when it is decoded, and the largest prefix that fits
// one target batch, and each checkpoint, are sized by running sums against
// the same limits Validate checks (cloning the growing batch and
// validating it per row would be quadratic in the window); the one batch
// that is applied is still validated for real. The outbox sequence and the
// scan state are read in one GetMany (one snapshot); a target batch is
// validated against the target store's Capabilities().Full() plus the
// hook's ReservedOps for every kind of target; and a row that cannot fit
// one target batch is logged wherever that is found.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Bounds of one fire, sized for a process of modest memory (a 128 MiB
// isolate); MaxBytes is configurable (Budget).
const (
	// DefaultMaxBytes bounds the encoded bytes (keys and values) of the
	// queued rows one fire reads. A first row larger than this is still
	// read, alone.
	DefaultMaxBytes = 4 << 20
	// ScanPageRows is the most rows one scan page of the queue reads from
	// a source store whose calls do not wait for a cluster (the memory
	// and bbolt engines: store.OverlapsCalls false), where a page decoded
	// while its rows are still in the cache costs less than one read of
	// the whole window; and from a store that does not bound a page's
	// bytes (Capabilities.MaxScanBytes 0), so that a page never reads
	// many rows past the fire's byte budget. A store whose calls wait and
	// that bounds a page's bytes (fdblayer's Layer on FoundationDB, 1 MiB
	// a page by default) is asked for all the rows the window has left:
	// a window of small rows is one read, one round trip, and a page of
	// large rows ends within the store's bound.
	ScanPageRows = 64
	// MaxHookReadKeys bounds the keys of one target snapshot, the
	// high-water key included: a hook that declares more gets fewer rows
	// per batch.
	MaxHookReadKeys = 9
	// MaxBlockedTargets bounds the targets blocked in one cycle; at the
	// cap the cycle ends and the next starts from the head.
	MaxBlockedTargets = gen.MaxRelayScanV1Blocked
	// MaxRelayWrites bounds the row writes (puts and deletes) of one target
	// batch, so that with the high-water guard and put it stays within a
	// 100-operation batch (store.DefaultMaxBatchOps): the bound the outbox
	// writer puts on one row.
	MaxRelayWrites = outbox.MaxRelayWrites
)

// Defaults of a Budget. FoundationDB bounds each target batch
// (one transaction) by 5 seconds and 10,000,000 bytes, not a fire: a
// fire's length is bounded by the run's context.
const (
	// DefaultMaxRows: a fire reads at most 4*MaxRows rows.
	DefaultMaxRows = 64
	// DefaultMaxTargets: a fire applies batches to at most this many
	// targets.
	DefaultMaxTargets = 32
	// DefaultConcurrency: a fire delivers to at most this many targets at
	// once. On FoundationDB each target batch waits for the cluster (a
	// snapshot read and a commit), so a fire to n targets takes about
	// ceil(n/Concurrency) targets' round trips instead of n.
	DefaultConcurrency = 8
)

// DefaultLagBound is the age of a queued row past which a fire logs a
// warning and counts telemetry.MetricRelayLagExceeded.
const DefaultLagBound = time.Minute

// Budget bounds one fire. A zero field takes its default. A fire cut by
// the budget checkpoints what it did and reschedules itself; the next fire
// resumes at the first row it did not attempt.
type Budget struct {
	// MaxRows sizes the window: a fire reads at most 4*MaxRows queued rows
	// (default DefaultMaxRows).
	MaxRows int
	// MaxTargets bounds the targets a fire applies batches to (default
	// DefaultMaxTargets). Targets whose rows are all duplicates cost a
	// high-water read but no slot.
	MaxTargets int
	// MaxTargetCalls, when positive, bounds the target store calls
	// (snapshot reads and applies) per target, at least 2, and per fire,
	// that times MaxTargets. Zero means no bound: the bound is for hosts
	// that limit requests per invocation, which FoundationDB does not.
	MaxTargetCalls int
	// MaxBytes bounds the encoded bytes of the rows a fire reads (default
	// DefaultMaxBytes).
	MaxBytes int
	// Concurrency bounds the targets a fire delivers to at once, each in
	// a goroutine of its own (default [DefaultConcurrency]), and lets the
	// fire read the outbox state and the queue's first page side by side.
	// Each target's batches stay in sequence order, one after another;
	// what a fire delivers, pauses at and blocks is what delivering the
	// targets one after another gives, whatever order concurrent
	// deliveries finish in. 1 delivers one target after another on the
	// fire's own goroutine, as does a Handler whose Target store does not
	// overlap calls made side by side ([store.OverlapsCalls]: the memory
	// and bbolt engines run one writer at a time, so lanes would only
	// contend for it).
	Concurrency int
}

// withDefaults fills the zero fields and keeps the products of the
// bounds (4*MaxRows, MaxTargetCalls*MaxTargets) within an int.
func (b Budget) withDefaults() Budget {
	if b.MaxRows <= 0 {
		b.MaxRows = DefaultMaxRows
	}
	b.MaxRows = min(b.MaxRows, math.MaxInt32)
	if b.MaxTargets <= 0 {
		b.MaxTargets = DefaultMaxTargets
	}
	b.MaxTargets = min(b.MaxTargets, math.MaxInt32)
	b.MaxTargetCalls = min(max(b.MaxTargetCalls, 0), math.MaxInt32)
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultMaxBytes
	}
	if b.Concurrency <= 0 {
		b.Concurrency = DefaultConcurrency
	}
	b.Concurrency = min(b.Concurrency, math.MaxInt32)
	return b
}

// HandlerConfig configures a relay Handler (see NewHandler). Target is
// required; a zero field takes its default.
type HandlerConfig struct {
	// Target is the store of the target partitions; it may be the
	// source's own store.
	Target store.Store
	// Hook extends target batches (nil: NoHook).
	Hook Hook
	// Budget bounds each fire; each of its zero fields takes its default.
	Budget Budget
	// Metrics receives the backlog gauge and the lag counter (nil: the
	// run's, timers.Ctx.Metrics).
	Metrics telemetry.Metrics
	// LagBound is the row age a fire warns about (default
	// DefaultLagBound).
	LagBound time.Duration
	// TracerProvider traces each attempt to deliver a target batch (a
	// span continuing the trace of the writers that queued its rows; see
	// the package doc). Nil means otel.GetTracerProvider() at each fire:
	// while no SDK is installed there, nothing is recorded or allocated.
	TracerProvider trace.TracerProvider
}

// Handler is the relay timer's handler (kind timers.KindRelay), built by
// NewHandler: register it in a timers.Registry. Its source is the
// timer's partition, of any schema (the high-water key names it by its
// tuple identity); its targets are the partitions the rows name by their
// tuple identities, of any schema, in the Target store, which may be the
// source's store. Distinct producers may upsert the same target key when its value
// is identical; a key that is ever relay-deleted must have exactly one
// producer, so that its source sequence orders every update and delete.
// High-water rows in targets never expire.
//
// A Handler is immutable and safe for concurrent use; it must not be
// copied. The zero Handler has no target: its Fire fails.
type Handler struct {
	target     store.Store
	hook       Hook
	budget     Budget // its defaults filled in
	metrics    telemetry.Metrics
	lagBoundMs uint64
	tracer     tracing.Tracer

	// newLanes, when set, runs the lanes of each dispatch instead of
	// goroutines, whatever the Target store (tests: a deterministic
	// schedule).
	newLanes func() laneRunner
}

// NewHandler returns the relay handler c configures. It fails with an
// error wrapping store.ErrInvalid, naming the field, for a nil Target or
// a negative LagBound or Budget field. It does no I/O.
func NewHandler(c HandlerConfig) (*Handler, error) {
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"Target is nil", c.Target == nil},
		{"LagBound is negative", c.LagBound < 0},
		{"Budget.MaxRows is negative", c.Budget.MaxRows < 0},
		{"Budget.MaxTargets is negative", c.Budget.MaxTargets < 0},
		{"Budget.MaxTargetCalls is negative", c.Budget.MaxTargetCalls < 0},
		{"Budget.MaxBytes is negative", c.Budget.MaxBytes < 0},
		{"Budget.Concurrency is negative", c.Budget.Concurrency < 0},
	} {
		if f.bad {
			return nil, fmt.Errorf("relay: HandlerConfig.%s: %w", f.name, store.ErrInvalid)
		}
	}
	h := &Handler{target: c.Target, hook: c.Hook, budget: c.Budget.withDefaults(), metrics: c.Metrics,
		lagBoundMs: uint64(DefaultLagBound / time.Millisecond), tracer: tracing.New(c.TracerProvider, tracing.Scope+"relay")}
	if h.hook == nil {
		h.hook = NoHook{}
	}
	if c.LagBound > 0 {
		h.lagBoundMs = uint64(c.LagBound / time.Millisecond)
	}
	return h, nil
}

var _ timers.Handler = (*Handler)(nil)

// Kind returns timers.KindRelay.
func (*Handler) Kind() timers.Kind { return timers.KindRelay }

// ReservedKind marks Handler as the library's own (timers.LibraryHandler).
func (*Handler) ReservedKind() bool { return true }

// Keys of the source's singleton rows, built once. Stores do not retain
// or modify keys passed to them.
var (
	sequenceKey = outbox.SequenceKey()
	scanKey     = store.Key(gen.AppendRelayScanKey(nil))
	stateKeys   = []store.Key{sequenceKey, scanKey}
	// queueStart and queueEnd bound the relay rows (gen.RelayKey).
	queueStart, queueEnd = gen.ClassRange(gen.TagRelayKey)
)

// Fire runs one relay fire for the source c.Partition (see the package
// doc) and returns, each carrying the fire's last checkpoint batch:
//
//   - Reschedule, one millisecond after c.Now when it delivered rows and
//     timers.RetryBackoff after it when it did not (and always after the
//     timer's own due time), while rows remain queued, blocked or not yet
//     scanned in this cycle, or something is queued behind the cursor
//     that the fire did not read (past its budget, or past the cycle);
//   - Reschedule after a hold that grows from [CorruptHoldMin] to
//     [CorruptHoldMax], the hold in the timer's value, when a corrupt row
//     stopped the window (the valid prefix before it is checkpointed; the
//     row is logged and never skipped; see Corrupt rows in the package doc);
//   - Done when no row remains: the fire's reads showed nothing queued
//     behind its cursor, no row and no key of the queue at all, and the
//     outbox sequence still holds the value the fire read (Done is
//     guarded by it, so that a row queued during the fire keeps the
//     timer);
//   - Retry, carrying nothing, when a checkpoint batch before the last lost
//     a race (another writer changed the scan state or a queued row).
//
// Target failures (store errors, a failed hook, a row too large for one
// target batch) block that target, never fail the fire. Fire fails with
// store.ErrInvalid when the source partition is nil or its identity does
// not encode (or is over gen.MaxRelayHighWaterKeySource bytes) or h has
// no target (the zero Handler), with store.ErrCorrupt when the outbox sequence does not decode, and
// with the source store's errors; the checkpoints applied before such an
// error stay, and are consistent. The outcome's batch is the caller's: it
// shares no memory with the handler. A hook's panic is raised again from
// Fire, on the caller's goroutine.
func (h *Handler) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	f, err := h.newFire(c)
	if err != nil {
		return nil, err
	}
	defer f.release()
	if err := f.readStart(ctx); err != nil {
		return nil, err
	}
	f.decodeWindow()
	if err := f.recordBacklog(ctx); err != nil {
		return nil, err
	}
	f.beginCheckpoint(ctx)
	defer f.early.end() // before the scratch is released: deferred later
	f.dispatch(ctx)
	last, landed, err := f.checkpoint(ctx, t)
	if err != nil {
		return nil, err
	}
	if !landed {
		return timers.Retry{}, nil
	}
	if f.corrupt {
		// The corrupt row stays at the front of the next window.
		return f.holdBack(t, last), nil
	}
	if f.remaining() {
		wait := time.Millisecond
		if f.nDelivered == 0 {
			wait = timers.RetryBackoff
		}
		return timers.Reschedule{DueAt: c.Now.Add(wait), Value: store.Value{}, Batch: last}, nil
	}
	// Guard the sequence either way: a first-ever row queued during this
	// fire moves it from absent, so Done fails its guard and the timer
	// stays.
	return timers.Done{Batch: last.Require(store.Guard(sequenceKey, f.sequenceValue))}, nil
}

// newFire checks the handler and the source and starts a fire.
func (h *Handler) newFire(c *timers.Ctx) (*fire, error) {
	if c == nil || c.Store == nil {
		return nil, fmt.Errorf("relay: fire without a source store: %w", store.ErrInvalid)
	}
	src := c.Partition
	if src == nil {
		return nil, fmt.Errorf("relay: fire without a source partition: %w", store.ErrInvalid)
	}
	if h.target == nil {
		return nil, fmt.Errorf("relay: handler has no target store (build it with NewHandler): %w", store.ErrInvalid)
	}
	rh, err := HighWaterKey(src)
	if err != nil {
		return nil, err
	}
	nowMs, _ := store.EncodeTime(c.Now) // 0 before the epoch
	f := &fire{
		scratch:    getScratch(),
		h:          h,
		c:          c,
		src:        src,
		hook:       h.hook,
		budget:     h.budget,
		targetCaps: h.target.Capabilities().Full(),
		sourceCaps: c.Store.Capabilities(),
		rh:         rh,
		log:        c.Logger,
		metrics:    h.metrics,
		lagBoundMs: h.lagBoundMs,
		nowMs:      nowMs,
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.metrics == nil {
		f.metrics = telemetry.OrNoop(c.Metrics)
	}
	if f.budget.Concurrency > 1 && h.newLanes == nil && !store.OverlapsCalls(h.target) {
		f.budget.Concurrency = 1
	}
	f.windowPages = f.sourceCaps.MaxScanBytes > 0 && store.OverlapsCalls(c.Store)
	return f, nil
}

// ScanKey returns the key of a source's relay scan state (a
// gen.RelayScanKey, holding a gen.RelayScanV1: the cycle's end, the
// cursor and the blocked targets; see Unblock). The key is shared: do not
// modify it.
func ScanKey() store.Key { return scanKey }

// HighWaterKey returns the key that holds, in every target partition, the
// highest sequence delivered from source (a gen.U64Value): a
// gen.RelayHighWaterKey naming source by its tuple identity, so sources
// of any schema never share one. It fails with an error wrapping
// store.ErrInvalid when source is nil or its identity does not encode or
// is over gen.MaxRelayHighWaterKeySource bytes.
func HighWaterKey(source store.Partition) (store.Key, error) {
	if source == nil {
		return nil, fmt.Errorf("relay: high-water key of a nil source partition: %w", store.ErrInvalid)
	}
	id, err := source.AppendTuple(nil)
	if err == nil {
		id, err = gen.AppendRelayHighWaterKey(nil, id)
	}
	if err != nil && !errors.Is(err, store.ErrInvalid) {
		err = fmt.Errorf("%w: %w", store.ErrInvalid, err) // a partition's own error
	}
	if err != nil {
		return nil, fmt.Errorf("relay: high-water key of %s: %w", store.PartitionName(source), err)
	}
	return id, nil
}

// fire is the state of one Fire.
type fire struct {
	h          *Handler
	c          *timers.Ctx
	src        store.Partition // c.Partition
	hook       Hook
	budget     Budget
	targetCaps store.Capabilities // Full: a target batch may use every operation
	sourceCaps store.Capabilities
	rh         store.Key // RelayHighWaterKey(src), in every target
	log        *slog.Logger
	metrics    telemetry.Metrics
	lagBoundMs uint64
	nowMs      uint64 // c.Now, as relay rows stamp it
	// windowPages: a scan page of the window asks for every row the
	// window has left (see ScanPageRows and pageRows).
	windowPages bool

	// What readState read.
	sequence      uint64
	sequenceValue store.Value
	scan          gen.RelayScanV1
	scanValue     store.Value // the raw value (even a corrupt one), for the guard

	// decodeRead's progress: raw[:decoded] is decoded, needPuts and
	// needDeletes size the arenas of the next fire.
	decoded               int
	needPuts, needDeletes int

	// scratch holds the window (rows read, decoded and grouped), the
	// delivery results and the batches being built.
	*scratch
}

// release returns the fire's scratch memory for the next fire.
func (f *fire) release() {
	putScratch(f.scratch)
	f.scratch = nil
}

// remaining reports whether queued work remains after the checkpoint: a
// blocked target's rows, rows of the cycle not yet scanned or not
// delivered, rows queued after the cycle began (the outbox sequence read
// is past the cycle's end: no fire of this cycle reads them, and only a
// fire reading them deletes them), or anything the window's reads did not
// show gone after its rows (see window.tailEmpty): a key past a budget's
// cut, malformed or not, or a row past the cycle. Rows queued during the
// fire move the sequence, which Done's guard catches.
func (f *fire) remaining() bool {
	return len(f.scan.Blocked) > 0 || f.scan.Cursor < f.scan.CycleEnd || len(f.rows) > f.nDelivered ||
		f.sequence > f.scan.CycleEnd || !f.tailEmpty
}

// addSat adds without wrapping past math.MaxUint64.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
