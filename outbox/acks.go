package outbox

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// AckOps is what one acknowledged row costs a batch: the reservation's
// guard and delete, and the pending index row's delete. The shared backlog
// guard and write cost AckFixedOps more per batch.
const (
	AckOps      = 3
	AckFixedOps = 2
)

// Acks plans the acknowledgment of delivered terminal outcomes: per row, the reservation must still hold the
// value that was delivered, and the reservation and its pending index row
// are deleted; the backlog is guarded once, at the value read just before
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
	rids     map[gen.ReservationID]struct{}
	finished bool
}

type ackRow struct {
	resKey     store.Key
	value      store.Value
	pendingKey store.Key
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

// Ack plans the acknowledgment of the outcome of reservation rid, indexed
// at sequence seq, whose delivered reservation value is value. It fails,
// planning nothing, with store.ErrInvalid for an invalid or repeated
// reservation id, a value that is not a terminal reservation, or a row
// that would take the batch over caps; with store.ErrCorrupt when the
// backlog has no row left to acknowledge (it disagrees with the pending
// index). The caller keeps such a row for a later fire.
func (a *Acks) Ack(rid gen.ReservationID, seq uint64, value store.Value) error {
	if a.finished {
		return fmt.Errorf("outbox: acknowledgments already finished: %w", store.ErrInvalid)
	}
	resKey, err := reservationKey(rid)
	if err != nil {
		return err
	}
	if _, dup := a.rids[rid]; dup {
		return fmt.Errorf("outbox: reservation %q acknowledged twice: %w", rid, store.ErrInvalid)
	}
	r, err := gen.DecodeReservationV1(value)
	if err != nil || value == nil || !isTerminal(r) {
		return fmt.Errorf("outbox: reservation %q: acknowledged value is not a terminal reservation: %w", rid, store.ErrInvalid)
	}
	if a.left.Rows == 0 {
		return fmt.Errorf("outbox: reservation %q: the backlog has no row left to acknowledge (%d acknowledged): %w",
			rid, len(a.rows), store.ErrCorrupt)
	}
	if limit := a.caps.MaxBatchOps - a.caps.ReservedBatchOps; AckOps*(len(a.rows)+1)+AckFixedOps > limit {
		return fmt.Errorf("outbox: %d acknowledgments already planned: another exceeds the limit of %d operations: %w",
			len(a.rows), limit, store.ErrInvalid)
	}
	pendingKey, err := gen.AppendOutcomePendingKey(nil, seq, rid)
	if err != nil {
		return fmt.Errorf("outbox: reservation %q: %w", rid, err)
	}
	if a.rids == nil {
		a.rids = make(map[gen.ReservationID]struct{})
	}
	a.rids[rid] = struct{}{}
	a.rows = append(a.rows, ackRow{resKey: resKey, value: value, pendingKey: pendingKey})
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
		out.Require(store.Equals(r.resKey, r.value))
	}
	for _, r := range a.rows {
		out.Delete(r.resKey).Delete(r.pendingKey)
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
