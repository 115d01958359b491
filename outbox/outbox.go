// Package outbox writes a partition's outbox: relay rows (writes queued
// for a target partition, delivered in sequence order by the relay) and
// terminal outcome rows (records of the service's own schema that reached
// a terminal state, queued by an outcome source and pushed to a sink by
// outcome delivery: package outcome), and plans the acknowledgment of
// delivered outcomes ([Acks]).
//
// # Rows
//
//	OutboxSequenceKey                 U64Value: the last sequence allocated
//	RelayKey(seq)                     RelayV1 or RelayV2: one queued relay row
//	(the record's own key)            the service's record, made terminal
//	OutcomePendingKey(seq, id)        OutcomePendingV1 or OutcomePendingV2: an
//	                                  undelivered terminal outcome, its source
//	                                  and record key (empty in rows written
//	                                  before sources existed)
//	OutcomeBacklogKey                 Backlog: rows and bytes undelivered
//	TimerRefKey(KindRelay, "")        the relay timer (package timers)
//	TimerRefKey(KindOutcomeDelivery, "")  the outcome-delivery timer
//
// Relay rows and outcome rows share one sequence. A writer reads the
// sequence, the backlog and the relay timer's reference entry ([Read]),
// appends rows to a [Builder] and finishes it into its own batch: the
// batch's guards make it fail, writing nothing, if any of the three changed
// since the read, so concurrent writers never share a sequence and no row
// is ever queued without its timer.
//
// A V2 row is its V1 with the trace context of the writer that queued it
// (see [Builder]), read by [DecodeRelay] and [DecodePending]: the relay's
// and outcome delivery's spans continue the writer's trace from it.
//
// # Timers
//
// The relay timer's presence is read from its reference entry. The
// outcome-delivery timer's is derived from the backlog: it exists exactly
// when the backlog has rows (outcome delivery deletes the timer in the
// batch that empties the backlog, and a Builder creates it in the batch
// that fills it), so a writer reads no timer row to know it. A Builder that
// creates a timer also guards its reference entry as absent, with a new
// [DeliveryTimer] as the delivery timer's value. An operator's repair
// keeps the rule: [QuarantinePending] moves a pending outcome aside and
// takes it out of the backlog, deleting the timer with the last row, and
// [RestorePending] puts it back, creating the timer with the first.
package outbox

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// MaxRelayWrites bounds the puts plus deletes of one relay row: with the
// target's high-water guard and put, a row always fits one target batch of
// store.DefaultMaxBatchOps.
const MaxRelayWrites = gen.MaxRelayV1Puts

// Observed is what a writer read before building: the stored values, nil
// when absent, that a Builder allocates from and guards.
type Observed struct {
	// Sequence is OutboxSequenceKey's value.
	Sequence store.Value
	// Backlog is OutcomeBacklogKey's value.
	Backlog store.Value
	// RelayTimer is the relay timer's reference entry,
	// TimerRefKey(timers.KindRelay, "").
	RelayTimer store.Value
}

// Keys of the outbox's singleton rows, built once.
var (
	sequenceKey   = store.Key(gen.AppendOutboxSequenceKey(nil))
	backlogKey    = store.Key(gen.AppendOutcomeBacklogKey(nil))
	relayTimerRef = mustRefKey(timers.KindRelay)
	deliveryRef   = mustRefKey(timers.KindOutcomeDelivery)
	// pendingStart and pendingEnd bound the pending outcome rows.
	pendingStart, pendingEnd = gen.ClassRange(gen.TagOutcomePendingKey)
)

func mustRefKey(k timers.Kind) store.Key {
	key, err := timers.RefKey(k, "")
	if err != nil {
		panic(err) // an empty reference always encodes
	}
	return key
}

// SequenceKey returns the key of the outbox sequence.
func SequenceKey() store.Key { return sequenceKey }

// RelayKey returns the key of the relay row queued at seq.
func RelayKey(seq uint64) store.Key { return store.Key(gen.AppendRelayKey(nil, seq)) }

// BacklogKey returns the key of the outcome backlog.
func BacklogKey() store.Key { return backlogKey }

// Read reads what a Builder needs from r's partition, in one GetMany (one
// snapshot). r is the Reader store.Transact hands its function, so that
// an outbox append can be a Transact step, or store.ReaderOf(s, p)
// outside Transact. It fails with the store's errors.
func Read(ctx context.Context, r store.Reader) (Observed, error) {
	p := r.Partition()
	vs, err := r.GetMany(ctx, []store.Key{sequenceKey, backlogKey, relayTimerRef})
	if err != nil {
		return Observed{}, fmt.Errorf("outbox: read %s: %w", store.PartitionName(p), err)
	}
	if len(vs) != 3 {
		return Observed{}, fmt.Errorf("outbox: read %s: %d values for 3 keys: %w", store.PartitionName(p), len(vs), store.ErrCorrupt)
	}
	return Observed{Sequence: vs[0], Backlog: vs[1], RelayTimer: vs[2]}, nil
}

// DecodeBacklog decodes a backlog value; nil (absent) is the empty
// backlog. It fails with an error wrapping store.ErrCorrupt.
func DecodeBacklog(v store.Value) (gen.Backlog, error) {
	if v == nil {
		return gen.Backlog{}, nil
	}
	b, err := gen.DecodeBacklog(v)
	if err != nil {
		return gen.Backlog{}, fmt.Errorf("outbox: outcome backlog: %w", err)
	}
	return b, nil
}

// DecodeSequence decodes the outbox sequence; nil (absent) is 0. It fails
// with an error wrapping store.ErrCorrupt.
func DecodeSequence(v store.Value) (uint64, error) {
	if v == nil {
		return 0, nil
	}
	u, err := gen.DecodeU64Value(v)
	if err != nil {
		return 0, fmt.Errorf("outbox: outbox sequence: %w", err)
	}
	return u.Value, nil
}

// checkOutcome checks what Builder.Outcome and Acks.Ack share: a valid
// id, a key and a present value within caps.
func checkOutcome(caps store.Capabilities, id gen.OutcomeID, key store.Key, value store.Value) error {
	switch {
	case id == gen.OutcomeID{}:
		return fmt.Errorf("outbox: outcome without an id: %w", store.ErrInvalid)
	case len(key) == 0:
		return fmt.Errorf("outbox: outcome %q: empty record key: %w", id, store.ErrInvalid)
	case len(key) > caps.MaxKeyBytes:
		return fmt.Errorf("outbox: outcome %q: record key has %d bytes, limit %d: %w", id, len(key), caps.MaxKeyBytes, store.ErrInvalid)
	case value == nil:
		return fmt.Errorf("outbox: outcome %q: no terminal value: %w", id, store.ErrInvalid)
	case len(value) > caps.MaxValueBytes:
		return fmt.Errorf("outbox: outcome %q: terminal value has %d bytes, limit %d: %w", id, len(value), caps.MaxValueBytes, store.ErrInvalid)
	}
	return nil
}
