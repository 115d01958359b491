package wire

import (
	"hash/maphash"
	"sync/atomic"
)

// internSlots is the number of entries of an Intern table: a power of two.
const internSlots = 256

var internSeed = maphash.MakeSeed()

// internSlot is the slot of hash h.
func internSlot(h uint64) uint64 { return h & (internSlots - 1) }

// Intern is a bounded table of decoded, verified values keyed by their
// exact encoding, so that decoding bytes seen before costs a hash and a
// comparison instead of allocations and validation: rows naming the same
// partitions or repositories decode them once. Generated decoders keep one
// table per identity type and per union of scalars and names.
//
// It is direct-mapped: each encoding hashes to one of 256 slots, and a new
// entry replaces the slot's old one, so it holds at most 256 values and
// never grows. A decoder adds an encoding it missed only when [Intern.Admit]
// says so: when that encoding was also the last one its slot missed. An
// encoding that repeats is held from its second miss in a row, while a
// stream of encodings never seen before costs a hash, a lookup and a store
// each, and evicts no entry. Entries are immutable and published
// atomically: every method is safe for concurrent use. The zero value is
// an empty table.
//
// Only values that are fully determined by their encoding and were
// verified when first decoded may be added: a hit returns the earlier
// value without decoding or verifying the bytes again.
type Intern[T any] struct {
	// hashes[i] is the hash of slots[i]'s encoding, stored beside the
	// others so that most misses read no entry. The two are stored
	// separately: a hash that does not match its entry costs a miss or a
	// comparison, never a wrong value, since a hit compares the bytes.
	hashes [internSlots]atomic.Uint64
	slots  [internSlots]atomic.Pointer[Interned[T]]
	// missed[i] is the hash of the last encoding slot i missed (Admit).
	missed [internSlots]atomic.Uint64
}

// Interned is one entry of an Intern table: an encoding and its value.
type Interned[T any] struct {
	Key   string // the encoding
	Value T
}

// Find returns the entry whose encoding is exactly b, or nil, and the hash
// of b for Add. It does not allocate.
func (t *Intern[T]) Find(b []byte) (*Interned[T], uint64) {
	h := maphash.Bytes(internSeed, b)
	i := internSlot(h)
	if t.hashes[i].Load() != h {
		return nil, h
	}
	if e := t.slots[i].Load(); e != nil && e.Key == string(b) {
		return e, h
	}
	return nil, h
}

// Admit reports whether an encoding of hash h (from Find) that Find just
// missed should be added: whether it was also the last encoding its slot
// missed. Otherwise it records h as that last miss.
func (t *Intern[T]) Admit(h uint64) bool {
	m := &t.missed[internSlot(h)]
	if m.Load() == h {
		return true
	}
	m.Store(h)
	return false
}

// Add records v as the value that the encoding key, of hash h (from
// Find), decodes to, replacing whatever entry held its slot.
func (t *Intern[T]) Add(h uint64, key string, v T) {
	i := internSlot(h)
	t.slots[i].Store(&Interned[T]{Key: key, Value: v})
	t.hashes[i].Store(h)
}

// Rest returns the bytes not yet consumed, or nil after a failure. They
// alias the input.
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	return r.buf[r.off:len(r.buf):len(r.buf)]
}

// The Span functions measure an encoding in b without decoding it, for a
// lookup in an Intern table: each returns the offset after one more field
// that starts at at, or -1 when b ends first or at is -1 (so calls chain).
// They check nothing else: a span that is not the encoding of a valid
// value is found in no table, and its bytes are then decoded strictly.

// SpanString measures a length-prefixed string or byte string of fewer
// than 16384 bytes (longer ones give -1).
func SpanString(b []byte, at int) int {
	if at < 0 || at >= len(b) {
		return -1
	}
	n := int(b[at])
	at++
	if n >= 0x80 {
		if at >= len(b) || b[at] >= 0x80 {
			return -1
		}
		n = n&0x7f | int(b[at])<<7
		at++
	}
	if n > len(b)-at {
		return -1
	}
	return at + n
}

// SpanFixed measures a field of n bytes.
func SpanFixed(b []byte, at, n int) int {
	if at < 0 || n > len(b)-at {
		return -1
	}
	return at + n
}

// Skip consumes n bytes, failing (as a truncation of field) when fewer are
// left.
func (r *Reader) Skip(field string, n int) { r.take(field, n) }

// Next consumes the next n bytes and returns them, aliasing the input; it
// fails (as a truncation of field) and returns nil when fewer are left.
// Decoders read a run of fixed-size fields from it with one length check.
func (r *Reader) Next(field string, n int) []byte { return r.take(field, n) }

// Since returns the bytes consumed from offset start on. They alias the
// input.
func (r *Reader) Since(start int) []byte { return r.buf[start:r.off:r.off] }

// Name reads a length-prefixed identity name of type typ (min to max
// bytes of valid UTF-8 without control characters, as CheckIdentity
// checks). A name found in names, a table of names already validated, is
// returned without allocating or validating it again; any other is
// validated, and added to names when Admit says so. An invalid name fails
// the reader.
func (r *Reader) Name(field string, names *Intern[struct{}], typ string, min, max int) string {
	start, n := r.shortLen(max)
	if start < 0 {
		// a long name, or a failure: read and validate, no interning
		s := r.String(field, max)
		if r.err == nil {
			r.FailErr(field, CheckIdentity(typ, s, min, max))
		}
		if r.err != nil {
			return ""
		}
		return s
	}
	r.off = start + n
	s, err := InternName(r.buf[start:start+n], names, typ, min, max)
	if err != nil {
		r.FailErr(field, err)
	}
	return s
}

// NameAt reads a length-prefixed identity name at b[at] (at >= 0) as
// Reader.Name does, interning it alike, and returns it and the offset
// after it; next is -1 where Reader.Name fails. It is the fast path's
// Reader.Name, and as safe for concurrent use as names is.
func NameAt(b []byte, at int, names *Intern[struct{}], typ string, min, max int) (s string, next int) {
	if n, q := ShortLen(b, at, max); q >= 0 && n <= len(b)-q {
		s, err := InternName(b[q:q+n], names, typ, min, max)
		if err != nil {
			return "", -1
		}
		return s, q + n
	}
	// a long name, or a failure: read and validate, no interning
	n, q := LenAt(b, at, max)
	if q < 0 || n > len(b)-q {
		return "", -1
	}
	if s = string(b[q : q+n]); CheckIdentity(typ, s, min, max) != nil {
		return "", -1
	}
	return s, q + n
}

// InternName returns the name whose bytes are b: from names when found
// there (no allocation), else validated as CheckIdentity does (failing
// with its error) and added to names when Admit says so. Generated record
// decoders and key parsers read identity names through it.
func InternName(b []byte, names *Intern[struct{}], typ string, min, max int) (string, error) {
	e, h := names.Find(b)
	if e != nil {
		return e.Key, nil
	}
	s := string(b)
	if err := CheckIdentity(typ, s, min, max); err != nil {
		return "", err
	}
	if names.Admit(h) {
		names.Add(h, s, struct{}{})
	}
	return s, nil
}
