package mpack

// Conversions between the gen records and their msgp equivalents, used to
// build the benchmarks' inputs and to check round trips, never inside a
// timed loop.

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/bench/codecs/internal/names"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
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
func ReservationFromGen(v refdomain.ReservationV1) ReservationV1 {
	switch x := v.(type) {
	case *refdomain.ReservationTicketed:
		return ReservationV1{Ticketed: &ReservationTicketed{TicketID: x.TicketID}}
	case *refdomain.ReservationCommitted:
		c := &ReservationCommitted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, RefUpdate{Ref: r.Ref.String(), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		return ReservationV1{Committed: c}
	case *refdomain.ReservationAborted:
		return ReservationV1{Aborted: &ReservationAborted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			Reason: uint8(x.Reason), Detail: x.Detail,
		}}
	}
	return ReservationV1{}
}

// Gen returns m as a gen value; it fails unless exactly one state is
// set.
func (m *ReservationV1) Gen() (refdomain.ReservationV1, error) {
	var n names.Builder
	var out []refdomain.ReservationV1
	if x := m.Ticketed; x != nil {
		out = append(out, &refdomain.ReservationTicketed{TicketID: x.TicketID})
	}
	if c := m.Committed; c != nil {
		v := &refdomain.ReservationCommitted{
			Repository: n.Repo(c.Repository), OccurredAtMs: c.OccurredAtMs,
			BytesStored: c.BytesStored, NewToRepo: c.NewToRepo, NewToStore: c.NewToStore,
		}
		for _, r := range c.Refs {
			v.Refs = append(v.Refs, refdomain.RefUpdate{Ref: n.Ref(r.Ref), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		out = append(out, v)
	}
	if a := m.Aborted; a != nil {
		out = append(out, &refdomain.ReservationAborted{
			Repository: n.Repo(a.Repository), OccurredAtMs: a.OccurredAtMs,
			Reason: refdomain.AbortReason(a.Reason), Detail: a.Detail,
		})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp reservation: %d states set", len(out))
	}
	return n.Reservation(out[0])
}
