package codecs

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/mkit-dev/mkitfdb/bench/codecs/baseline"
	"github.com/mkit-dev/mkitfdb/bench/codecs/mpack"
	"github.com/mkit-dev/mkitfdb/bench/codecs/mtuple"
	"github.com/mkit-dev/mkitfdb/bench/codecs/pb"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// roundTrip is one codec's trip of a gen value T through its encoding and
// back, and its encoding of a T.
type roundTrip[T any] struct {
	name  string
	trip  func(T) (T, error)
	bytes func(T) ([]byte, error)
}

// msgpTrip is the roundTrip of a msgp record type P built by fromGen.
func msgpTrip[T, M any, P msgpRecord[T, M]](name string, fromGen func(T) M) roundTrip[T] {
	bytes := func(v T) ([]byte, error) { m := fromGen(v); return P(&m).MarshalMsg(nil) }
	return roundTrip[T]{name, func(v T) (T, error) {
		var zero T
		b, err := bytes(v)
		if err != nil {
			return zero, err
		}
		out := P(new(M))
		if rest, err := out.UnmarshalMsg(b); err != nil || len(rest) != 0 {
			return zero, fmt.Errorf("%s: %d bytes left, %v", name, len(rest), err)
		}
		return out.Gen()
	}, bytes}
}

// relayRoundTrips encode a RelayV1 and decode it back to a gen value, one
// per codec, with the calls the benchmarks time.
var relayRoundTrips = []roundTrip[gen.RelayV1]{
	{"ours", func(v gen.RelayV1) (gen.RelayV1, error) {
		b, err := gen.AppendRelayV1(nil, v)
		if err != nil {
			return gen.RelayV1{}, err
		}
		return gen.DecodeRelayV1(b)
	}, func(v gen.RelayV1) ([]byte, error) { return gen.AppendRelayV1(nil, v) }},
	{"protobuf", func(v gen.RelayV1) (gen.RelayV1, error) {
		b, err := proto.MarshalOptions{}.MarshalAppend(nil, RelayToPB(v))
		if err != nil {
			return gen.RelayV1{}, err
		}
		m := new(pb.RelayV1)
		if err := proto.Unmarshal(b, m); err != nil {
			return gen.RelayV1{}, err
		}
		return RelayFromPB(m)
	}, func(v gen.RelayV1) ([]byte, error) { return proto.MarshalOptions{}.MarshalAppend(nil, RelayToPB(v)) }},
	msgpTrip("msgp-tuple", mtuple.RelayFromGen),
	msgpTrip("msgp-map", mpack.RelayFromGen),
	{"baseline", func(v gen.RelayV1) (gen.RelayV1, error) {
		return baseline.DecodeRelayV1(baseline.AppendRelayV1(nil, v))
	}, func(v gen.RelayV1) ([]byte, error) { return baseline.AppendRelayV1(nil, v), nil }},
}

var reservationRoundTrips = []roundTrip[refdomain.ReservationV1]{
	{"ours", func(v refdomain.ReservationV1) (refdomain.ReservationV1, error) {
		b, err := refdomain.AppendReservationV1(nil, v)
		if err != nil {
			return nil, err
		}
		return refdomain.DecodeReservationV1(b)
	}, func(v refdomain.ReservationV1) ([]byte, error) { return refdomain.AppendReservationV1(nil, v) }},
	{"protobuf", func(v refdomain.ReservationV1) (refdomain.ReservationV1, error) {
		b, err := proto.MarshalOptions{}.MarshalAppend(nil, ReservationToPB(v))
		if err != nil {
			return nil, err
		}
		m := new(pb.ReservationV1)
		if err := proto.Unmarshal(b, m); err != nil {
			return nil, err
		}
		return ReservationFromPB(m)
	}, func(v refdomain.ReservationV1) ([]byte, error) {
		return proto.MarshalOptions{}.MarshalAppend(nil, ReservationToPB(v))
	}},
	msgpTrip("msgp-tuple", mtuple.ReservationFromGen),
	msgpTrip("msgp-map", mpack.ReservationFromGen),
	{"baseline", func(v refdomain.ReservationV1) (refdomain.ReservationV1, error) {
		return baseline.DecodeReservationV1(baseline.AppendReservationV1(nil, v))
	}, func(v refdomain.ReservationV1) ([]byte, error) { return baseline.AppendReservationV1(nil, v), nil }},
}

// relayValues are the benchmarked content and one row per other partition
// variant's identity, with deletes, an empty and a maximal target, so every
// codec path of the types is exercised.
func relayValues() map[string]gen.RelayV1 {
	withDeletes := func(t refdomain.Partition) gen.RelayV1 {
		return gen.RelayV1{
			Target:  Identity(t),
			Puts:    []gen.RelayPut{{Key: []byte("k"), Value: []byte{}}},
			Deletes: [][]byte{[]byte("gone-1"), pattern(300, 9)},
			AtMs:    1 << 63,
		}
	}
	return map[string]gen.RelayV1{
		"benchmarked":  Relay(),
		"namespace":    withDeletes(refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("ns-prod")}),
		"coordinator":  withDeletes(refdomain.CoordinatorPartition{NS: refdomain.MustNamespaceKey("ns-prod")}),
		"repo_index":   withDeletes(refdomain.RepoIndexPartition{NS: refdomain.MustNamespaceKey("ns-prod"), Repo: refdomain.MustRepoName("repo-main")}),
		"ref_index":    withDeletes(refdomain.RefIndexPartition{NS: refdomain.MustNamespaceKey("ns-prod"), Repo: refdomain.MustRepoName("repo-main"), ShardRef: refdomain.MustShardRef("refs/heads/dev")}),
		"content":      withDeletes(refdomain.ContentShardPartition{NS: refdomain.MustNamespaceKey("ns-prod"), Shard: 0xdeadbeef}),
		"ref_no_puts":  {Target: Identity(refdomain.RefPartition{NS: refdomain.MustNamespaceKey("n"), Repo: refdomain.MustRepoName("r"), ShardRef: refdomain.MustShardRef("s")}), AtMs: 0},
		"ref_max_puts": {Target: Identity(refdomain.RefPartition{NS: refdomain.MustNamespaceKey("n"), Repo: refdomain.MustRepoName("r"), ShardRef: refdomain.MustShardRef("s")}), Puts: make([]gen.RelayPut, gen.MaxRelayV1Puts)},
		"empty_target": {Target: []byte{}, Puts: []gen.RelayPut{{Key: []byte("k"), Value: []byte("v")}}},
		"max_target":   {Target: pattern(gen.MaxRelayV1Target, 3), Deletes: [][]byte{[]byte("d")}},
	}
}

func reservationValues() map[string]refdomain.ReservationV1 {
	var ticket refdomain.ReservationTicketed
	copy(ticket.TicketID[:], pattern(32, 4))
	return map[string]refdomain.ReservationV1{
		"benchmarked": Reservation(),
		"ticketed":    &ticket,
		"aborted": &refdomain.ReservationAborted{
			Repository: refdomain.MustRepoName("acme/platform-monorepo"), OccurredAtMs: 1_767_225_600_123,
			Reason: refdomain.AbortReasonQuotaExceeded, Detail: "namespace quota of 10 GiB exceeded",
		},
		"committed_no_refs": &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("r")},
	}
}

func TestRelayRoundTrip(t *testing.T) {
	for name, want := range relayValues() {
		for _, c := range relayRoundTrips {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				got, err := c.trip(want)
				if err != nil {
					t.Fatal(err)
				}
				checkRelay(t, got, want)
			})
		}
	}
}

func TestReservationRoundTrip(t *testing.T) {
	for name, want := range reservationValues() {
		for _, c := range reservationRoundTrips {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				got, err := c.trip(want)
				if err != nil {
					t.Fatal(err)
				}
				checkReservation(t, got, want)
			})
		}
	}
}

// TestBenchOpsDoTheSameWork runs each benchmarked operation once: every
// encode writes its codec's encoding of the content and every decode
// yields the content, so the benchmarks time equal work.
func TestBenchOpsDoTheSameWork(t *testing.T) {
	for i, c := range relayOps(Relays(1)) {
		t.Run("RelayV1/"+c.codec, func(t *testing.T) {
			if err := c.encode(); err != nil {
				t.Fatal(err)
			}
			if want := must(relayRoundTrips[i].bytes(Relay())); !bytes.Equal(c.encoded(), want) {
				t.Errorf("encode wrote %x, want %x", c.encoded(), want)
			}
			if err := c.decode(); err != nil {
				t.Fatal(err)
			}
			got, err := c.decoded()
			if err != nil {
				t.Fatal(err)
			}
			checkRelay(t, got, Relay())
		})
	}
	for i, c := range reservationOps(Reservations(1)) {
		t.Run("ReservationV1/"+c.codec, func(t *testing.T) {
			if err := c.encode(); err != nil {
				t.Fatal(err)
			}
			if want := must(reservationRoundTrips[i].bytes(Reservation())); !bytes.Equal(c.encoded(), want) {
				t.Errorf("encode wrote %x, want %x", c.encoded(), want)
			}
			if err := c.decode(); err != nil {
				t.Fatal(err)
			}
			got, err := c.decoded()
			if err != nil {
				t.Fatal(err)
			}
			checkReservation(t, got, Reservation())
		})
	}
}

// TestBaselineWritesGenLayout holds the baseline to gen's byte layout, so
// both do the same work: equal bytes out, and each decodes the other's.
func TestBaselineWritesGenLayout(t *testing.T) {
	for name, v := range relayValues() {
		t.Run("RelayV1/"+name, func(t *testing.T) {
			ours, err := gen.AppendRelayV1(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			if base := baseline.AppendRelayV1(nil, v); !bytes.Equal(base, ours) {
				t.Fatalf("baseline wrote\n%x\ngen wrote\n%x", base, ours)
			}
			got, err := baseline.DecodeRelayV1(ours)
			if err != nil {
				t.Fatal(err)
			}
			checkRelay(t, got, v)
		})
	}
	for name, v := range reservationValues() {
		t.Run("ReservationV1/"+name, func(t *testing.T) {
			ours, err := refdomain.AppendReservationV1(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			if base := baseline.AppendReservationV1(nil, v); !bytes.Equal(base, ours) {
				t.Fatalf("baseline wrote\n%x\ngen wrote\n%x", base, ours)
			}
			got, err := baseline.DecodeReservationV1(ours)
			if err != nil {
				t.Fatal(err)
			}
			checkReservation(t, got, v)
		})
	}
}

// TestBaselineRejectsTruncation checks the one thing the baseline decoders
// promise beyond speed: every prefix of a record fails without panicking.
func TestBaselineRejectsTruncation(t *testing.T) {
	relay := baseline.AppendRelayV1(nil, Relay())
	for n := range len(relay) {
		if _, err := baseline.DecodeRelayV1(relay[:n]); err == nil {
			t.Fatalf("RelayV1 prefix of %d/%d bytes decoded", n, len(relay))
		}
	}
	res := baseline.AppendReservationV1(nil, Reservation())
	for n := range len(res) {
		if _, err := baseline.DecodeReservationV1(res[:n]); err == nil {
			t.Fatalf("ReservationV1 prefix of %d/%d bytes decoded", n, len(res))
		}
	}
}

// TestEncodedSizes pins the size of the benchmarked content in each
// format, so a change in what the benchmarks encode shows up here.
func TestEncodedSizes(t *testing.T) {
	// RelayV1's target is its partition's tuple identity: 50 bytes
	// (namespace "refdomain", variant and three names, each framed).
	want := map[string][2]int{ // RelayV1, ReservationV1
		"ours":       {1354, 176},
		"protobuf":   {1371, 173},
		"msgp-tuple": {1368, 172},
		"msgp-map":   {1434, 289},
		"baseline":   {1354, 176},
	}
	for i, c := range relayRoundTrips {
		r, err := c.bytes(Relay())
		if err != nil {
			t.Fatal(err)
		}
		s, err := reservationRoundTrips[i].bytes(Reservation())
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]int{len(r), len(s)}; got != want[c.name] {
			t.Errorf("%s: encoded sizes %v, want %v", c.name, got, want[c.name])
		}
		// the decode-unseen contents differ only in their names' bytes
		for k, v := range Relays(3) {
			if r, err := c.bytes(v); err != nil || len(r) != want[c.name][0] {
				t.Errorf("%s: Relays(3)[%d] encodes to %d bytes (%v), want %d", c.name, k, len(r), err, want[c.name][0])
			}
		}
		for k, v := range Reservations(3) {
			if s, err := reservationRoundTrips[i].bytes(v); err != nil || len(s) != want[c.name][1] {
				t.Errorf("%s: Reservations(3)[%d] encodes to %d bytes (%v), want %d", c.name, k, len(s), err, want[c.name][1])
			}
		}
	}
}

func checkRelay(t *testing.T, got, want gen.RelayV1) {
	t.Helper()
	if !bytes.Equal(got.Target, want.Target) {
		t.Errorf("Target = %x, want %x", got.Target, want.Target)
	}
	if len(got.Puts) != len(want.Puts) {
		t.Fatalf("%d puts, want %d", len(got.Puts), len(want.Puts))
	}
	for i := range want.Puts {
		if !bytes.Equal(got.Puts[i].Key, want.Puts[i].Key) {
			t.Errorf("Puts[%d].Key = %x, want %x", i, got.Puts[i].Key, want.Puts[i].Key)
		}
		if !bytes.Equal(got.Puts[i].Value, want.Puts[i].Value) {
			t.Errorf("Puts[%d].Value = %x, want %x", i, got.Puts[i].Value, want.Puts[i].Value)
		}
	}
	if len(got.Deletes) != len(want.Deletes) {
		t.Fatalf("%d deletes, want %d", len(got.Deletes), len(want.Deletes))
	}
	for i := range want.Deletes {
		if !bytes.Equal(got.Deletes[i], want.Deletes[i]) {
			t.Errorf("Deletes[%d] = %x, want %x", i, got.Deletes[i], want.Deletes[i])
		}
	}
	if got.AtMs != want.AtMs {
		t.Errorf("AtMs = %d, want %d", got.AtMs, want.AtMs)
	}
}

func checkReservation(t *testing.T, got, want refdomain.ReservationV1) {
	t.Helper()
	switch w := want.(type) {
	case *refdomain.ReservationTicketed:
		g, ok := got.(*refdomain.ReservationTicketed)
		if !ok {
			t.Fatalf("got %T, want %T", got, want)
		}
		if g.TicketID != w.TicketID {
			t.Errorf("TicketID = %x, want %x", g.TicketID, w.TicketID)
		}
	case *refdomain.ReservationCommitted:
		g, ok := got.(*refdomain.ReservationCommitted)
		if !ok {
			t.Fatalf("got %T, want %T", got, want)
		}
		if g.Repository != w.Repository {
			t.Errorf("Repository = %q, want %q", g.Repository, w.Repository)
		}
		if g.OccurredAtMs != w.OccurredAtMs || g.BytesStored != w.BytesStored ||
			g.NewToRepo != w.NewToRepo || g.NewToStore != w.NewToStore {
			t.Errorf("counters = %d %d %d %d, want %d %d %d %d",
				g.OccurredAtMs, g.BytesStored, g.NewToRepo, g.NewToStore,
				w.OccurredAtMs, w.BytesStored, w.NewToRepo, w.NewToStore)
		}
		if len(g.Refs) != len(w.Refs) {
			t.Fatalf("%d refs, want %d", len(g.Refs), len(w.Refs))
		}
		for i := range w.Refs {
			if g.Refs[i].Ref != w.Refs[i].Ref {
				t.Errorf("Refs[%d].Ref = %q, want %q", i, g.Refs[i].Ref, w.Refs[i].Ref)
			}
			if !bytes.Equal(g.Refs[i].OldOID, w.Refs[i].OldOID) || !bytes.Equal(g.Refs[i].NewOID, w.Refs[i].NewOID) {
				t.Errorf("Refs[%d] OIDs = %x..%x, want %x..%x", i,
					g.Refs[i].OldOID, g.Refs[i].NewOID, w.Refs[i].OldOID, w.Refs[i].NewOID)
			}
		}
	case *refdomain.ReservationAborted:
		g, ok := got.(*refdomain.ReservationAborted)
		if !ok {
			t.Fatalf("got %T, want %T", got, want)
		}
		if g.Repository != w.Repository || g.OccurredAtMs != w.OccurredAtMs || g.Reason != w.Reason || g.Detail != w.Detail {
			t.Errorf("got %+v, want %+v", g, w)
		}
	default:
		t.Fatalf("want of unexpected type %T", want)
	}
}

// FuzzBaselineDecode feeds arbitrary bytes to the baseline decoders: they
// must not panic, and whatever gen decodes they decode to the same value.
func FuzzBaselineDecode(f *testing.F) {
	for _, v := range relayValues() {
		f.Add(must(gen.AppendRelayV1(nil, v)))
	}
	for _, v := range reservationValues() {
		f.Add(must(refdomain.AppendReservationV1(nil, v)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		base, berr := baseline.DecodeRelayV1(b)
		if ours, err := gen.DecodeRelayV1(b); err == nil {
			if berr != nil {
				t.Fatalf("gen decodes RelayV1 %x, baseline fails: %v", b, berr)
			}
			checkRelay(t, base, ours)
		}
		bres, berr := baseline.DecodeReservationV1(b)
		if ours, err := refdomain.DecodeReservationV1(b); err == nil {
			if berr != nil {
				t.Fatalf("gen decodes ReservationV1 %x, baseline fails: %v", b, berr)
			}
			checkReservation(t, bres, ours)
		}
	})
}
