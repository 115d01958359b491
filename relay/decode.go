package relay

import (
	"bytes"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/gen/wire"
)

// Design note: the rows a fire reads for one target repeat that target's
// encoded partition, and decoding it allocates every time (the union's
// variant box and each identity string), the relay's largest allocation
// per row after the store's own. A rowDecoder remembers the encoded
// partitions of the targets it has seen in the window; a row whose bytes
// after the version byte start with one of them gets that target's
// partition and has only its other fields decoded (decodeRest). The
// codec is strict and canonical, and a partition's encoding is
// self-delimiting, so equal bytes there decode to an equal, valid target.
// Any doubt (an unknown version, a rest that does not decode) falls back
// to the generated decoder, which also gives the error. This knows
// RelayV1's layout after Target (puts, deletes, at_ms), as the codec
// writes it; FuzzRowDecoderMatchesCodec holds it to gen.DecodeRelayV1Into.

// maxTargetLens bounds the distinct encoded-target lengths a rowDecoder
// looks up per row: targets named alike share a length, and a window of
// unlike names beyond this decodes the others in full.
const maxTargetLens = 4

// emptyRelayRest is the encoding of RelayV1's fields after Target when
// there are no puts, no deletes and at_ms is 0: what follows the target
// in the encoding of gen.RelayV1{Target: t}.
var emptyRelayRest = []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// rowDecoder decodes queued rows' values for one fire, reusing the
// decoded targets of earlier rows (see the design note). Its zero value
// is not ready: its map must be made.
type rowDecoder struct {
	known map[string]knownTarget // by encoded partition
	lens  []int                  // the distinct lengths of known's keys
	enc   []byte                 // scratch for encoding a target
}

// knownTarget is a target a rowDecoder has seen, and its caller's id.
type knownTarget struct {
	target gen.Partition
	id     int
}

// reset forgets every target, keeping the memory.
func (d *rowDecoder) reset() {
	clear(d.known)
	d.lens = d.lens[:0]
}

// decode decodes value into rec, as gen.DecodeRelayV1Into does, reusing
// the capacity of rec's slices. When value's target is one remembered, rec
// gets that partition and decode returns its id; otherwise it returns -1
// (the target was decoded anew).
func (d *rowDecoder) decode(value []byte, rec *gen.RelayV1) (id int, err error) {
	if len(value) > 0 && value[0] == gen.VersionRelayV1 {
		body := value[1:]
		for _, n := range d.lens {
			if n > len(body) {
				continue
			}
			// A string conversion in a map index does not allocate.
			k, ok := d.known[string(body[:n])]
			if ok && decodeRest(body[n:], rec) {
				rec.Target = k.target
				return k.id, nil
			}
		}
	}
	return -1, gen.DecodeRelayV1Into(value, rec)
}

// remember records that value decoded (by decode) to a record whose
// target is t, under the caller's id. A target whose encoding cannot be
// located in value is not remembered: its rows decode in full.
func (d *rowDecoder) remember(value []byte, t gen.Partition, id int) {
	enc, err := gen.AppendRelayV1(d.enc[:0], gen.RelayV1{Target: t})
	if err != nil {
		return
	}
	d.enc = enc
	// enc is the version byte, t's encoding and the empty rest.
	n := len(enc) - 1 - len(emptyRelayRest)
	if n <= 0 || !bytes.HasSuffix(enc, emptyRelayRest) || len(value) < 1+n || !bytes.Equal(value[:1+n], enc[:1+n]) {
		return
	}
	key := string(value[1 : 1+n])
	if _, ok := d.known[key]; ok {
		return
	}
	has := false
	for _, l := range d.lens {
		has = has || l == n
	}
	if !has {
		if len(d.lens) == maxTargetLens {
			return
		}
		d.lens = append(d.lens, n)
	}
	d.known[key] = knownTarget{target: t, id: id}
}

// decodeRest decodes RelayV1's fields after Target from b, the encoding
// after the version byte and the target, into rec as the generated
// decoder does (same bounds, same reuse of rec's slices), and reports
// whether b decoded, exactly to its end. It leaves rec.Target alone.
func decodeRest(b []byte, rec *gen.RelayV1) bool {
	r := wire.NewReader(b, "RelayV1")
	n := r.Len("RelayV1.Puts", gen.MaxRelayV1Puts, 2)
	if cap(rec.Puts) >= n {
		rec.Puts = rec.Puts[:n]
	} else {
		rec.Puts = make([]gen.RelayPut, n)
	}
	for i := range rec.Puts {
		rec.Puts[i].Key = r.Bytes("RelayPut.Key", gen.MaxRelayPutKey)
		rec.Puts[i].Value = r.Bytes("RelayPut.Value", gen.MaxRelayPutValue)
	}
	n = r.Len("RelayV1.Deletes", gen.MaxRelayV1Deletes, 1)
	if cap(rec.Deletes) >= n {
		rec.Deletes = rec.Deletes[:n]
	} else {
		rec.Deletes = make([][]byte, n)
	}
	for i := range rec.Deletes {
		rec.Deletes[i] = r.Bytes("RelayV1.Deletes", gen.MaxRelayV1DeletesElem)
	}
	rec.AtMs = r.U64("RelayV1.AtMs")
	return r.Finish() == nil
}
