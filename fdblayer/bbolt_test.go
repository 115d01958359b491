package fdblayer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/store"
)

// TestBoltReopen: what a Layer committed on a bbolt file is there after
// closing and reopening it, synced or not.
func TestBoltReopen(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "store.bbolt")
		p := testPartition("p")
		e, err := OpenBoltEngine(path, BoltOptions{NoSync: noSync})
		require.NoError(t, err)
		l, err := Open(e)
		require.NoError(t, err)
		mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")).Put(k("b"), v("")).Put(k("c"), v("3")))
		mustApply(t, l, p, store.NewBatch().Require(store.Equals(k("c"), v("3"))).Delete(k("c")))
		require.NoError(t, l.Close())

		e, err = OpenBoltEngine(path, BoltOptions{NoSync: noSync})
		require.NoError(t, err)
		l = openLayer(t, e)
		rows := scanAllRows(t, l, p, nil, nil, 10)
		require.Equal(t, []store.KeyValue{{Key: k("a"), Value: v("1")}, {Key: k("b"), Value: v("")}}, rows, "noSync %v", noSync)
		require.NotNil(t, rows[1].Value)
	}
}

// TestBoltCommitFailureIsUnknownResult: a commit whose write fails leaves
// the file's state unknown, so Apply reports ErrUnknownResult.
func TestBoltCommitFailureIsUnknownResult(t *testing.T) {
	var file *os.File
	e, err := OpenBoltEngine(filepath.Join(t.TempDir(), "store.bbolt"), BoltOptions{
		openFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
	require.NoError(t, err)
	l, err := Open(e)
	require.NoError(t, err)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))

	require.NoError(t, file.Close()) // every later write fails
	_, err = l.Apply(t.Context(), p, store.NewBatch().Require(store.Equals(k("a"), v("1"))).Put(k("b"), v("2")))
	require.ErrorIs(t, err, store.ErrUnknownResult)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	_ = l.Close() // the broken file cannot close cleanly
}
