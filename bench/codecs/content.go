// Package codecs benchmarks the generated gen record codecs against
// protobuf (package pb), msgp (package mpack) and a hand-written
// encoding/binary baseline with gen's byte layout (package baseline), on
// the same content. It is its own module so the library's go.mod stays
// free of the benchmark's dependencies; see README.md for the command and
// the results.
//
// This file holds the content every codec encodes, and conversions
// between the gen values and their protobuf and msgp equivalents (used to
// build the inputs and to check round trips, never inside a timed loop).
package codecs

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/bench/codecs/mpack"
	"github.com/mkit-dev/mkitfdb/bench/codecs/pb"
	"github.com/mkit-dev/mkitfdb/gen"
)

// Shape of the benchmarked RelayV1.
const (
	RelayPuts       = 4
	RelayKeyBytes   = 64
	RelayValueBytes = 256
)

// Relay returns the benchmarked RelayV1: a ref-partition target, 4 puts of
// 64-byte keys and 256-byte values, no deletes. Each call returns fresh
// slices with the same content.
func Relay() gen.RelayV1 {
	v := gen.RelayV1{
		Target: gen.RefPartition{NS: "ns-prod", Repo: "repo-main", ShardRef: "refs/heads/main"},
		Puts:   make([]gen.RelayPut, RelayPuts),
		AtMs:   1_767_225_600_123,
	}
	for i := range v.Puts {
		v.Puts[i] = gen.RelayPut{
			Key:   pattern(RelayKeyBytes, byte(16*i+1)),
			Value: pattern(RelayValueBytes, byte(16*i+7)),
		}
	}
	return v
}

// Reservation returns the benchmarked ReservationV1: a committed
// reservation of two ref updates with 20-byte (SHA-1) object ids.
func Reservation() gen.ReservationV1 {
	return gen.ReservationCommitted{
		Repository:   "acme/platform-monorepo",
		OccurredAtMs: 1_767_225_600_123,
		BytesStored:  48_213_771,
		NewToRepo:    1_342,
		NewToStore:   977,
		Refs: []gen.RefUpdate{
			{Ref: "refs/heads/main", OldOID: pattern(20, 0x3a), NewOID: pattern(20, 0x9c)},
			{Ref: "refs/tags/v2.14.0", OldOID: pattern(20, 0x51), NewOID: pattern(20, 0xe2)},
		},
	}
}

// pattern returns n bytes that no codec can shortcut: not zero, not
// repeating within a record.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// RelayToPB returns v as its protobuf equivalent.
func RelayToPB(v gen.RelayV1) *pb.RelayV1 {
	m := &pb.RelayV1{Target: partitionToPB(v.Target), AtMs: v.AtMs, Deletes: v.Deletes}
	for _, p := range v.Puts {
		m.Puts = append(m.Puts, &pb.RelayPut{Key: p.Key, Value: p.Value})
	}
	return m
}

// RelayFromPB returns m as a gen value; it fails on a missing or unknown
// target variant.
func RelayFromPB(m *pb.RelayV1) (gen.RelayV1, error) {
	t, err := partitionFromPB(m.GetTarget())
	if err != nil {
		return gen.RelayV1{}, err
	}
	v := gen.RelayV1{Target: t, Deletes: m.GetDeletes(), AtMs: m.GetAtMs()}
	for _, p := range m.GetPuts() {
		v.Puts = append(v.Puts, gen.RelayPut{Key: p.GetKey(), Value: p.GetValue()})
	}
	return v, nil
}

func partitionToPB(p gen.Partition) *pb.Partition {
	switch x := p.(type) {
	case gen.RefPartition:
		return &pb.Partition{Variant: &pb.Partition_Ref{Ref: &pb.RefPartition{Ns: string(x.NS), Repo: string(x.Repo), ShardRef: string(x.ShardRef)}}}
	case gen.NamespacePartition:
		return &pb.Partition{Variant: &pb.Partition_Namespace{Namespace: &pb.NamespacePartition{Ns: string(x.NS)}}}
	case gen.CoordinatorPartition:
		return &pb.Partition{Variant: &pb.Partition_Coordinator{Coordinator: &pb.CoordinatorPartition{Ns: string(x.NS)}}}
	case gen.RepoIndexPartition:
		return &pb.Partition{Variant: &pb.Partition_RepoIndex{RepoIndex: &pb.RepoIndexPartition{Ns: string(x.NS), Repo: string(x.Repo)}}}
	case gen.RefIndexPartition:
		return &pb.Partition{Variant: &pb.Partition_RefIndex{RefIndex: &pb.RefIndexPartition{Ns: string(x.NS), Repo: string(x.Repo), ShardRef: string(x.ShardRef)}}}
	case gen.ContentShardPartition:
		return &pb.Partition{Variant: &pb.Partition_ContentShard{ContentShard: &pb.ContentShardPartition{Ns: string(x.NS), Shard: x.Shard}}}
	}
	return nil
}

func partitionFromPB(m *pb.Partition) (gen.Partition, error) {
	switch x := m.GetVariant().(type) {
	case *pb.Partition_Ref:
		return gen.RefPartition{NS: gen.NamespaceKey(x.Ref.GetNs()), Repo: gen.RepoName(x.Ref.GetRepo()), ShardRef: gen.ShardRef(x.Ref.GetShardRef())}, nil
	case *pb.Partition_Namespace:
		return gen.NamespacePartition{NS: gen.NamespaceKey(x.Namespace.GetNs())}, nil
	case *pb.Partition_Coordinator:
		return gen.CoordinatorPartition{NS: gen.NamespaceKey(x.Coordinator.GetNs())}, nil
	case *pb.Partition_RepoIndex:
		return gen.RepoIndexPartition{NS: gen.NamespaceKey(x.RepoIndex.GetNs()), Repo: gen.RepoName(x.RepoIndex.GetRepo())}, nil
	case *pb.Partition_RefIndex:
		return gen.RefIndexPartition{NS: gen.NamespaceKey(x.RefIndex.GetNs()), Repo: gen.RepoName(x.RefIndex.GetRepo()), ShardRef: gen.ShardRef(x.RefIndex.GetShardRef())}, nil
	case *pb.Partition_ContentShard:
		return gen.ContentShardPartition{NS: gen.NamespaceKey(x.ContentShard.GetNs()), Shard: x.ContentShard.GetShard()}, nil
	}
	return nil, fmt.Errorf("pb partition: no variant set")
}

// ReservationToPB returns v as its protobuf equivalent.
func ReservationToPB(v gen.ReservationV1) *pb.ReservationV1 {
	switch x := v.(type) {
	case gen.ReservationTicketed:
		return &pb.ReservationV1{State: &pb.ReservationV1_Ticketed{Ticketed: &pb.ReservationTicketed{TicketId: x.TicketID[:]}}}
	case gen.ReservationCommitted:
		c := &pb.ReservationCommitted{
			Repository: string(x.Repository), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, &pb.RefUpdate{Ref: string(r.Ref), OldOid: r.OldOID, NewOid: r.NewOID})
		}
		return &pb.ReservationV1{State: &pb.ReservationV1_Committed{Committed: c}}
	case gen.ReservationAborted:
		return &pb.ReservationV1{State: &pb.ReservationV1_Aborted{Aborted: &pb.ReservationAborted{
			Repository: string(x.Repository), OccurredAtMs: x.OccurredAtMs,
			Reason: pb.AbortReason(x.Reason), Detail: x.Detail,
		}}}
	}
	return &pb.ReservationV1{}
}

// ReservationFromPB returns m as a gen value; it fails on a missing state
// or a ticket id that is not 32 bytes.
func ReservationFromPB(m *pb.ReservationV1) (gen.ReservationV1, error) {
	switch x := m.GetState().(type) {
	case *pb.ReservationV1_Ticketed:
		var t gen.ReservationTicketed
		if len(x.Ticketed.GetTicketId()) != len(t.TicketID) {
			return nil, fmt.Errorf("pb reservation: ticket id of %d bytes", len(x.Ticketed.GetTicketId()))
		}
		copy(t.TicketID[:], x.Ticketed.GetTicketId())
		return t, nil
	case *pb.ReservationV1_Committed:
		c := x.Committed
		v := gen.ReservationCommitted{
			Repository: gen.RepoName(c.GetRepository()), OccurredAtMs: c.GetOccurredAtMs(),
			BytesStored: c.GetBytesStored(), NewToRepo: c.GetNewToRepo(), NewToStore: c.GetNewToStore(),
		}
		for _, r := range c.GetRefs() {
			v.Refs = append(v.Refs, gen.RefUpdate{Ref: gen.ShardRef(r.GetRef()), OldOID: r.GetOldOid(), NewOID: r.GetNewOid()})
		}
		return v, nil
	case *pb.ReservationV1_Aborted:
		a := x.Aborted
		return gen.ReservationAborted{
			Repository: gen.RepoName(a.GetRepository()), OccurredAtMs: a.GetOccurredAtMs(),
			Reason: gen.AbortReason(a.GetReason()), Detail: a.GetDetail(),
		}, nil
	}
	return nil, fmt.Errorf("pb reservation: no state set")
}

// RelayToMsgp returns v as its msgp equivalent.
func RelayToMsgp(v gen.RelayV1) mpack.RelayV1 {
	m := mpack.RelayV1{Target: partitionToMsgp(v.Target), Deletes: v.Deletes, AtMs: v.AtMs}
	for _, p := range v.Puts {
		m.Puts = append(m.Puts, mpack.RelayPut{Key: p.Key, Value: p.Value})
	}
	return m
}

// RelayFromMsgp returns m as a gen value; it fails unless exactly one
// target variant is set.
func RelayFromMsgp(m *mpack.RelayV1) (gen.RelayV1, error) {
	t, err := partitionFromMsgp(&m.Target)
	if err != nil {
		return gen.RelayV1{}, err
	}
	v := gen.RelayV1{Target: t, Deletes: m.Deletes, AtMs: m.AtMs}
	for _, p := range m.Puts {
		v.Puts = append(v.Puts, gen.RelayPut{Key: p.Key, Value: p.Value})
	}
	return v, nil
}

func partitionToMsgp(p gen.Partition) mpack.Partition {
	switch x := p.(type) {
	case gen.RefPartition:
		return mpack.Partition{Ref: &mpack.RefPartition{NS: string(x.NS), Repo: string(x.Repo), ShardRef: string(x.ShardRef)}}
	case gen.NamespacePartition:
		return mpack.Partition{Namespace: &mpack.NamespacePartition{NS: string(x.NS)}}
	case gen.CoordinatorPartition:
		return mpack.Partition{Coordinator: &mpack.CoordinatorPartition{NS: string(x.NS)}}
	case gen.RepoIndexPartition:
		return mpack.Partition{RepoIndex: &mpack.RepoIndexPartition{NS: string(x.NS), Repo: string(x.Repo)}}
	case gen.RefIndexPartition:
		return mpack.Partition{RefIndex: &mpack.RefIndexPartition{NS: string(x.NS), Repo: string(x.Repo), ShardRef: string(x.ShardRef)}}
	case gen.ContentShardPartition:
		return mpack.Partition{ContentShard: &mpack.ContentShardPartition{NS: string(x.NS), Shard: x.Shard}}
	}
	return mpack.Partition{}
}

func partitionFromMsgp(m *mpack.Partition) (gen.Partition, error) {
	var out []gen.Partition
	if x := m.Ref; x != nil {
		out = append(out, gen.RefPartition{NS: gen.NamespaceKey(x.NS), Repo: gen.RepoName(x.Repo), ShardRef: gen.ShardRef(x.ShardRef)})
	}
	if x := m.Namespace; x != nil {
		out = append(out, gen.NamespacePartition{NS: gen.NamespaceKey(x.NS)})
	}
	if x := m.Coordinator; x != nil {
		out = append(out, gen.CoordinatorPartition{NS: gen.NamespaceKey(x.NS)})
	}
	if x := m.RepoIndex; x != nil {
		out = append(out, gen.RepoIndexPartition{NS: gen.NamespaceKey(x.NS), Repo: gen.RepoName(x.Repo)})
	}
	if x := m.RefIndex; x != nil {
		out = append(out, gen.RefIndexPartition{NS: gen.NamespaceKey(x.NS), Repo: gen.RepoName(x.Repo), ShardRef: gen.ShardRef(x.ShardRef)})
	}
	if x := m.ContentShard; x != nil {
		out = append(out, gen.ContentShardPartition{NS: gen.NamespaceKey(x.NS), Shard: x.Shard})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp partition: %d variants set", len(out))
	}
	return out[0], nil
}

// ReservationToMsgp returns v as its msgp equivalent.
func ReservationToMsgp(v gen.ReservationV1) mpack.ReservationV1 {
	switch x := v.(type) {
	case gen.ReservationTicketed:
		return mpack.ReservationV1{Ticketed: &mpack.ReservationTicketed{TicketID: x.TicketID}}
	case gen.ReservationCommitted:
		c := &mpack.ReservationCommitted{
			Repository: string(x.Repository), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, mpack.RefUpdate{Ref: string(r.Ref), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		return mpack.ReservationV1{Committed: c}
	case gen.ReservationAborted:
		return mpack.ReservationV1{Aborted: &mpack.ReservationAborted{
			Repository: string(x.Repository), OccurredAtMs: x.OccurredAtMs,
			Reason: uint8(x.Reason), Detail: x.Detail,
		}}
	}
	return mpack.ReservationV1{}
}

// ReservationFromMsgp returns m as a gen value; it fails unless exactly
// one state is set.
func ReservationFromMsgp(m *mpack.ReservationV1) (gen.ReservationV1, error) {
	var out []gen.ReservationV1
	if x := m.Ticketed; x != nil {
		out = append(out, gen.ReservationTicketed{TicketID: x.TicketID})
	}
	if c := m.Committed; c != nil {
		v := gen.ReservationCommitted{
			Repository: gen.RepoName(c.Repository), OccurredAtMs: c.OccurredAtMs,
			BytesStored: c.BytesStored, NewToRepo: c.NewToRepo, NewToStore: c.NewToStore,
		}
		for _, r := range c.Refs {
			v.Refs = append(v.Refs, gen.RefUpdate{Ref: gen.ShardRef(r.Ref), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		out = append(out, v)
	}
	if a := m.Aborted; a != nil {
		out = append(out, gen.ReservationAborted{
			Repository: gen.RepoName(a.Repository), OccurredAtMs: a.OccurredAtMs,
			Reason: gen.AbortReason(a.Reason), Detail: a.Detail,
		})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp reservation: %d states set", len(out))
	}
	return out[0], nil
}
