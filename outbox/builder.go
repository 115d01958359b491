package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Builder appends relay rows and terminal outcome rows to one partition's
// outbox, allocating their sequences from the observed outbox sequence,
// and finishes them into a batch with the guards that make the append
// atomic. Every append checks its bounds
// first and, when one is broken, fails with an error wrapping
// store.ErrInvalid and appends nothing. A Builder is not safe for
// concurrent use.
//
// An append keeps the trace context of its ctx's span with the row (a
// RelayV2 or OutcomePendingV2), so that the row's delivery continues the
// writer's trace, when the span is valid and the store's format of the
// library's namespace is 2 or more; otherwise it writes the row as a
// RelayV1 or OutcomePendingV1, which every process reads, at no cost.
type Builder struct {
	s        store.Store
	caps     store.Capabilities
	format   uint32 // the store's format of gen.SchemaNamespace
	nowMs    uint64
	observed Observed
	last     uint64 // the last sequence allocated (observed, then ours)
	first    uint64 // the observed sequence
	backlog  gen.Backlog
	prior    gen.Backlog // the observed backlog

	relays   []store.Write
	outcomes []outcomeRow
	ids      map[gen.OutcomeID]struct{}
	ops      int // preconditions and writes Finish will add
	bytes    int // their key and value bytes
	finished bool
}

type outcomeRow struct {
	key        store.Key
	prior      store.Value
	terminal   store.Value
	pendingKey store.Key
	pending    store.Value
}

// NewBuilder returns a builder over the outbox state o a writer read from
// s (see Read). s's Capabilities bound every row, and s's format of the
// library's namespace says which versions of its rows the builder may
// write (see Builder); neither is I/O, so it may be called inside a
// store.Transact function. now, to the millisecond, stamps relay rows
// (RelayV1.AtMs) and outcome rows (OutcomePendingV1.AtMs), and is the due
// time of any timer Finish creates. It fails with an error wrapping
// store.ErrInvalid for a nil s or a now before the Unix epoch, with one
// wrapping store.ErrCorrupt when o's sequence, backlog or relay timer
// entry does not decode, and as timers.DecodeRef does
// (store.ErrNewerVersion) for a relay timer entry of a version newer than
// this binary reads.
func NewBuilder(s store.Store, now time.Time, o Observed) (*Builder, error) {
	if s == nil {
		return nil, fmt.Errorf("outbox: new builder without a store: %w", store.ErrInvalid)
	}
	nowMs, err := store.EncodeTime(now)
	if err != nil {
		return nil, fmt.Errorf("outbox: new builder: %w", err)
	}
	seq, err := DecodeSequence(o.Sequence)
	if err != nil {
		return nil, err
	}
	backlog, err := DecodeBacklog(o.Backlog)
	if err != nil {
		return nil, err
	}
	if o.RelayTimer != nil {
		if _, err := timers.DecodeRef(o.RelayTimer); err != nil {
			return nil, fmt.Errorf("outbox: relay timer: %w", err)
		}
	}
	return &Builder{s: s, caps: s.Capabilities(), format: store.FormatOf(s, gen.SchemaNamespace), nowMs: nowMs, observed: o, last: seq, first: seq, backlog: backlog, prior: backlog}, nil
}

// Format returns the store's format of namespace (store.FormatOf of the
// store the Builder was made for): the newest format a row of that
// namespace the writer adds to the batch may be written in (a generated
// family's Encode(v, format)). It never does I/O.
func (b *Builder) Format(namespace string) uint32 { return store.FormatOf(b.s, namespace) }

// Relay appends a relay row: puts and deletes to apply, in order, to the
// target partition, of any schema (the row stores its tuple identity,
// store.IdentityOf), with the trace context of ctx's span (see Builder).
// It returns the row's sequence. It fails with store.ErrInvalid,
// appending nothing, when the row has no writes or more than
// MaxRelayWrites, a key or value is over caps, the encoded row is over
// caps.MaxValueBytes, the target is nil or its identity does not encode
// (or is over gen.MaxRelayV1Target bytes), or the batch Finish builds
// would exceed caps. A trace context never makes it fail: a row that fits
// only without one is written without one.
func (b *Builder) Relay(ctx context.Context, target store.Partition, puts []gen.RelayPut, deletes [][]byte) (seq uint64, err error) {
	if err := b.open(); err != nil {
		return 0, err
	}
	if target == nil {
		return 0, fmt.Errorf("outbox: relay row without a target: %w", store.ErrInvalid)
	}
	// The name is built only for an error: it costs allocations.
	name := func() string { return store.PartitionName(target) }
	id, err := target.AppendTuple(nil)
	switch {
	case err != nil:
		return 0, fmt.Errorf("outbox: relay row to %s: target identity: %w", name(), errInvalid(err))
	case len(id) == 0 || len(id) > gen.MaxRelayV1Target:
		return 0, fmt.Errorf("outbox: relay row to %s: target identity has %d bytes, want 1 to %d: %w",
			name(), len(id), gen.MaxRelayV1Target, store.ErrInvalid)
	}
	n := len(puts) + len(deletes)
	switch {
	case n == 0:
		return 0, fmt.Errorf("outbox: relay row to %s has no writes: %w", name(), store.ErrInvalid)
	case n > MaxRelayWrites:
		return 0, fmt.Errorf("outbox: relay row to %s has %d writes, limit %d: %w", name(), n, MaxRelayWrites, store.ErrInvalid)
	case n+2 > b.caps.MaxBatchOps:
		return 0, fmt.Errorf("outbox: relay row to %s has %d writes, and its target batch would exceed %d operations: %w",
			name(), n, b.caps.MaxBatchOps, store.ErrInvalid)
	}
	for i, p := range puts {
		if err := b.checkRow("put", i, p.Key, p.Value); err != nil {
			return 0, fmt.Errorf("outbox: relay row to %s: %w", name(), err)
		}
	}
	for i, k := range deletes {
		if err := b.checkRow("delete", i, k, nil); err != nil {
			return 0, fmt.Errorf("outbox: relay row to %s: %w", name(), err)
		}
	}
	seq, err = b.next()
	if err != nil {
		return 0, err
	}
	v := gen.RelayV1{Target: id, Puts: puts, Deletes: deletes, AtMs: b.nowMs}
	key := RelayKey(seq)
	row, err := b.relayRow(ctx, v, len(key))
	if err != nil {
		return 0, fmt.Errorf("outbox: relay row to %s: %w", name(), err)
	}
	if len(row) > b.caps.MaxValueBytes {
		return 0, fmt.Errorf("outbox: relay row to %s encodes to %d bytes, limit %d: %w",
			name(), len(row), b.caps.MaxValueBytes, store.ErrInvalid)
	}
	if err := b.reserve(1, len(key)+len(row)); err != nil {
		return 0, err
	}
	b.relays = append(b.relays, store.Put(key, row))
	b.last = seq
	return seq, nil
}

// relayRow encodes v: as a RelayV2 with the trace context of ctx's span
// when there is one and the store's format allows it, and the row so
// encoded still fits the value limit and the batch (with its key of
// keyBytes); as the RelayV1 v otherwise.
func (b *Builder) relayRow(ctx context.Context, v gen.RelayV1, keyBytes int) ([]byte, error) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && b.format >= gen.FormatRelayV2 {
		row, err := relayValues.Encode(gen.RelayV2{Target: v.Target, Puts: v.Puts, Deletes: v.Deletes, AtMs: v.AtMs, Trace: tracing.Encode(sc)}, b.format)
		if err == nil && len(row) <= b.caps.MaxValueBytes && b.fits(1, keyBytes+len(row)) {
			return row, nil
		}
	}
	return gen.EncodeRelayV1(v)
}

// pendingRow encodes v as relayRow encodes a relay row: an
// OutcomePendingV2 with the trace context of ctx's span when there is one,
// the store's format allows it and it fits the batch beside other bytes
// the outcome adds; the OutcomePendingV1 v otherwise.
func (b *Builder) pendingRow(ctx context.Context, v gen.OutcomePendingV1, ops, other int) ([]byte, error) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && b.format >= gen.FormatOutcomePendingV2 {
		row, err := pendingValues.Encode(gen.OutcomePendingV2{Source: v.Source, Key: v.Key, AtMs: v.AtMs, Trace: tracing.Encode(sc)}, b.format)
		if err == nil && len(row) <= b.caps.MaxValueBytes && b.fits(ops, other+len(row)) {
			return row, nil
		}
	}
	return gen.EncodeOutcomePendingV1(v)
}

// errInvalid returns err, wrapping store.ErrInvalid when it does not
// already: a partition's AppendTuple may fail with an error of its own.
func errInvalid(err error) error {
	if errors.Is(err, store.ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrInvalid, err)
}

// Outcome is a record of the service's own schema reaching its terminal
// state, queued for delivery (outcome delivery pushes it to a sink): the
// record at Key, which must still hold Prior, becomes Terminal, and is
// indexed as pending under ID, with a value naming Source and Key. The
// outbox guards and rewrites the record but does not read it: what makes
// a value terminal is the schema's rule, checked by the caller (an
// outcome source, outcome.TypedSource.Append).
type Outcome struct {
	// ID names the outcome (the id receivers deduplicate by).
	ID gen.OutcomeID
	// Source names the outcome source that delivers it.
	Source gen.OutcomeSource
	// Key is the record's key in the partition.
	Key store.Key
	// Prior is the record's value as read: the batch requires it unchanged.
	Prior store.Value
	// Terminal is the record's terminal value.
	Terminal store.Value
}

// Outcome appends a terminal outcome and returns the sequence it is
// indexed at: o's record becomes terminal, it is indexed as pending
// delivery (OutcomePendingKey(seq, o.ID), holding an OutcomePendingV1 of
// o.Source, o.Key and the builder's now, or an OutcomePendingV2 with the
// trace context of ctx's span: see Builder), and the backlog grows by one
// row and the terminal value's bytes. It fails with store.ErrInvalid,
// appending nothing, for an invalid or repeated id, a missing source, an
// empty key or one over caps, an absent prior or terminal value, a value
// over caps, or a batch Finish builds that would exceed caps; never
// because of a trace context, which is left out of a row it would not
// let fit.
func (b *Builder) Outcome(ctx context.Context, o Outcome) (seq uint64, err error) {
	if err := b.open(); err != nil {
		return 0, err
	}
	if err := checkOutcome(b.caps, o.ID, o.Key, o.Terminal); err != nil {
		return 0, err
	}
	if _, dup := b.ids[o.ID]; dup {
		return 0, fmt.Errorf("outbox: outcome %q appended twice: %w", o.ID, store.ErrInvalid)
	}
	if o.Source.IsZero() {
		return 0, fmt.Errorf("outbox: outcome %q without a source: %w", o.ID, store.ErrInvalid)
	}
	if o.Prior == nil {
		return 0, fmt.Errorf("outbox: outcome %q: no prior value: the record must exist: %w", o.ID, store.ErrInvalid)
	}
	seq, err = b.next()
	if err != nil {
		return 0, err
	}
	pendingKey, err := gen.AppendOutcomePendingKey(nil, seq, o.ID)
	if err != nil {
		return 0, fmt.Errorf("outbox: outcome %q: %w", o.ID, err)
	}
	// The guard, the rewrite and the index row.
	other := 2*len(o.Key) + len(o.Prior) + len(o.Terminal) + len(pendingKey)
	pending, err := b.pendingRow(ctx, gen.OutcomePendingV1{Source: o.Source, Key: o.Key, AtMs: b.nowMs}, 3, other)
	if err != nil {
		return 0, fmt.Errorf("outbox: outcome %q: %w", o.ID, errInvalid(err))
	}
	if err := b.reserve(3, other+len(pending)); err != nil {
		return 0, err
	}
	if b.ids == nil {
		b.ids = make(map[gen.OutcomeID]struct{})
	}
	b.ids[o.ID] = struct{}{}
	b.outcomes = append(b.outcomes, outcomeRow{key: o.Key, prior: o.Prior, terminal: o.Terminal, pendingKey: pendingKey, pending: pending})
	b.backlog.Rows++
	b.backlog.Bytes += uint64(len(o.Terminal))
	b.last = seq
	return seq, nil
}

// Len reports how many rows have been appended.
func (b *Builder) Len() int { return len(b.relays) + len(b.outcomes) }

// Finish adds the appended rows to batch with their guards: the outbox
// sequence still as observed (absent or equal), the backlog still as
// observed when outcomes were appended, the relay timer's reference entry
// still as observed when relay rows were; the rows, the new sequence and
// backlog; and the relay or outcome-delivery timer, due at now, when it
// is absent (see the package doc). With no rows appended it adds nothing.
//
// It fails with store.ErrInvalid, adding nothing, when it already
// succeeded once, or when batch with the additions would fail
// Validate(caps) (the builder stays usable: finish into a smaller batch).
// A batch that fails Validate with rows holding trace contexts is tried
// again with those rows written without them, before it fails.
func (b *Builder) Finish(batch *store.Batch) error {
	if err := b.open(); err != nil {
		return err
	}
	if b.Len() == 0 {
		b.finished = true
		return nil
	}
	out, err := b.build(batch)
	if err != nil {
		return err
	}
	if err := out.Validate(b.caps); err != nil {
		if !b.untrace() {
			return fmt.Errorf("outbox: finish %d rows: %w", b.Len(), err)
		}
		if out, err = b.build(batch); err != nil {
			return err
		}
		if err := out.Validate(b.caps); err != nil {
			return fmt.Errorf("outbox: finish %d rows: %w", b.Len(), err)
		}
	}
	*batch = *out
	b.finished = true
	return nil
}

// build returns a copy of batch with the builder's additions (see Finish).
func (b *Builder) build(batch *store.Batch) (*store.Batch, error) {
	out := batch.Clone()
	out.Require(store.Guard(sequenceKey, b.observed.Sequence))
	if len(b.outcomes) > 0 {
		out.Require(store.Guard(backlogKey, b.observed.Backlog))
	}
	if len(b.relays) > 0 && b.observed.RelayTimer != nil {
		// The relay's Done deletes the timer: a row appended after that
		// must create it again.
		out.Require(store.Equals(relayTimerRef, b.observed.RelayTimer))
	}
	for _, o := range b.outcomes {
		out.Require(store.Equals(o.key, o.prior))
	}
	out.Add(b.relays...)
	for _, o := range b.outcomes {
		out.Put(o.key, o.terminal).Put(o.pendingKey, o.pending)
	}
	if len(b.outcomes) > 0 {
		v, err := gen.EncodeBacklog(b.backlog)
		if err != nil {
			return nil, fmt.Errorf("outbox: encode backlog: %w", err)
		}
		out.Put(backlogKey, v)
	}
	seq, err := gen.EncodeU64Value(gen.U64Value{Value: b.last})
	if err != nil {
		return nil, fmt.Errorf("outbox: encode sequence: %w", err)
	}
	out.Put(sequenceKey, seq)
	due := store.DecodeTime(max(b.nowMs, 1))
	if len(b.relays) > 0 && b.observed.RelayTimer == nil {
		if err := timers.Schedule(out, b.caps, nil, timers.Timer{Kind: timers.KindRelay, DueAt: due}); err != nil {
			return nil, fmt.Errorf("outbox: relay timer: %w", err)
		}
	}
	if len(b.outcomes) > 0 && b.prior.Rows == 0 {
		if err := timers.Schedule(out, b.caps, nil, timers.Timer{Kind: timers.KindOutcomeDelivery, DueAt: due, Value: newDeliveryTimer}); err != nil {
			return nil, fmt.Errorf("outbox: outcome timer: %w", err)
		}
	}
	return out, nil
}

// untrace rewrites the rows that hold a trace context without it, as the
// V1s the same appends make without a span, and reports whether there
// were any.
func (b *Builder) untrace() bool {
	changed := false
	for i := range b.relays {
		v := b.relays[i].Value
		if len(v) == 0 || v[0] != gen.VersionRelayV2 {
			continue
		}
		r, err := relayValues.Decode(v)
		if err != nil {
			continue // the builder's own encoding: unreachable
		}
		v1, _ := rowVersions{}.DowngradeRelayV2(r)
		if row, err := gen.EncodeRelayV1(v1); err == nil {
			b.relays[i].Value, changed = row, true
		}
	}
	for i := range b.outcomes {
		v := b.outcomes[i].pending
		if len(v) == 0 || v[0] != gen.VersionOutcomePendingV2 {
			continue
		}
		p, err := pendingValues.Decode(v)
		if err != nil {
			continue
		}
		v1, _ := rowVersions{}.DowngradeOutcomePendingV2(p)
		if row, err := gen.EncodeOutcomePendingV1(v1); err == nil {
			b.outcomes[i].pending, changed = row, true
		}
	}
	return changed
}

func (b *Builder) open() error {
	if b.finished {
		return fmt.Errorf("outbox: builder already finished: %w", store.ErrInvalid)
	}
	return nil
}

// next returns the next sequence without allocating it.
func (b *Builder) next() (uint64, error) {
	if b.last == math.MaxUint64 {
		return 0, fmt.Errorf("outbox: outbox sequence exhausted: %w", store.ErrInvalid)
	}
	return b.last + 1, nil
}

// checkRow checks one relay write against the store's capabilities.
func (b *Builder) checkRow(what string, i int, key, value []byte) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("%s %d has an empty key: %w", what, i, store.ErrInvalid)
	case len(key) > b.caps.MaxKeyBytes:
		return fmt.Errorf("%s %d key has %d bytes, limit %d: %w", what, i, len(key), b.caps.MaxKeyBytes, store.ErrInvalid)
	case len(value) > b.caps.MaxValueBytes:
		return fmt.Errorf("%s %d value has %d bytes, limit %d: %w", what, i, len(value), b.caps.MaxValueBytes, store.ErrInvalid)
	}
	return nil
}

// fixedOps bounds what Finish adds beside the rows: the sequence guard and
// put, the backlog guard and put, the relay timer guard, and two created
// timers (guard, timer row, reference entry each).
const fixedOps = 2 + 2 + 1 + 3 + 3

// fits reports whether reserve would accept a row's operations and bytes.
func (b *Builder) fits(ops, bytes int) bool {
	return b.ops+ops+fixedOps <= b.caps.MaxBatchOps-b.caps.ReservedBatchOps && b.bytes+bytes <= b.caps.MaxBatchBytes
}

// reserve accounts for a row's operations and bytes, failing when the
// builder's additions alone could not fit one batch.
func (b *Builder) reserve(ops, bytes int) error {
	if limit := b.caps.MaxBatchOps - b.caps.ReservedBatchOps; b.ops+ops+fixedOps > limit {
		return fmt.Errorf("outbox: %d rows already appended: another needs %d operations beyond the limit of %d: %w",
			b.Len(), ops, limit, store.ErrInvalid)
	}
	if b.bytes+bytes > b.caps.MaxBatchBytes {
		return fmt.Errorf("outbox: %d rows already appended: another %d bytes exceed the batch limit of %d: %w",
			b.Len(), bytes, b.caps.MaxBatchBytes, store.ErrInvalid)
	}
	b.ops += ops
	b.bytes += bytes
	return nil
}
