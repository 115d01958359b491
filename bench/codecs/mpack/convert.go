package mpack

// Conversions between the gen records and their msgp equivalents, used to
// build the benchmarks' inputs and to check round trips, never inside a
// timed loop.

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/bench/codecs/internal/names"
	"github.com/mkit-dev/mkitfdb/gen"
)

// RelayFromGen returns v as its msgp equivalent.
func RelayFromGen(v gen.RelayV1) RelayV1 {
	m := RelayV1{Target: v.Target, Deletes: v.Deletes, AtMs: v.AtMs}
	for _, p := range v.Puts {
		m.Puts = append(m.Puts, RelayPut{Key: p.Key, Value: p.Value})
	}
	return m
}

// Gen returns m as a gen value.
func (m *RelayV1) Gen() (gen.RelayV1, error) {
	v := gen.RelayV1{Target: m.Target, Deletes: m.Deletes, AtMs: m.AtMs}
	for _, p := range m.Puts {
		v.Puts = append(v.Puts, gen.RelayPut{Key: p.Key, Value: p.Value})
	}
	return v, nil
}

// ReservationFromGen returns v as its msgp equivalent.
func ReservationFromGen(v gen.ReservationV1) ReservationV1 {
	switch x := v.(type) {
	case *gen.ReservationTicketed:
		return ReservationV1{Ticketed: &ReservationTicketed{TicketID: x.TicketID}}
	case *gen.ReservationCommitted:
		c := &ReservationCommitted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, RefUpdate{Ref: r.Ref.String(), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		return ReservationV1{Committed: c}
	case *gen.ReservationAborted:
		return ReservationV1{Aborted: &ReservationAborted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			Reason: uint8(x.Reason), Detail: x.Detail,
		}}
	}
	return ReservationV1{}
}

// Gen returns m as a gen value; it fails unless exactly one state is
// set.
func (m *ReservationV1) Gen() (gen.ReservationV1, error) {
	var n names.Builder
	var out []gen.ReservationV1
	if x := m.Ticketed; x != nil {
		out = append(out, &gen.ReservationTicketed{TicketID: x.TicketID})
	}
	if c := m.Committed; c != nil {
		v := &gen.ReservationCommitted{
			Repository: n.Repo(c.Repository), OccurredAtMs: c.OccurredAtMs,
			BytesStored: c.BytesStored, NewToRepo: c.NewToRepo, NewToStore: c.NewToStore,
		}
		for _, r := range c.Refs {
			v.Refs = append(v.Refs, gen.RefUpdate{Ref: n.Ref(r.Ref), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		out = append(out, v)
	}
	if a := m.Aborted; a != nil {
		out = append(out, &gen.ReservationAborted{
			Repository: n.Repo(a.Repository), OccurredAtMs: a.OccurredAtMs,
			Reason: gen.AbortReason(a.Reason), Detail: a.Detail,
		})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp reservation: %d states set", len(out))
	}
	return n.Reservation(out[0])
}
