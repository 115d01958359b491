package boltengine_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	. "github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/store"
)

// BenchmarkFillPercent puts 50 keys of 256-byte values a batch into a
// bbolt file, keys in order (append) or in random order (random), with
// bbolt's default FillPercent or 1, and reports how full the leaf pages
// are (leaf-fill-%) and the file's pages in use per key (bytes/key). The
// space figures depend on how many keys were put: run it with a fixed
// -benchtime, such as 800x (40,000 keys).
func BenchmarkFillPercent(b *testing.B) {
	for _, order := range []string{"append", "random"} {
		for _, fill := range []float64{0, 1} {
			name := order + "/default"
			if fill != 0 {
				name = order + "/1"
			}
			b.Run(name, func(b *testing.B) {
				e, err := Open(filepath.Join(b.TempDir(), "fill.bbolt"), Config{NoSync: true, FillPercent: fill})
				if err != nil {
					b.Fatal(err)
				}
				l := openLayer(b, e)
				ctx := context.Background()
				r := rand.New(rand.NewPCG(1, 2))
				value := make([]byte, 256)
				var next uint64
				b.ResetTimer()
				for range b.N {
					batch := store.NewBatch()
					for range 50 {
						n := r.Uint64()
						if order == "append" {
							next++
							n = next
						}
						batch.Put(binary.BigEndian.AppendUint64([]byte("k"), n), value)
					}
					if _, err := l.Apply(ctx, testPartition("bench"), batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				err = e.DB().View(func(tx *bolt.Tx) error {
					s := tx.Bucket(Bucket).Stats()
					b.ReportMetric(100*float64(s.LeafInuse)/float64(s.LeafAlloc), "leaf-fill-%")
					b.ReportMetric(float64(tx.Size())/float64(s.KeyN), "bytes/key")
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
