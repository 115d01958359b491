package fdbsim

import (
	"bytes"
	"math"

	"github.com/google/btree"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
)

// mvccRows is MVCCEngine's storage: every version of every key that an
// open transaction may still read, in one B-tree ordered by key and then
// newest version first, so that a read at version rv finds a key's value
// as its first version at or below rv. A key's newest version sorts first
// whatever its number (old is false), so that a write replaces it in
// place and keeps it, as an old version, only when an open transaction
// may read it; a clear writes a tombstone. collect drops what no open
// transaction can read. Unlike a copy-on-write B-tree cloned per version,
// a commit beside an open snapshot copies no nodes (bench/README.md
// compares the two). Not safe for concurrent use: the engine's lock guards
// it (reads under a read lock).
type mvccRows struct {
	tree *btree.BTreeG[versionedItem]
}

// versionedItem is one version of one key: its row (the value empty for
// a tombstone), the version that wrote it, and whether a later version
// replaced it.
type versionedItem struct {
	item    memkv.Item
	version uint64
	del     bool
	old     bool
}

// lessVersioned orders by key, then the newest version, then the old
// ones, latest first. A key's newest versions compare equal whatever
// their numbers, so that writing one replaces the other.
func lessVersioned(a, b versionedItem) bool {
	if c := memkv.Compare(a.item, b.item); c != 0 {
		return c < 0
	}
	if a.old != b.old {
		return !a.old
	}
	return a.old && a.version > b.version
}

// firstVersion is the search item that sorts before every version of key.
func firstVersion(key memkv.Item) versionedItem {
	return versionedItem{item: key, version: math.MaxUint64}
}

// mvccDegree is the B-tree's degree, as the memory engine's.
const mvccDegree = memkv.Degree

func newMVCCRows() mvccRows { return mvccRows{tree: btree.NewG(mvccDegree, lessVersioned)} }

// get returns key's value at version rv; ok is false when it is absent.
func (r *mvccRows) get(key []byte, rv uint64) (value []byte, ok bool) {
	r.tree.AscendGreaterOrEqual(firstVersion(memkv.KeyItem(key)), func(it versionedItem) bool {
		if !bytes.Equal(it.item.Key(), key) {
			return false
		}
		if it.version > rv {
			return true
		}
		if !it.del {
			value, ok = it.item.Value(), true
		}
		return false
	})
	return value, ok
}

// getMany appends the value at rv of each key, nil when absent.
func (r *mvccRows) getMany(dst [][]byte, keys [][]byte, rv uint64) [][]byte {
	for _, k := range keys {
		v, _ := r.get(k, rv)
		dst = append(dst, v)
	}
	return dst
}

// ascend calls fn with each key's row at version rv in [begin, end), in
// key order, until fn returns false.
func (r *mvccRows) ascend(begin, end []byte, rv uint64, fn func(memkv.Item) bool) {
	stop := memkv.KeyItem(end)
	var last []byte // the key whose version at rv was decided
	r.tree.AscendGreaterOrEqual(firstVersion(memkv.KeyItem(begin)), func(it versionedItem) bool {
		if memkv.Compare(it.item, stop) >= 0 {
			return false
		}
		k := it.item.Key()
		if it.version > rv || (last != nil && bytes.Equal(k, last)) {
			return true
		}
		last = k
		return it.del || fn(it.item)
	})
}

// getRange appends the rows at rv in [begin, end), as far as rangeStop
// lets it; stopped reports that it stopped there, before the range's end.
func (r *mvccRows) getRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int, rv uint64) (_ []kv.KeyValue, stopped bool) {
	n, size := 0, 0
	r.ascend(begin, end, rv, func(it memkv.Item) bool {
		dst = append(dst, kv.KeyValue{Key: it.Key(), Value: it.Value()})
		n, size = n+1, size+it.Size()
		stopped = memkv.RangeStop(n, size, limit, maxBytes)
		return !stopped
	})
	return dst, stopped
}

// rangeBytes counts the bytes of the keys and values at rv in [begin, end).
func (r *mvccRows) rangeBytes(begin, end []byte, rv uint64) int64 {
	var n int64
	r.ascend(begin, end, rv, func(it memkv.Item) bool {
		n += int64(it.Size())
		return true
	})
	return n
}

// write applies the writes of the commit of version, in order (a key
// written twice keeps the last). A key's newest version is replaced in
// place, and kept as an old version when read(its version) says an open
// transaction may read it. It appends to dirty, and returns, the keys
// that may now hold versions or a tombstone no one reads, for collect.
func (r *mvccRows) write(ws []memkv.Write, version uint64, read func(version uint64) bool, dirty []memkv.Item) []memkv.Item {
	for _, w := range ws {
		prev, had := r.tree.ReplaceOrInsert(versionedItem{item: w.Item, version: version, del: w.Del})
		kept := had && prev.version != version && read(prev.version)
		if kept {
			prev.old = true
			r.tree.ReplaceOrInsert(prev)
		}
		if kept || w.Del {
			dirty = append(dirty, w.Item)
		}
	}
	return dirty
}

// collect drops the versions of key no transaction reading at oldest or
// later can read: all but those after oldest and the newest at or below
// it, and that one too when it is a tombstone.
func (r *mvccRows) collect(key memkv.Item, oldest uint64, drop []versionedItem) []versionedItem {
	drop = drop[:0]
	found := false // the newest version at or below oldest
	r.tree.AscendGreaterOrEqual(firstVersion(key), func(it versionedItem) bool {
		if memkv.Compare(it.item, key) != 0 {
			return false
		}
		if it.version > oldest {
			return true
		}
		if found || it.del {
			drop = append(drop, it)
		}
		found = true
		return true
	})
	for _, it := range drop {
		r.tree.Delete(it)
	}
	return drop
}
