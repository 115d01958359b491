package fdbsim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/btree"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
)

// BenchmarkMVCCSnapshot measures the choice behind MVCCEngine's storage:
// a copy-on-write B-tree cloned per version (google/btree's Clone, at
// degrees 16 and 64: a commit beside an open snapshot copies the nodes on
// its keys' paths) against the versioned store the engine uses (mvccRows:
// one B-tree of every key's readable versions, read under a read lock,
// old versions dropped as transactions end). Both run one transaction shape per op: take a
// snapshot, read 2 random keys and a 64-row range, write 4 random keys and
// commit, with 1 and 4 goroutines per CPU, over 10,000 and 100,000 keys.
// The resolver is the same for both and left out.
//
//	go test -run '^$' -bench MVCCSnapshot -benchmem -count 6 ./fdbsim/ | tee s.txt
//	benchstat -col /store s.txt
func BenchmarkMVCCSnapshot(b *testing.B) {
	stores := []struct {
		name string
		open func() snapshotStore
	}{
		{"cow16", func() snapshotStore { return newCOWStore(16) }},
		{"cow64", func() snapshotStore { return newCOWStore(64) }},
		{"versioned", func() snapshotStore { return newVersionedStore() }},
	}
	for _, keys := range []int{10_000, 100_000} {
		for _, par := range []int{1, 4} {
			for _, st := range stores {
				b.Run(fmt.Sprintf("keys=%d/par=%d/store=%s", keys, par, st.name), func(b *testing.B) {
					s := st.open()
					value := bytes.Repeat([]byte{'v'}, 64)
					var ws []memkv.Write
					for i := range keys {
						ws = append(ws, memkv.Write{Item: memkv.NewItem(snapshotKey(i), value)})
						if len(ws) == 1000 {
							s.commit(ws)
							ws = nil
						}
					}
					s.commit(ws)
					var seed uint64
					var seedMu sync.Mutex
					b.SetParallelism(par)
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						seedMu.Lock()
						seed++
						rng := rand.New(rand.NewPCG(seed, 1))
						seedMu.Unlock()
						var dst [][]byte
						var rows []kv.KeyValue
						for pb.Next() {
							snap := s.snapshot()
							dst = snap.getMany(dst[:0], [][]byte{snapshotKey(rng.IntN(keys)), snapshotKey(rng.IntN(keys))})
							start := rng.IntN(keys)
							rows = snap.getRange(rows[:0], snapshotKey(start), snapshotKey(keys), 64)
							snap.done()
							w := make([]memkv.Write, 4)
							for i := range w {
								w[i] = memkv.Write{Item: memkv.NewItem(snapshotKey(rng.IntN(keys)), value)}
							}
							s.commit(w)
						}
					})
				})
			}
		}
	}
}

func snapshotKey(i int) []byte { return fmt.Appendf(nil, "\x02mkit\x00\x02part\x00key/%08d", i) }

// snapshotStore is the storage half of an MVCC engine.
type snapshotStore interface {
	snapshot() snapshotReader
	commit(ws []memkv.Write)
}

type snapshotReader interface {
	getMany(dst [][]byte, keys [][]byte) [][]byte
	getRange(dst []kv.KeyValue, begin, end []byte, limit int) []kv.KeyValue
	done()
}

// cowStore is MVCCEngine's storage: a clone per version.
type cowStore struct {
	mu   sync.Mutex
	tree *btree.BTreeG[memkv.Item]
	snap *btree.BTreeG[memkv.Item]
}

func newCOWStore(degree int) *cowStore { return &cowStore{tree: btree.NewG(degree, memkv.Less)} }

type cowSnap struct{ t *btree.BTreeG[memkv.Item] }

func (s *cowStore) snapshot() snapshotReader {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		s.snap = s.tree.Clone()
	}
	return cowSnap{s.snap}
}

func (s *cowStore) commit(ws []memkv.Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	memkv.Apply(s.tree, ws)
	s.snap = nil
}

func (c cowSnap) getMany(dst [][]byte, keys [][]byte) [][]byte { return memkv.GetMany(c.t, dst, keys) }
func (c cowSnap) getRange(dst []kv.KeyValue, begin, end []byte, limit int) []kv.KeyValue {
	c.t.AscendRange(memkv.KeyItem(begin), memkv.KeyItem(end), func(it memkv.Item) bool {
		dst = append(dst, kv.KeyValue{Key: it.Key(), Value: it.Value()})
		return len(dst) < limit
	})
	return dst
}
func (cowSnap) done() {}

// versionedStore is MVCCEngine's storage (mvccStore), without the
// conflict check.
type versionedStore struct {
	mu sync.RWMutex
	s  mvccStore
}

func newVersionedStore() *versionedStore { return &versionedStore{s: newMVCCStore()} }

type versionedSnap struct {
	s  *versionedStore
	rv uint64
}

func (s *versionedStore) snapshot() snapshotReader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return versionedSnap{s, s.s.begin()}
}

func (v versionedSnap) done() {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	v.s.s.end(v.rv)
}

func (v versionedSnap) getMany(dst [][]byte, keys [][]byte) [][]byte {
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	return v.s.s.rows.getMany(dst, keys, v.rv)
}

func (v versionedSnap) getRange(dst []kv.KeyValue, begin, end []byte, limit int) []kv.KeyValue {
	v.s.mu.RLock()
	defer v.s.mu.RUnlock()
	dst, _ = v.s.s.rows.getRange(dst, begin, end, limit, 0, v.rv)
	return dst
}

// commit commits as the engine does: the committing transaction is open
// until its writes are applied.
func (s *versionedStore) commit(ws []memkv.Write) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := s.s.begin()
	s.s.apply(ws, rv)
	s.s.end(rv)
}
