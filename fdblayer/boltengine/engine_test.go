package boltengine_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	. "github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/store"
)

// TestReopen: what a Layer committed on a bbolt file is there after
// closing and reopening it, synced or not.
func TestReopen(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "store.bbolt")
		p := testPartition("p")
		e, err := Open(path, Config{NoSync: noSync})
		require.NoError(t, err)
		l, err := fdblayer.Open(e, fdblayer.Config{})
		require.NoError(t, err)
		mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")).Put(k("b"), v("")).Put(k("c"), v("3")))
		mustApply(t, l, p, store.NewBatch().Require(store.Equals(k("c"), v("3"))).Delete(k("c")))
		require.NoError(t, l.Close())

		e, err = Open(path, Config{NoSync: noSync})
		require.NoError(t, err)
		l = openLayer(t, e)
		rows := scanAll(t, l, p, 10)
		require.Equal(t, []store.KeyValue{{Key: k("a"), Value: v("1")}, {Key: k("b"), Value: v("")}}, rows, "noSync %v", noSync)
		require.NotNil(t, rows[1].Value)
	}
}

// TestCommitFailureIsUnknownResult: a commit whose write fails leaves
// the file's state unknown, so Apply reports ErrUnknownResult.
func TestCommitFailureIsUnknownResult(t *testing.T) {
	var file *os.File
	e, err := Open(filepath.Join(t.TempDir(), "store.bbolt"), WithOpenFile(Config{},
		func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		}))
	require.NoError(t, err)
	l, err := fdblayer.Open(e, fdblayer.Config{})
	require.NoError(t, err)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))

	require.NoError(t, file.Close()) // every later write fails
	_, err = l.Apply(t.Context(), p, store.NewBatch().Require(store.Equals(k("a"), v("1"))).Put(k("b"), v("2")))
	require.ErrorIs(t, err, store.ErrUnknownResult)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	_ = l.Close() // the broken file cannot close cleanly
}

// TestFillPercent: keys put in order fill the pages bbolt splits to
// Config.FillPercent, so FillPercent 1 packs such a file about twice
// as densely as bbolt's default; a FillPercent out of [0, 1] is refused
// before anything is created.
func TestFillPercent(t *testing.T) {
	leafFill := func(fill float64) float64 {
		path := filepath.Join(t.TempDir(), "fill.bbolt")
		e, err := Open(path, Config{NoSync: true, FillPercent: fill})
		require.NoError(t, err)
		l, err := fdblayer.Open(e, fdblayer.Config{})
		require.NoError(t, err)
		defer l.Close()
		value := make([]byte, 256)
		for i := range 40 {
			b := store.NewBatch()
			for j := range 50 {
				b.Put(store.Key(fmt.Sprintf("row/%08d", i*50+j)), value)
			}
			_, err := l.Apply(t.Context(), testPartition("p"), b)
			require.NoError(t, err)
		}
		var s bolt.BucketStats
		require.NoError(t, e.DB().View(func(tx *bolt.Tx) error {
			s = tx.Bucket(Bucket).Stats()
			return nil
		}))
		return float64(s.LeafInuse) / float64(s.LeafAlloc)
	}
	def, full := leafFill(0), leafFill(1)
	t.Logf("leaf pages in use: %.0f%% with bbolt's default, %.0f%% with FillPercent 1", 100*def, 100*full)
	require.Less(t, def, 0.6, "bbolt's default splits pages half full")
	require.Greater(t, full, 0.85, "FillPercent 1 fills the pages it splits")

	for _, bad := range []float64{-0.5, 1.5, math.NaN(), math.Inf(1)} {
		path := filepath.Join(t.TempDir(), "bad.bbolt")
		_, err := Open(path, Config{FillPercent: bad})
		require.ErrorIs(t, err, store.ErrInvalid, "FillPercent %v", bad)
		require.ErrorContains(t, err, "FillPercent")
		_, statErr := os.Stat(path)
		require.ErrorIs(t, statErr, os.ErrNotExist, "FillPercent %v created the file", bad)
	}
}
