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
	m := RelayV1{Target: partitionFromGen(v.Target), Deletes: v.Deletes, AtMs: v.AtMs}
	for _, p := range v.Puts {
		m.Puts = append(m.Puts, RelayPut{Key: p.Key, Value: p.Value})
	}
	return m
}

// Gen returns m as a gen value; it fails unless exactly one target
// variant is set.
func (m *RelayV1) Gen() (gen.RelayV1, error) {
	t, err := m.Target.gen()
	if err != nil {
		return gen.RelayV1{}, err
	}
	v := gen.RelayV1{Target: t, Deletes: m.Deletes, AtMs: m.AtMs}
	for _, p := range m.Puts {
		v.Puts = append(v.Puts, gen.RelayPut{Key: p.Key, Value: p.Value})
	}
	return v, nil
}

func partitionFromGen(p gen.Partition) Partition {
	switch x := p.(type) {
	case gen.RefPartition:
		return Partition{Ref: &RefPartition{NS: x.NS.String(), Repo: x.Repo.String(), ShardRef: x.ShardRef.String()}}
	case gen.NamespacePartition:
		return Partition{Namespace: &NamespacePartition{NS: x.NS.String()}}
	case gen.CoordinatorPartition:
		return Partition{Coordinator: &CoordinatorPartition{NS: x.NS.String()}}
	case gen.RepoIndexPartition:
		return Partition{RepoIndex: &RepoIndexPartition{NS: x.NS.String(), Repo: x.Repo.String()}}
	case gen.RefIndexPartition:
		return Partition{RefIndex: &RefIndexPartition{NS: x.NS.String(), Repo: x.Repo.String(), ShardRef: x.ShardRef.String()}}
	case gen.ContentShardPartition:
		return Partition{ContentShard: &ContentShardPartition{NS: x.NS.String(), Shard: x.Shard}}
	}
	return Partition{}
}

func (m *Partition) gen() (gen.Partition, error) {
	var n names.Builder
	var out []gen.Partition
	if x := m.Ref; x != nil {
		out = append(out, gen.RefPartition{NS: n.NS(x.NS), Repo: n.Repo(x.Repo), ShardRef: n.Ref(x.ShardRef)})
	}
	if x := m.Namespace; x != nil {
		out = append(out, gen.NamespacePartition{NS: n.NS(x.NS)})
	}
	if x := m.Coordinator; x != nil {
		out = append(out, gen.CoordinatorPartition{NS: n.NS(x.NS)})
	}
	if x := m.RepoIndex; x != nil {
		out = append(out, gen.RepoIndexPartition{NS: n.NS(x.NS), Repo: n.Repo(x.Repo)})
	}
	if x := m.RefIndex; x != nil {
		out = append(out, gen.RefIndexPartition{NS: n.NS(x.NS), Repo: n.Repo(x.Repo), ShardRef: n.Ref(x.ShardRef)})
	}
	if x := m.ContentShard; x != nil {
		out = append(out, gen.ContentShardPartition{NS: n.NS(x.NS), Shard: x.Shard})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp partition: %d variants set", len(out))
	}
	return n.Partition(out[0])
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
