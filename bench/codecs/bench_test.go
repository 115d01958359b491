package codecs

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mkit-dev/mkitfdb/bench/codecs/baseline"
	"github.com/mkit-dev/mkitfdb/bench/codecs/mpack"
	"github.com/mkit-dev/mkitfdb/bench/codecs/mtuple"
	"github.com/mkit-dev/mkitfdb/bench/codecs/pb"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// Each benchmark encodes into a reused buffer or decodes a prepared
// encoding, the way each library is fastest used:
//   - ours: gen.Append* into buf[:0]; gen.Decode*Into one reused value
//     (reusing its slices and, for a reservation, the variant it holds;
//     a relay row's Target, its target's tuple identity, aliases the
//     input like every byte field).
//   - protobuf: MarshalOptions{}.MarshalAppend into buf[:0]; Reset, then
//     proto.Unmarshal into one reused message.
//   - msgp-tuple (package mtuple, msgp's tuple mode) and msgp-map
//     (package mpack, its default map mode): MarshalMsg(buf[:0]);
//     UnmarshalMsg into one reused value (byte fields alias the input:
//     they are tagged zerocopy).
//   - baseline: the hand-written codec, shaped like ours: Append* into
//     buf[:0], Decode*Into one reused value.
//
// SetBytes is the size of the content in gen's layout for every codec, so
// MB/s compares the same content; each codec's own size is the wire-bytes
// metric.

var (
	sinkRelay       gen.RelayV1
	sinkReservation refdomain.ReservationV1
)

// codecOps is one codec's encode and decode of one record of gen type T,
// one operation per call; size is the length of the codec's own encoding.
// encoded and decoded return the last results, as gen values, for the
// tests that check the benchmarks do the same work.
type codecOps[T any] struct {
	codec   string
	size    int
	encode  func() error
	decode  func() error
	encoded func() []byte
	decoded func() (T, error)
}

var codecNames = []string{"ours", "protobuf", "msgp-tuple", "msgp-map", "baseline"}

// msgpRecord is a msgp record M (of either mode) whose gen value is a T.
type msgpRecord[T, M any] interface {
	*M
	MarshalMsg([]byte) ([]byte, error)
	UnmarshalMsg([]byte) ([]byte, error)
	Gen() (T, error)
}

// msgpOps is the ops of codec, a msgp record type P, on the contents vs:
// MarshalMsg of vs[0] into a reused buffer; UnmarshalMsg of each encoding
// in turn into one reused value.
func msgpOps[T, M any, P msgpRecord[T, M]](codec string, vs []T, fromGen func(T) M) codecOps[T] {
	in := fromGen(vs[0])
	encs := encodeAll(vs, func(v T) ([]byte, error) { m := fromGen(v); return P(&m).MarshalMsg(nil) })
	out := P(new(M))
	c := codecOps[T]{codec: codec, size: len(encs[0]),
		decode: cycling(encs, func(b []byte) error {
			if rest, err := out.UnmarshalMsg(b); err != nil || len(rest) != 0 {
				return fmt.Errorf("%s: %d bytes left, %v", codec, len(rest), err)
			}
			return nil
		}),
		decoded: out.Gen}
	c.encode, c.encoded = appendOp(P(&in).MarshalMsg)
	return c
}

// appendOp returns an encode op that appends to one reused buffer, and
// the accessor of the buffer.
func appendOp(appendTo func([]byte) ([]byte, error)) (func() error, func() []byte) {
	var buf []byte
	return func() (err error) {
			buf, err = appendTo(buf[:0])
			return err
		}, func() []byte {
			return buf
		}
}

// encodeAll returns the encodings of vs.
func encodeAll[T any](vs []T, encode func(T) ([]byte, error)) [][]byte {
	encs := make([][]byte, len(vs))
	for i, v := range vs {
		encs[i] = must(encode(v))
	}
	return encs
}

// cycling returns a decode op that decodes encs[0], encs[1], ... in turn.
func cycling(encs [][]byte, decode func([]byte) error) func() error {
	k := 0
	return func() error {
		b := encs[k]
		if k++; k == len(encs) {
			k = 0
		}
		return decode(b)
	}
}

// relayOps is the ops of every codec on the contents vs (see Relays):
// each encodes vs[0] and decodes the encodings of vs in turn.
func relayOps(vs []gen.RelayV1) []codecOps[gen.RelayV1] {
	v := vs[0]
	ours := encodeAll(vs, func(v gen.RelayV1) ([]byte, error) { return gen.AppendRelayV1(nil, v) })
	var oursOut gen.RelayV1
	m := RelayToPB(v)
	pbEncs := encodeAll(vs, func(v gen.RelayV1) ([]byte, error) { return proto.Marshal(RelayToPB(v)) })
	pbOut := new(pb.RelayV1)
	base := encodeAll(vs, func(v gen.RelayV1) ([]byte, error) { return baseline.AppendRelayV1(nil, v), nil })
	var baseOut gen.RelayV1
	ops := []codecOps[gen.RelayV1]{
		{codec: "ours", size: len(ours[0]),
			decode:  cycling(ours, func(b []byte) error { return gen.DecodeRelayV1Into(b, &oursOut) }),
			decoded: func() (gen.RelayV1, error) { return oursOut, nil }},
		{codec: "protobuf", size: len(pbEncs[0]),
			decode:  cycling(pbEncs, func(b []byte) error { pbOut.Reset(); return proto.Unmarshal(b, pbOut) }),
			decoded: func() (gen.RelayV1, error) { return RelayFromPB(pbOut) }},
		msgpOps("msgp-tuple", vs, mtuple.RelayFromGen),
		msgpOps("msgp-map", vs, mpack.RelayFromGen),
		{codec: "baseline", size: len(base[0]),
			decode:  cycling(base, func(b []byte) error { return baseline.DecodeRelayV1Into(b, &baseOut) }),
			decoded: func() (gen.RelayV1, error) { return baseOut, nil }},
	}
	ops[0].encode, ops[0].encoded = appendOp(func(buf []byte) ([]byte, error) { return gen.AppendRelayV1(buf, v) })
	ops[1].encode, ops[1].encoded = appendOp(func(buf []byte) ([]byte, error) { return proto.MarshalOptions{}.MarshalAppend(buf, m) })
	ops[4].encode, ops[4].encoded = appendOp(func(buf []byte) ([]byte, error) { return baseline.AppendRelayV1(buf, v), nil })
	return ops
}

// reservationOps is relayOps for ReservationV1 (see Reservations).
func reservationOps(vs []refdomain.ReservationV1) []codecOps[refdomain.ReservationV1] {
	v := vs[0]
	ours := encodeAll(vs, func(v refdomain.ReservationV1) ([]byte, error) { return refdomain.AppendReservationV1(nil, v) })
	var oursOut refdomain.ReservationV1
	m := ReservationToPB(v)
	pbEncs := encodeAll(vs, func(v refdomain.ReservationV1) ([]byte, error) { return proto.Marshal(ReservationToPB(v)) })
	pbOut := new(pb.ReservationV1)
	base := encodeAll(vs, func(v refdomain.ReservationV1) ([]byte, error) { return baseline.AppendReservationV1(nil, v), nil })
	var baseOut refdomain.ReservationV1
	ops := []codecOps[refdomain.ReservationV1]{
		{codec: "ours", size: len(ours[0]),
			decode:  cycling(ours, func(b []byte) error { return refdomain.DecodeReservationV1Into(b, &oursOut) }),
			decoded: func() (refdomain.ReservationV1, error) { return oursOut, nil }},
		{codec: "protobuf", size: len(pbEncs[0]),
			decode:  cycling(pbEncs, func(b []byte) error { pbOut.Reset(); return proto.Unmarshal(b, pbOut) }),
			decoded: func() (refdomain.ReservationV1, error) { return ReservationFromPB(pbOut) }},
		msgpOps("msgp-tuple", vs, mtuple.ReservationFromGen),
		msgpOps("msgp-map", vs, mpack.ReservationFromGen),
		{codec: "baseline", size: len(base[0]),
			decode:  cycling(base, func(b []byte) error { return baseline.DecodeReservationV1Into(b, &baseOut) }),
			decoded: func() (refdomain.ReservationV1, error) { return baseOut, nil }},
	}
	ops[0].encode, ops[0].encoded = appendOp(func(buf []byte) ([]byte, error) { return refdomain.AppendReservationV1(buf, v) })
	ops[1].encode, ops[1].encoded = appendOp(func(buf []byte) ([]byte, error) { return proto.MarshalOptions{}.MarshalAppend(buf, m) })
	ops[4].encode, ops[4].encoded = appendOp(func(buf []byte) ([]byte, error) { return baseline.AppendReservationV1(buf, v), nil })
	return ops
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// opBench times op; SetBytes is contentSize, the content's size in gen's
// layout, and the wire-bytes metric is the codec's own size.
func opBench(contentSize, wireSize int, op func() error) func(*testing.B) {
	return func(b *testing.B) {
		if err := op(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(contentSize))
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(wireSize), "wire-bytes")
	}
}

func runCodecs[T any](b *testing.B, ops []codecOps[T]) {
	for _, c := range ops {
		b.Run(c.codec, func(b *testing.B) {
			b.Run("encode", opBench(ops[0].size, c.size, c.encode))
			b.Run("decode", opBench(ops[0].size, c.size, c.decode))
		})
	}
}

// BenchmarkRelayV1 is BenchmarkRelayV1/{codec}/{encode,decode}.
func BenchmarkRelayV1(b *testing.B) { runCodecs(b, relayOps(Relays(1))) }

// BenchmarkReservationV1 is BenchmarkReservationV1/{codec}/{encode,decode}.
func BenchmarkReservationV1(b *testing.B) { runCodecs(b, reservationOps(Reservations(1))) }

// unseen is how many contents the decode-unseen rows of BenchmarkCompare
// cycle through: each with names of its own, eight times as many as a
// codec/wire intern table holds, so that gen's decoders almost never find a
// name or partition decoded before (their worst case) while the other
// codecs do the same work as on one content. (Every codec reads its
// contents' encodings from memory beyond the L2 cache in these rows.)
const unseen = 2048

// compareBatch is how many operations of one codec BenchmarkCompare times
// at a stretch before it moves to the next codec.
const compareBatch = 64

// BenchmarkCompare is BenchmarkCompare/{record}/{encode,decode,decode-unseen}
// (see unseen): each
// iteration times compareBatch operations of every codec in turn, so all
// five run under the same conditions, and it reports the ratios of the
// median batch times (ours/protobuf, ours/msgp-tuple, ours/msgp-map,
// ours/baseline: under 1 means ours is faster) and allocs-over-baseline (ours' allocations per
// operation minus the baseline's). Its own ns/op means nothing and is
// suppressed; its B/op and allocs/op are ours'.
func BenchmarkCompare(b *testing.B) {
	relay, reservation := relayOps(Relays(1)), reservationOps(Reservations(1))
	relayUnseen, reservationUnseen := relayOps(Relays(unseen)), reservationOps(Reservations(unseen))
	for _, rec := range []struct {
		name string
		ops  map[string][]func() error
	}{
		{"RelayV1", map[string][]func() error{"encode": opsOf(relay, true), "decode": opsOf(relay, false), "decode-unseen": opsOf(relayUnseen, false)}},
		{"ReservationV1", map[string][]func() error{"encode": opsOf(reservation, true), "decode": opsOf(reservation, false), "decode-unseen": opsOf(reservationUnseen, false)}},
	} {
		for _, op := range []string{"encode", "decode", "decode-unseen"} {
			b.Run(rec.name+"/"+op, func(b *testing.B) {
				fns := rec.ops[op]
				oursAllocs, oursBytes := allocsPerOp(fns[0])
				baseAllocs, _ := allocsPerOp(fns[len(fns)-1])
				batches := make([][]time.Duration, len(fns))
				for b.Loop() {
					for i, f := range fns {
						start := time.Now()
						for range compareBatch {
							if err := f(); err != nil {
								b.Fatal(err)
							}
						}
						batches[i] = append(batches[i], time.Since(start))
					}
				}
				ours := median(batches[0])
				for i, name := range codecNames[1:] {
					b.ReportMetric(ours/median(batches[i+1]), "ours/"+name)
				}
				b.ReportMetric(oursAllocs-baseAllocs, "allocs-over-baseline")
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(oursBytes, "B/op")
				b.ReportMetric(oursAllocs, "allocs/op")
			})
		}
	}
}

// median is the median of ds, in nanoseconds: unlike a sum, it ignores
// the batches that another process's time slice or a GC pause landed in.
func median(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2])
}

// opsOf lists the encode (or decode) ops of ops, in codecNames order.
func opsOf[T any](ops []codecOps[T], encode bool) []func() error {
	fns := make([]func() error, len(ops))
	for i, c := range ops {
		if c.codec != codecNames[i] {
			panic("codecs out of order: " + c.codec)
		}
		fns[i] = c.decode
		if encode {
			fns[i] = c.encode
		}
	}
	return fns
}

// allocsPerOp is the mean count and bytes of heap allocations of op.
func allocsPerOp(op func() error) (allocs, bytes float64) {
	const runs = 200
	_ = op()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		_ = op()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / runs, float64(after.TotalAlloc-before.TotalAlloc) / runs
}
