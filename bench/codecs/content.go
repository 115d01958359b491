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
		Target: gen.RefPartition{NS: gen.MustNamespaceKey("ns-prod"), Repo: gen.MustRepoName("repo-main"), ShardRef: gen.MustShardRef("refs/heads/main")},
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
	return &gen.ReservationCommitted{
		Repository:   gen.MustRepoName("acme/platform-monorepo"),
		OccurredAtMs: 1_767_225_600_123,
		BytesStored:  48_213_771,
		NewToRepo:    1_342,
		NewToStore:   977,
		Refs: []gen.RefUpdate{
			{Ref: gen.MustShardRef("refs/heads/main"), OldOID: pattern(20, 0x3a), NewOID: pattern(20, 0x9c)},
			{Ref: gen.MustShardRef("refs/tags/v2.14.0"), OldOID: pattern(20, 0x51), NewOID: pattern(20, 0xe2)},
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
		return &pb.Partition{Variant: &pb.Partition_Ref{Ref: &pb.RefPartition{Ns: x.NS.String(), Repo: x.Repo.String(), ShardRef: x.ShardRef.String()}}}
	case gen.NamespacePartition:
		return &pb.Partition{Variant: &pb.Partition_Namespace{Namespace: &pb.NamespacePartition{Ns: x.NS.String()}}}
	case gen.CoordinatorPartition:
		return &pb.Partition{Variant: &pb.Partition_Coordinator{Coordinator: &pb.CoordinatorPartition{Ns: x.NS.String()}}}
	case gen.RepoIndexPartition:
		return &pb.Partition{Variant: &pb.Partition_RepoIndex{RepoIndex: &pb.RepoIndexPartition{Ns: x.NS.String(), Repo: x.Repo.String()}}}
	case gen.RefIndexPartition:
		return &pb.Partition{Variant: &pb.Partition_RefIndex{RefIndex: &pb.RefIndexPartition{Ns: x.NS.String(), Repo: x.Repo.String(), ShardRef: x.ShardRef.String()}}}
	case gen.ContentShardPartition:
		return &pb.Partition{Variant: &pb.Partition_ContentShard{ContentShard: &pb.ContentShardPartition{Ns: x.NS.String(), Shard: x.Shard}}}
	}
	return nil
}

func partitionFromPB(m *pb.Partition) (gen.Partition, error) {
	var n names
	switch x := m.GetVariant().(type) {
	case *pb.Partition_Ref:
		return n.partition(gen.RefPartition{NS: n.ns(x.Ref.GetNs()), Repo: n.repo(x.Ref.GetRepo()), ShardRef: n.ref(x.Ref.GetShardRef())})
	case *pb.Partition_Namespace:
		return n.partition(gen.NamespacePartition{NS: n.ns(x.Namespace.GetNs())})
	case *pb.Partition_Coordinator:
		return n.partition(gen.CoordinatorPartition{NS: n.ns(x.Coordinator.GetNs())})
	case *pb.Partition_RepoIndex:
		return n.partition(gen.RepoIndexPartition{NS: n.ns(x.RepoIndex.GetNs()), Repo: n.repo(x.RepoIndex.GetRepo())})
	case *pb.Partition_RefIndex:
		return n.partition(gen.RefIndexPartition{NS: n.ns(x.RefIndex.GetNs()), Repo: n.repo(x.RefIndex.GetRepo()), ShardRef: n.ref(x.RefIndex.GetShardRef())})
	case *pb.Partition_ContentShard:
		return n.partition(gen.ContentShardPartition{NS: n.ns(x.ContentShard.GetNs()), Shard: x.ContentShard.GetShard()})
	}
	return nil, fmt.Errorf("pb partition: no variant set")
}

// ReservationToPB returns v as its protobuf equivalent.
func ReservationToPB(v gen.ReservationV1) *pb.ReservationV1 {
	switch x := v.(type) {
	case *gen.ReservationTicketed:
		return &pb.ReservationV1{State: &pb.ReservationV1_Ticketed{Ticketed: &pb.ReservationTicketed{TicketId: x.TicketID[:]}}}
	case *gen.ReservationCommitted:
		c := &pb.ReservationCommitted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, &pb.RefUpdate{Ref: r.Ref.String(), OldOid: r.OldOID, NewOid: r.NewOID})
		}
		return &pb.ReservationV1{State: &pb.ReservationV1_Committed{Committed: c}}
	case *gen.ReservationAborted:
		return &pb.ReservationV1{State: &pb.ReservationV1_Aborted{Aborted: &pb.ReservationAborted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			Reason: pb.AbortReason(x.Reason), Detail: x.Detail,
		}}}
	}
	return &pb.ReservationV1{}
}

// ReservationFromPB returns m as a gen value; it fails on a missing state
// or a ticket id that is not 32 bytes.
func ReservationFromPB(m *pb.ReservationV1) (gen.ReservationV1, error) {
	var n names
	switch x := m.GetState().(type) {
	case *pb.ReservationV1_Ticketed:
		t := new(gen.ReservationTicketed)
		if len(x.Ticketed.GetTicketId()) != len(t.TicketID) {
			return nil, fmt.Errorf("pb reservation: ticket id of %d bytes", len(x.Ticketed.GetTicketId()))
		}
		copy(t.TicketID[:], x.Ticketed.GetTicketId())
		return t, nil
	case *pb.ReservationV1_Committed:
		c := x.Committed
		v := &gen.ReservationCommitted{
			Repository: n.repo(c.GetRepository()), OccurredAtMs: c.GetOccurredAtMs(),
			BytesStored: c.GetBytesStored(), NewToRepo: c.GetNewToRepo(), NewToStore: c.GetNewToStore(),
		}
		for _, r := range c.GetRefs() {
			v.Refs = append(v.Refs, gen.RefUpdate{Ref: n.ref(r.GetRef()), OldOID: r.GetOldOid(), NewOID: r.GetNewOid()})
		}
		return n.reservation(v)
	case *pb.ReservationV1_Aborted:
		a := x.Aborted
		return n.reservation(&gen.ReservationAborted{
			Repository: n.repo(a.GetRepository()), OccurredAtMs: a.GetOccurredAtMs(),
			Reason: gen.AbortReason(a.GetReason()), Detail: a.GetDetail(),
		})
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
		return mpack.Partition{Ref: &mpack.RefPartition{NS: x.NS.String(), Repo: x.Repo.String(), ShardRef: x.ShardRef.String()}}
	case gen.NamespacePartition:
		return mpack.Partition{Namespace: &mpack.NamespacePartition{NS: x.NS.String()}}
	case gen.CoordinatorPartition:
		return mpack.Partition{Coordinator: &mpack.CoordinatorPartition{NS: x.NS.String()}}
	case gen.RepoIndexPartition:
		return mpack.Partition{RepoIndex: &mpack.RepoIndexPartition{NS: x.NS.String(), Repo: x.Repo.String()}}
	case gen.RefIndexPartition:
		return mpack.Partition{RefIndex: &mpack.RefIndexPartition{NS: x.NS.String(), Repo: x.Repo.String(), ShardRef: x.ShardRef.String()}}
	case gen.ContentShardPartition:
		return mpack.Partition{ContentShard: &mpack.ContentShardPartition{NS: x.NS.String(), Shard: x.Shard}}
	}
	return mpack.Partition{}
}

func partitionFromMsgp(m *mpack.Partition) (gen.Partition, error) {
	var n names
	var out []gen.Partition
	if x := m.Ref; x != nil {
		out = append(out, gen.RefPartition{NS: n.ns(x.NS), Repo: n.repo(x.Repo), ShardRef: n.ref(x.ShardRef)})
	}
	if x := m.Namespace; x != nil {
		out = append(out, gen.NamespacePartition{NS: n.ns(x.NS)})
	}
	if x := m.Coordinator; x != nil {
		out = append(out, gen.CoordinatorPartition{NS: n.ns(x.NS)})
	}
	if x := m.RepoIndex; x != nil {
		out = append(out, gen.RepoIndexPartition{NS: n.ns(x.NS), Repo: n.repo(x.Repo)})
	}
	if x := m.RefIndex; x != nil {
		out = append(out, gen.RefIndexPartition{NS: n.ns(x.NS), Repo: n.repo(x.Repo), ShardRef: n.ref(x.ShardRef)})
	}
	if x := m.ContentShard; x != nil {
		out = append(out, gen.ContentShardPartition{NS: n.ns(x.NS), Shard: x.Shard})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp partition: %d variants set", len(out))
	}
	return n.partition(out[0])
}

// ReservationToMsgp returns v as its msgp equivalent.
func ReservationToMsgp(v gen.ReservationV1) mpack.ReservationV1 {
	switch x := v.(type) {
	case *gen.ReservationTicketed:
		return mpack.ReservationV1{Ticketed: &mpack.ReservationTicketed{TicketID: x.TicketID}}
	case *gen.ReservationCommitted:
		c := &mpack.ReservationCommitted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, mpack.RefUpdate{Ref: r.Ref.String(), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		return mpack.ReservationV1{Committed: c}
	case *gen.ReservationAborted:
		return mpack.ReservationV1{Aborted: &mpack.ReservationAborted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			Reason: uint8(x.Reason), Detail: x.Detail,
		}}
	}
	return mpack.ReservationV1{}
}

// ReservationFromMsgp returns m as a gen value; it fails unless exactly
// one state is set.
func ReservationFromMsgp(m *mpack.ReservationV1) (gen.ReservationV1, error) {
	var n names
	var out []gen.ReservationV1
	if x := m.Ticketed; x != nil {
		out = append(out, &gen.ReservationTicketed{TicketID: x.TicketID})
	}
	if c := m.Committed; c != nil {
		v := &gen.ReservationCommitted{
			Repository: n.repo(c.Repository), OccurredAtMs: c.OccurredAtMs,
			BytesStored: c.BytesStored, NewToRepo: c.NewToRepo, NewToStore: c.NewToStore,
		}
		for _, r := range c.Refs {
			v.Refs = append(v.Refs, gen.RefUpdate{Ref: n.ref(r.Ref), OldOID: r.OldOID, NewOID: r.NewOID})
		}
		out = append(out, v)
	}
	if a := m.Aborted; a != nil {
		out = append(out, &gen.ReservationAborted{
			Repository: n.repo(a.Repository), OccurredAtMs: a.OccurredAtMs,
			Reason: gen.AbortReason(a.Reason), Detail: a.Detail,
		})
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("msgp reservation: %d states set", len(out))
	}
	return n.reservation(out[0])
}

// names builds gen identities from another codec's strings, keeping the
// first invalid one's error: gen builds identities only from valid names.
type names struct{ err error }

func (n *names) ns(s string) gen.NamespaceKey { return build(n, s, gen.NewNamespaceKey) }
func (n *names) repo(s string) gen.RepoName   { return build(n, s, gen.NewRepoName) }
func (n *names) ref(s string) gen.ShardRef    { return build(n, s, gen.NewShardRef) }

func build[T any](n *names, s string, newT func(string) (T, error)) T {
	v, err := newT(s)
	if n.err == nil {
		n.err = err
	}
	return v
}

// partition returns p, or the first name error.
func (n *names) partition(p gen.Partition) (gen.Partition, error) {
	if n.err != nil {
		return nil, n.err
	}
	return p, nil
}

// reservation returns r, or the first name error.
func (n *names) reservation(r gen.ReservationV1) (gen.ReservationV1, error) {
	if n.err != nil {
		return nil, n.err
	}
	return r, nil
}
