// Package memkv holds the rows that fdblayer's memory engine and
// fdbsim's MVCC engine keep in B-trees: items that carry a copy of their
// key's first bytes, their order, a transaction's pending writes, and the
// stopping rule of every engine's range reads.
package memkv

import (
	"bytes"
	"cmp"
	"encoding/binary"

	"github.com/google/btree"
)

// Item is one row: its key and then its value in one allocation, kv,
// the first klen bytes being the key, and a copy of the key's first 32
// bytes. The tree holds items by value, 64 bytes each (a cache line):
// comparing one during a search touches the node, and the key's own bytes
// only when the copies tie (see Less), where an item behind a pointer
// costs two more cache lines. In a store much larger than the cache each
// of those is a miss, which is what made operations slower as the store
// grew. 32 bytes, not 16: a key starts with the root prefix (6 bytes by
// default) and the partition's identity, which starts with its schema's
// namespace ("\x02refdomain\x00", 11 bytes) and variant, so 16 bytes
// were the same for every partition of a schema, and every comparison
// read the keys (bench/README.md has the figures).
type Item struct {
	kv             []byte
	klen           int
	p0, p1, p2, p3 uint64 // the key's first 32 bytes, big-endian, zero-padded (see Less)
}

// KeyItem is the item to search for key k.
func KeyItem(k []byte) Item {
	it := Item{kv: k, klen: len(k)}
	it.p0, it.p1, it.p2, it.p3 = keyPrefix(k)
	return it
}

// keyPrefix is k's first 32 bytes as four big-endian numbers,
// zero-padded.
func keyPrefix(k []byte) (uint64, uint64, uint64, uint64) {
	var b [32]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16]), binary.BigEndian.Uint64(b[16:24]), binary.BigEndian.Uint64(b[24:])
}

// NewItem is the item holding key = value, in one new allocation.
func NewItem(key, value []byte) Item {
	kv := make([]byte, len(key)+len(value))
	copy(kv, key)
	copy(kv[len(key):], value)
	it := Item{kv: kv, klen: len(key)}
	it.p0, it.p1, it.p2, it.p3 = keyPrefix(key)
	return it
}

// Key is the item's key. It must not be modified.
func (it Item) Key() []byte { return it.kv[:it.klen:it.klen] }

// Value is the item's value. It must not be modified.
func (it Item) Value() []byte { return it.kv[it.klen:] }

// Size is the bytes of the item's key and value together.
func (it Item) Size() int { return len(it.kv) }

// Less orders items by key. Keys whose first 32 bytes differ are
// ordered by the copies the items hold, without reading the keys: every
// key starts with the root prefix and its partition's tuple, so a search
// through other partitions' rows touches only the nodes, which in a store
// larger than the cache spares a miss per comparison. Zero padding keeps
// the order: where a short key ends, the longer key's next byte is either
// above zero (it sorts after, as it should) or zero (the copies tie, and
// the keys decide).
func Less(a, b Item) bool {
	// Written out rather than Compare(a, b) < 0: every search of the
	// memory engine runs it, and the call measured slower (bench/README.md).
	if a.p0 != b.p0 {
		return a.p0 < b.p0
	}
	if a.p1 != b.p1 {
		return a.p1 < b.p1
	}
	if a.p2 != b.p2 {
		return a.p2 < b.p2
	}
	if a.p3 != b.p3 {
		return a.p3 < b.p3
	}
	return bytes.Compare(a.kv[:a.klen], b.kv[:b.klen]) < 0
}

// Compare compares the keys of a and b as Less orders them:
// -1, 0 or +1.
func Compare(a, b Item) int {
	if a.p0 != b.p0 {
		return cmp.Compare(a.p0, b.p0)
	}
	if a.p1 != b.p1 {
		return cmp.Compare(a.p1, b.p1)
	}
	if a.p2 != b.p2 {
		return cmp.Compare(a.p2, b.p2)
	}
	if a.p3 != b.p3 {
		return cmp.Compare(a.p3, b.p3)
	}
	return bytes.Compare(a.kv[:a.klen], b.kv[:b.klen])
}

// Degree is the B-tree's degree: nodes hold 63 to 127 items. Wider nodes
// than 32 make the tree a level shallower at 100,000 partitions, so a
// search into a part of the store the cache does not hold misses on one
// node fewer (bench/README.md compares the degrees).
const Degree = 64

// Write is one pending write of a transaction; Del marks a Clear.
type Write struct {
	Item Item
	Del  bool
}

// GetMany appends to dst the value in tr of each key, nil when absent.
func GetMany(tr *btree.BTreeG[Item], dst [][]byte, keys [][]byte) [][]byte {
	for _, k := range keys {
		it, ok := tr.Get(KeyItem(k))
		if !ok {
			dst = append(dst, nil)
			continue
		}
		dst = append(dst, it.Value())
	}
	return dst
}

// Apply applies ws to tr in order.
func Apply(tr *btree.BTreeG[Item], ws []Write) {
	for _, w := range ws {
		if w.Del {
			tr.Delete(w.Item)
		} else {
			tr.ReplaceOrInsert(w.Item)
		}
	}
}

// RangeStop is GetRange's stopping rule for every engine (see
// kv.ReadTxn): after n rows holding size bytes of keys and values, a
// read bounded by limit rows and maxBytes bytes (0: rows only) stops.
func RangeStop(n, size, limit, maxBytes int) bool {
	return n >= limit || maxBytes > 0 && size > maxBytes
}
