package relay

import (
	"bytes"

	"github.com/mkit-dev/mkitfdb/gen"
)

// Design note: the rows a fire reads for one target repeat that target's
// encoded partition. gen.DecodeRelayV1Into keeps the Target a record
// already holds when the bytes encode it again, decoding (and allocating)
// nothing for it. A rowDecoder remembers the encoded partitions of the
// targets it has seen in the window, so that it can hand the decoder the
// right one for each row, and the row's group with it. Which target to
// offer is only a hint: the decoder compares the bytes itself, so a
// wrong guess costs a full decode, never a wrong row. The key of a
// target is its encoding as the codec writes it after the version byte
// (gen.AppendRelayV1 of a record holding only that target tells where it
// ends).

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
	k, ok := d.lookup(value)
	if ok {
		rec.Target = k.target
	}
	if err := gen.DecodeRelayV1Into(value, rec); err != nil {
		return -1, err
	}
	if !ok || rec.Target != k.target {
		return -1, nil
	}
	return k.id, nil
}

// lookup finds the remembered target whose encoding follows value's
// version byte.
func (d *rowDecoder) lookup(value []byte) (knownTarget, bool) {
	if len(value) == 0 || value[0] != gen.VersionRelayV1 {
		return knownTarget{}, false
	}
	body := value[1:]
	for _, n := range d.lens {
		if n <= len(body) {
			// A string conversion in a map index does not allocate.
			if k, ok := d.known[string(body[:n])]; ok {
				return k, true
			}
		}
	}
	return knownTarget{}, false
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
