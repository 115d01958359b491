package outbox

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// AckOps bounds what one acknowledged row costs a batch: the record's
// guard and delete (a guard alone when the record is kept), and the
// pending index row's delete. The shared backlog guard and write cost
// AckFixedOps more per batch.
const (
	AckOps      = 3
	AckFixedOps = 2
)

// Ack is one delivered outcome to acknowledge: the pending index row
// OutcomePendingKey(Seq, ID), and the record at Key, which held Value when
// it was delivered. Keep keeps the record (its guard still holds the
// acknowledgment to the delivered value); otherwise the acknowledgment
// deletes it.
type Ack struct {
	ID    gen.OutcomeID
	Seq   uint64
	Key   store.Key
	Value store.Value
	Keep  bool
}

// Acks plans the acknowledgment of delivered terminal outcomes: per row, the
// record must still hold the value that was delivered, and its pending
// index row is deleted, with the record unless the row keeps it; the backlog is guarded once, at the value read just before
// planning, and rewritten once, deleted when no rows remain. Acknowledging
// against a fresh backlog read keeps the slow sink calls outside the
// read-modify-write window: an outcome appended meanwhile changes the
// backlog, fails the guard, and the whole acknowledgment is planned again.
// Acks is not safe for concurrent use.
type Acks struct {
	caps     store.Capabilities
	fresh    store.Value
	backlog  gen.Backlog // as read
	left     gen.Backlog // after the planned acknowledgments
	rows     []ackRow
	ids      map[gen.OutcomeID]struct{}
	finished bool
}

type ackRow struct {
	key        store.Key
	value      store.Value
	pendingKey store.Key
	keep       bool
}

// NewAcks returns a plan against freshBacklog, the backlog value read just
// before (nil: absent). It fails with an error wrapping store.ErrCorrupt
// when the value does not decode.
func NewAcks(caps store.Capabilities, freshBacklog store.Value) (*Acks, error) {
	b, err := DecodeBacklog(freshBacklog)
	if err != nil {
		return nil, err
	}
	return &Acks{caps: caps, fresh: freshBacklog, backlog: b, left: b}, nil
}

// Ack plans the acknowledgment of one delivered outcome: the batch
// requires its record unchanged and deletes its pending index row, and the
// record unless k.Keep. It fails, planning nothing, with store.ErrInvalid
// for an invalid or repeated id, an empty key or one over caps, an absent
// value, or a row that would take the batch over caps; with
// store.ErrCorrupt when the backlog has no row left to acknowledge (it
// disagrees with the pending index). The caller keeps such a row for a
// later fire.
func (a *Acks) Ack(k Ack) error {
	id, seq, key, value := k.ID, k.Seq, k.Key, k.Value
	if a.finished {
		return fmt.Errorf("outbox: acknowledgments already finished: %w", store.ErrInvalid)
	}
	if err := checkOutcome(a.caps, id, key, value); err != nil {
		return err
	}
	if _, dup := a.ids[id]; dup {
		return fmt.Errorf("outbox: outcome %q acknowledged twice: %w", id, store.ErrInvalid)
	}
	if a.left.Rows == 0 {
		return fmt.Errorf("outbox: outcome %q: the backlog has no row left to acknowledge (%d acknowledged): %w",
			id, len(a.rows), store.ErrCorrupt)
	}
	if limit := a.caps.MaxBatchOps - a.caps.ReservedBatchOps; AckOps*(len(a.rows)+1)+AckFixedOps > limit {
		return fmt.Errorf("outbox: %d acknowledgments already planned: another exceeds the limit of %d operations: %w",
			len(a.rows), limit, store.ErrInvalid)
	}
	pendingKey, err := gen.AppendOutcomePendingKey(nil, seq, id)
	if err != nil {
		return fmt.Errorf("outbox: outcome %q: %w", id, err)
	}
	if a.ids == nil {
		a.ids = make(map[gen.OutcomeID]struct{})
	}
	a.ids[id] = struct{}{}
	a.rows = append(a.rows, ackRow{key: key, value: value, pendingKey: pendingKey, keep: k.Keep})
	a.left.Rows--
	a.left.Bytes -= min(a.left.Bytes, uint64(len(value)))
	return nil
}

// Len reports how many acknowledgments are planned.
func (a *Acks) Len() int { return len(a.rows) }

// Remaining is the backlog the planned acknowledgments leave: with no rows
// remaining, the fire that applies them is done.
func (a *Acks) Remaining() gen.Backlog { return a.left }

// Finish adds the plan to b: the backlog guard (always, even with nothing
// acknowledged: completing or rescheduling the delivery timer must share
// the backlog's snapshot), each row's guard and deletes, and the backlog's
// rewrite, or its delete when no rows remain. It fails with
// store.ErrInvalid, adding nothing, when it already succeeded once or when
// b with the additions would fail Validate(caps).
func (a *Acks) Finish(b *store.Batch) error {
	if a.finished {
		return fmt.Errorf("outbox: acknowledgments already finished: %w", store.ErrInvalid)
	}
	out := b.Clone()
	out.Require(store.Guard(backlogKey, a.fresh))
	for _, r := range a.rows {
		out.Require(store.Equals(r.key, r.value))
	}
	for _, r := range a.rows {
		if !r.keep {
			out.Delete(r.key)
		}
		out.Delete(r.pendingKey)
	}
	if len(a.rows) > 0 {
		if a.left.Rows == 0 {
			out.Delete(backlogKey)
		} else {
			v, err := gen.EncodeBacklog(a.left)
			if err != nil {
				return fmt.Errorf("outbox: encode backlog: %w", err)
			}
			out.Put(backlogKey, v)
		}
	}
	if err := out.Validate(a.caps); err != nil {
		return fmt.Errorf("outbox: finish %d acknowledgments: %w", len(a.rows), err)
	}
	*b = *out
	a.finished = true
	return nil
}
