// Package baseline is a hand-written encoding/binary codec for gen.RelayV1
// and refdomain.ReservationV1 with exactly the byte layout of the generated gen
// codecs: the practical speed limit that the codec benchmarks hold the
// generated code against.
//
// Layout (as gen writes it): a version byte; a union as its variant tag
// byte and the variant's fields; strings and byte strings as a uvarint
// length and the bytes; counts as uvarints; u32 and u64 big-endian; a fixed
// array as its bytes.
//
// Design note: the decoders check only what memory safety needs (every
// length and count against the bytes left, the version and union tags they
// dispatch on) and what gen's types demand of anyone who builds their
// values: identity names go through refdomain.NewRepoName and friends. They
// do not check bounds, enum values, canonical varints or trailing bytes,
// and their errors carry no field path; gen decoders do all of that. Like
// gen's DecodeInto, they decode into a caller's value, reusing its slices
// and the reservation variant it holds. Byte slices of a decoded value
// alias the input, as with gen.
package baseline

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// ErrCorrupt is returned for input that cannot be decoded safely.
var ErrCorrupt = errors.New("baseline: corrupt data")

// AppendRelayV1 appends the encoding of v to dst; it does not validate v.
func AppendRelayV1(dst []byte, v gen.RelayV1) []byte {
	dst = append(dst, gen.VersionRelayV1)
	dst = appendBytes(dst, v.Target)
	dst = binary.AppendUvarint(dst, uint64(len(v.Puts)))
	for i := range v.Puts {
		dst = appendBytes(dst, v.Puts[i].Key)
		dst = appendBytes(dst, v.Puts[i].Value)
	}
	dst = binary.AppendUvarint(dst, uint64(len(v.Deletes)))
	for _, d := range v.Deletes {
		dst = appendBytes(dst, d)
	}
	return binary.BigEndian.AppendUint64(dst, v.AtMs)
}

// DecodeRelayV1 decodes b; byte slices of the result alias b.
func DecodeRelayV1(b []byte) (gen.RelayV1, error) {
	var v gen.RelayV1
	err := DecodeRelayV1Into(b, &v)
	return v, err
}

// DecodeRelayV1Into decodes b into *v, reusing the capacity of its slices.
func DecodeRelayV1Into(b []byte, v *gen.RelayV1) error {
	d := decoder{b: b}
	if d.u8() != gen.VersionRelayV1 {
		return ErrCorrupt
	}
	v.Target = d.bytes()
	n := d.count(2)
	v.Puts = slices.Grow(v.Puts[:0], n)[:n]
	for i := range v.Puts {
		v.Puts[i].Key = d.bytes()
		v.Puts[i].Value = d.bytes()
	}
	n = d.count(1)
	v.Deletes = slices.Grow(v.Deletes[:0], n)[:n]
	for i := range v.Deletes {
		v.Deletes[i] = d.bytes()
	}
	v.AtMs = d.u64()
	if d.bad {
		*v = gen.RelayV1{}
		return ErrCorrupt
	}
	return nil
}

// AppendReservationV1 appends the encoding of v to dst; it does not
// validate v.
func AppendReservationV1(dst []byte, v refdomain.ReservationV1) []byte {
	dst = append(dst, refdomain.VersionReservationV1)
	switch x := v.(type) {
	case *refdomain.ReservationTicketed:
		dst = append(dst, 1)
		dst = append(dst, x.TicketID[:]...)
	case *refdomain.ReservationCommitted:
		dst = append(dst, 2)
		dst = appendString(dst, x.Repository.String())
		dst = binary.BigEndian.AppendUint64(dst, x.OccurredAtMs)
		dst = binary.BigEndian.AppendUint64(dst, x.BytesStored)
		dst = binary.BigEndian.AppendUint64(dst, x.NewToRepo)
		dst = binary.BigEndian.AppendUint64(dst, x.NewToStore)
		dst = binary.AppendUvarint(dst, uint64(len(x.Refs)))
		for i := range x.Refs {
			dst = appendString(dst, x.Refs[i].Ref.String())
			dst = appendBytes(dst, x.Refs[i].OldOID)
			dst = appendBytes(dst, x.Refs[i].NewOID)
		}
	case *refdomain.ReservationAborted:
		dst = append(dst, 3)
		dst = appendString(dst, x.Repository.String())
		dst = binary.BigEndian.AppendUint64(dst, x.OccurredAtMs)
		dst = append(dst, uint8(x.Reason))
		dst = appendString(dst, x.Detail)
	}
	return dst
}

// DecodeReservationV1 decodes b; byte slices of the result alias b.
func DecodeReservationV1(b []byte) (refdomain.ReservationV1, error) {
	var v refdomain.ReservationV1
	err := DecodeReservationV1Into(b, &v)
	return v, err
}

// DecodeReservationV1Into decodes b into *v, reusing the variant *v holds
// when b encodes the same one.
func DecodeReservationV1Into(b []byte, v *refdomain.ReservationV1) error {
	d := decoder{b: b}
	if d.u8() != refdomain.VersionReservationV1 {
		*v = nil
		return ErrCorrupt
	}
	switch d.u8() {
	case 1:
		x, _ := (*v).(*refdomain.ReservationTicketed)
		if x == nil {
			x = new(refdomain.ReservationTicketed)
		}
		copy(x.TicketID[:], d.fixed(len(x.TicketID)))
		*v = x
	case 2:
		x, _ := (*v).(*refdomain.ReservationCommitted)
		if x == nil {
			x = new(refdomain.ReservationCommitted)
		}
		x.Repository = repo(&d, d.string())
		x.OccurredAtMs = d.u64()
		x.BytesStored = d.u64()
		x.NewToRepo = d.u64()
		x.NewToStore = d.u64()
		n := d.count(3)
		x.Refs = slices.Grow(x.Refs[:0], n)[:n]
		for i := range x.Refs {
			x.Refs[i].Ref = ref(&d, d.string())
			x.Refs[i].OldOID = d.bytes()
			x.Refs[i].NewOID = d.bytes()
		}
		*v = x
	case 3:
		x, _ := (*v).(*refdomain.ReservationAborted)
		if x == nil {
			x = new(refdomain.ReservationAborted)
		}
		x.Repository = repo(&d, d.string())
		x.OccurredAtMs = d.u64()
		x.Reason = refdomain.AbortReason(d.u8())
		x.Detail = string(d.bytes())
		*v = x
	default:
		d.bad = true
	}
	if d.bad {
		*v = nil
		return ErrCorrupt
	}
	return nil
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decoder consumes b from the front; after the first failure bad is set,
// b is empty and every read returns a zero value.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) fail() {
	d.bad = true
	d.b = nil
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.fail()
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if len(d.b) > 0 && d.b[0] < 0x80 {
		v := d.b[0]
		d.b = d.b[1:]
		return uint64(v)
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of elements of at least minElem bytes each; it
// fails when the bytes left cannot hold them, so a corrupt count never
// drives a large allocation.
func (d *decoder) count(minElem int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minElem) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) fixed(n int) []byte {
	if len(d.b) < n {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	return d.fixed(int(n))
}

func (d *decoder) string() string { return string(d.bytes()) }

// repo and ref build identity names: gen builds them only from valid
// names, so any code outside gen goes through its constructors.
func repo(d *decoder, s string) refdomain.RepoName { return identity(d, s, refdomain.NewRepoName) }
func ref(d *decoder, s string) refdomain.ShardRef  { return identity(d, s, refdomain.NewShardRef) }

func identity[T any](d *decoder, s string, build func(string) (T, error)) T {
	v, err := build(s)
	if err != nil && !d.bad {
		d.fail()
	}
	return v
}
