// Package codecs benchmarks the generated gen record codecs against
// protobuf (package pb), msgp in tuple mode (package mtuple) and in map
// mode (package mpack), and a hand-written
// encoding/binary baseline with gen's byte layout (package baseline), on
// the same content. It is its own module so the library's go.mod stays
// free of the benchmark's dependencies; see README.md for the command and
// the results.
//
// This file holds the content every codec encodes, and conversions
// between the gen values and their protobuf equivalents (used to build the
// inputs and to check round trips, never inside a timed loop; the msgp
// packages hold their own).
package codecs

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/bench/codecs/internal/names"
	"github.com/mkit-dev/mkitfdb/bench/codecs/pb"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// Shape of the benchmarked RelayV1.
const (
	RelayPuts       = 4
	RelayKeyBytes   = 64
	RelayValueBytes = 256
)

// Relay returns the benchmarked RelayV1: the tuple identity of a ref
// partition as its target, 4 puts of 64-byte keys and 256-byte values, no
// deletes. Each call returns fresh slices with the same content.
func Relay() gen.RelayV1 {
	v := gen.RelayV1{
		Target: Identity(refdomain.RefPartition{NS: refdomain.MustNamespaceKey("ns-prod"), Repo: refdomain.MustRepoName("repo-main"), ShardRef: refdomain.MustShardRef("refs/heads/main")}),
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
func Reservation() refdomain.ReservationV1 {
	return &refdomain.ReservationCommitted{
		Repository:   refdomain.MustRepoName("acme/platform-monorepo"),
		OccurredAtMs: 1_767_225_600_123,
		BytesStored:  48_213_771,
		NewToRepo:    1_342,
		NewToStore:   977,
		Refs: []refdomain.RefUpdate{
			{Ref: refdomain.MustShardRef("refs/heads/main"), OldOID: pattern(20, 0x3a), NewOID: pattern(20, 0x9c)},
			{Ref: refdomain.MustShardRef("refs/tags/v2.14.0"), OldOID: pattern(20, 0x51), NewOID: pattern(20, 0xe2)},
		},
	}
}

// Relays returns n RelayV1 contents: Relay(), then n-1 of the same shape
// and sizes whose target partitions are each their own ("ns-0001",
// "repo-0001", "refs/heads/0001", ...).
func Relays(n int) []gen.RelayV1 {
	vs := []gen.RelayV1{Relay()}
	for i := 1; i < n; i++ {
		v := Relay()
		v.Target = Identity(refdomain.RefPartition{
			NS:       refdomain.MustNamespaceKey(fmt.Sprintf("ns-%04d", i)),
			Repo:     refdomain.MustRepoName(fmt.Sprintf("repo-%04d", i)),
			ShardRef: refdomain.MustShardRef(fmt.Sprintf("refs/heads/%04d", i)),
		})
		vs = append(vs, v)
	}
	return vs
}

// Identity returns p's tuple identity, as a RelayV1 names its target.
// It panics for an invalid partition (the contents are constants).
func Identity(p refdomain.Partition) []byte {
	b, err := p.AppendTuple(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// Reservations returns n ReservationV1 contents: Reservation(), then n-1
// of the same shape and sizes whose repository and ref names are each
// their own.
func Reservations(n int) []refdomain.ReservationV1 {
	vs := []refdomain.ReservationV1{Reservation()}
	for i := 1; i < n; i++ {
		v := Reservation().(*refdomain.ReservationCommitted)
		v.Repository = refdomain.MustRepoName(fmt.Sprintf("acme/platform-mono%04d", i))
		v.Refs[0].Ref = refdomain.MustShardRef(fmt.Sprintf("refs/heads/%04d", i))
		v.Refs[1].Ref = refdomain.MustShardRef(fmt.Sprintf("refs/tags/v2.%04d", i))
		vs = append(vs, v)
	}
	return vs
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
	m := &pb.RelayV1{Target: v.Target, AtMs: v.AtMs, Deletes: v.Deletes}
	for _, p := range v.Puts {
		m.Puts = append(m.Puts, &pb.RelayPut{Key: p.Key, Value: p.Value})
	}
	return m
}

// RelayFromPB returns m as a gen value.
func RelayFromPB(m *pb.RelayV1) (gen.RelayV1, error) {
	v := gen.RelayV1{Target: m.GetTarget(), Deletes: m.GetDeletes(), AtMs: m.GetAtMs()}
	for _, p := range m.GetPuts() {
		v.Puts = append(v.Puts, gen.RelayPut{Key: p.GetKey(), Value: p.GetValue()})
	}
	return v, nil
}

// ReservationToPB returns v as its protobuf equivalent.
func ReservationToPB(v refdomain.ReservationV1) *pb.ReservationV1 {
	switch x := v.(type) {
	case *refdomain.ReservationTicketed:
		return &pb.ReservationV1{State: &pb.ReservationV1_Ticketed{Ticketed: &pb.ReservationTicketed{TicketId: x.TicketID[:]}}}
	case *refdomain.ReservationCommitted:
		c := &pb.ReservationCommitted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			BytesStored: x.BytesStored, NewToRepo: x.NewToRepo, NewToStore: x.NewToStore,
		}
		for _, r := range x.Refs {
			c.Refs = append(c.Refs, &pb.RefUpdate{Ref: r.Ref.String(), OldOid: r.OldOID, NewOid: r.NewOID})
		}
		return &pb.ReservationV1{State: &pb.ReservationV1_Committed{Committed: c}}
	case *refdomain.ReservationAborted:
		return &pb.ReservationV1{State: &pb.ReservationV1_Aborted{Aborted: &pb.ReservationAborted{
			Repository: x.Repository.String(), OccurredAtMs: x.OccurredAtMs,
			Reason: pb.AbortReason(x.Reason), Detail: x.Detail,
		}}}
	}
	return &pb.ReservationV1{}
}

// ReservationFromPB returns m as a gen value; it fails on a missing state
// or a ticket id that is not 32 bytes.
func ReservationFromPB(m *pb.ReservationV1) (refdomain.ReservationV1, error) {
	var n names.Builder
	switch x := m.GetState().(type) {
	case *pb.ReservationV1_Ticketed:
		t := new(refdomain.ReservationTicketed)
		if len(x.Ticketed.GetTicketId()) != len(t.TicketID) {
			return nil, fmt.Errorf("pb reservation: ticket id of %d bytes", len(x.Ticketed.GetTicketId()))
		}
		copy(t.TicketID[:], x.Ticketed.GetTicketId())
		return t, nil
	case *pb.ReservationV1_Committed:
		c := x.Committed
		v := &refdomain.ReservationCommitted{
			Repository: n.Repo(c.GetRepository()), OccurredAtMs: c.GetOccurredAtMs(),
			BytesStored: c.GetBytesStored(), NewToRepo: c.GetNewToRepo(), NewToStore: c.GetNewToStore(),
		}
		for _, r := range c.GetRefs() {
			v.Refs = append(v.Refs, refdomain.RefUpdate{Ref: n.Ref(r.GetRef()), OldOID: r.GetOldOid(), NewOID: r.GetNewOid()})
		}
		return n.Reservation(v)
	case *pb.ReservationV1_Aborted:
		a := x.Aborted
		return n.Reservation(&refdomain.ReservationAborted{
			Repository: n.Repo(a.GetRepository()), OccurredAtMs: a.GetOccurredAtMs(),
			Reason: refdomain.AbortReason(a.GetReason()), Detail: a.GetDetail(),
		})
	}
	return nil, fmt.Errorf("pb reservation: no state set")
}
