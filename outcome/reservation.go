package outcome

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// Append appends to b the terminal outcome of reservation rid: the
// reservation, which must still hold prior (a Ticketed reservation),
// becomes terminal (Committed or Aborted) and is indexed as pending
// delivery at a new sequence, which it returns (outbox.Builder.Outcome).
// It fails with store.ErrInvalid, appending nothing, for an invalid id, a
// prior value that is not a Ticketed reservation, a terminal value that is
// not terminal or does not encode, and for every failure of
// Builder.Outcome.
func Append(b *outbox.Builder, rid refdomain.ReservationID, prior store.Value, terminal refdomain.ReservationV1) (seq uint64, err error) {
	id, key, err := names(rid)
	if err != nil {
		return 0, err
	}
	if r, err := refdomain.DecodeReservationV1(prior); err != nil || prior == nil {
		return 0, fmt.Errorf("outcome: reservation %q: prior value is not a reservation (%v): %w", rid, err, store.ErrInvalid)
	} else if _, ok := r.(*refdomain.ReservationTicketed); !ok {
		return 0, fmt.Errorf("outcome: reservation %q: prior value is %T, not Ticketed: %w", rid, r, store.ErrInvalid)
	}
	if !isTerminal(terminal) {
		return 0, fmt.Errorf("outcome: reservation %q: %T is not a terminal reservation: %w", rid, terminal, store.ErrInvalid)
	}
	value, err := refdomain.EncodeReservationV1(terminal)
	if err != nil {
		return 0, fmt.Errorf("outcome: reservation %q: %w", rid, err)
	}
	return b.Outcome(outbox.Outcome{ID: id, Key: key, Prior: prior, Terminal: value})
}

// Ack plans in a the acknowledgment of reservation rid's outcome, indexed
// at sequence seq, whose delivered reservation value is value
// (outbox.Acks.Ack). It fails, planning nothing, with store.ErrInvalid for
// an invalid id or a value that is not a terminal reservation, and for
// every failure of Acks.Ack.
func Ack(a *outbox.Acks, rid refdomain.ReservationID, seq uint64, value store.Value) error {
	id, key, err := names(rid)
	if err != nil {
		return err
	}
	if r, err := refdomain.DecodeReservationV1(value); err != nil || value == nil || !isTerminal(r) {
		return fmt.Errorf("outcome: reservation %q: acknowledged value is not a terminal reservation: %w", rid, store.ErrInvalid)
	}
	return a.Ack(id, seq, key, value)
}

// names returns the outcome id and the record key of reservation rid.
func names(rid refdomain.ReservationID) (gen.OutcomeID, store.Key, error) {
	key, err := refdomain.AppendReservationKey(nil, rid)
	if err != nil {
		return gen.OutcomeID{}, nil, fmt.Errorf("outcome: reservation id: %w", err)
	}
	id, err := gen.NewOutcomeID(rid.String())
	if err != nil {
		return gen.OutcomeID{}, nil, fmt.Errorf("outcome: reservation %q: %w", rid, err)
	}
	return id, key, nil
}

// ReservationID returns the reservation an outcome id names. It fails
// with an error wrapping store.ErrCorrupt when the id is not a valid
// reservation id (both are 1-128 bytes of printable UTF-8, so only a
// change of either schema can make it fail).
func ReservationID(id gen.OutcomeID) (refdomain.ReservationID, error) {
	rid, err := refdomain.NewReservationID(id.String())
	if err != nil {
		return refdomain.ReservationID{}, fmt.Errorf("outcome: pending outcome %q is not a reservation id: %w: %w", id, store.ErrCorrupt, err)
	}
	return rid, nil
}

// isTerminal reports whether r is a terminal reservation.
func isTerminal(r refdomain.ReservationV1) bool {
	switch r.(type) {
	case *refdomain.ReservationCommitted, *refdomain.ReservationAborted:
		return true
	}
	return false
}
