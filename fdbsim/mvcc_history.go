package fdbsim

import (
	"bytes"

	"github.com/google/btree"

	"github.com/mkit-dev/mkitfdb/internal/memkv"
)

// mvccHistory is MVCCEngine's resolver: for each key written by a commit
// that some open transaction may still conflict with, the version of the
// last commit that wrote it. A transaction with read version rv conflicts
// when one of its read conflict ranges holds a key whose version is above
// rv: exactly FoundationDB's resolver check, whose memory is likewise
// bounded by the oldest read version it must still judge. It also tells
// the storage which keys' old versions became unreadable (prune). Not
// safe for concurrent use: the engine's mutex guards it.
type mvccHistory struct {
	last    *btree.BTreeG[versionedKey] // key -> version of its last write
	commits []committedKeys             // in version order, for pruning
	open    map[uint64]int              // read versions of open transactions
}

// versionedKey is one key of the history and the version that last wrote it.
type versionedKey struct {
	key     []byte
	version uint64
}

// committedKeys are the keys one commit wrote that an open transaction
// may conflict with (keys), and those whose old versions or tombstone the
// storage must collect once no transaction reads them (dirty).
type committedKeys struct {
	version     uint64
	keys, dirty []memkv.Item
}

// keyRange is a conflict range [begin, end); point marks [k, k+0x00),
// which holds exactly k.
type keyRange struct {
	begin, end []byte
	point      bool
}

// historyDegree: the history holds only recent writes, a few thousand keys
// at most under load.
const historyDegree = 16

func newMVCCHistory() mvccHistory {
	return mvccHistory{
		last: btree.NewG(historyDegree, func(a, b versionedKey) bool { return bytes.Compare(a.key, b.key) < 0 }),
		open: map[uint64]int{},
	}
}

// conflicts reports whether any of reads holds a key written by a commit
// after version rv.
func (h *mvccHistory) conflicts(reads []keyRange, rv uint64) bool {
	if h.last.Len() == 0 {
		return false
	}
	for _, r := range reads {
		if r.point {
			if it, ok := h.last.Get(versionedKey{key: r.begin}); ok && it.version > rv {
				return true
			}
			continue
		}
		hit := false
		h.last.AscendRange(versionedKey{key: r.begin}, versionedKey{key: r.end}, func(it versionedKey) bool {
			hit = it.version > rv
			return !hit
		})
		if hit {
			return true
		}
	}
	return false
}

// record notes that the commit of version wrote keys, which open
// transactions may conflict with, and dirty keys to collect later. The
// history keeps both (they must stay unchanged).
func (h *mvccHistory) record(version uint64, keys, dirty []memkv.Item) {
	for _, k := range keys {
		h.last.ReplaceOrInsert(versionedKey{key: k.Key(), version: version})
	}
	if len(keys) > 0 || len(dirty) > 0 {
		h.commits = append(h.commits, committedKeys{version: version, keys: keys, dirty: dirty})
	}
}

// latestOther returns the latest read version of the open transactions
// other than one reading at rv; ok is false when there is none.
func (h *mvccHistory) latestOther(rv uint64) (latest uint64, ok bool) {
	for v, n := range h.open {
		if v == rv && n == 1 {
			continue
		}
		latest, ok = max(latest, v), true
	}
	return latest, ok
}

// begin registers an open transaction reading at rv.
func (h *mvccHistory) begin(rv uint64) { h.open[rv]++ }

// end unregisters a transaction begun at rv.
func (h *mvccHistory) end(rv uint64) {
	if h.open[rv]--; h.open[rv] == 0 {
		delete(h.open, rv)
	}
}

// prune forgets the commits at or below the oldest open read version (all
// of them, up to current, the last commit's version, when none is open):
// no transaction can conflict with them. It calls collect with each key
// they wrote and that oldest version, so that the storage drops the
// versions no transaction can read any more.
func (h *mvccHistory) prune(current uint64, collect func(key memkv.Item, oldest uint64)) {
	oldest := current
	for rv := range h.open {
		oldest = min(oldest, rv)
	}
	n := 0
	for ; n < len(h.commits) && h.commits[n].version <= oldest; n++ {
		c := h.commits[n]
		for _, k := range c.keys {
			if it, ok := h.last.Get(versionedKey{key: k.Key()}); ok && it.version == c.version {
				h.last.Delete(it)
			}
		}
		for _, k := range c.dirty {
			collect(k, oldest)
		}
	}
	if n > 0 {
		clear(h.commits[:n])
		h.commits = h.commits[n:]
	}
}
