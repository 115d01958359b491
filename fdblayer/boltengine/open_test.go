package boltengine_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	. "github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testpath"
	"github.com/mkit-dev/mkitfdb/store"
)

// TestOpenErrors: each path Open cannot use fails with the
// sentinel that says what to fix and leaves the path as it was.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	foreign := filepath.Join(dir, "foreign.bbolt") // bbolt, but not ours
	db, err := bolt.Open(foreign, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty-dir"), 0o700))

	for _, tc := range []struct {
		name      string
		path      string
		mustExist bool
		want      []error
	}{
		{"junk", write("junk", make([]byte, 64<<10)), false, []error{store.ErrCorrupt}},
		{"text file", write("x.txt", []byte("hi\n")), false, []error{store.ErrCorrupt}},
		{"directory", filepath.Join(dir, "empty-dir"), false, []error{store.ErrInvalid}},
		{"missing directory", filepath.Join(dir, "no-such-dir", "x.db"), false, []error{store.ErrInvalid, fs.ErrNotExist}},
		{"parent is a file", filepath.Join(dir, "x.txt", "x.db"), false, []error{store.ErrInvalid}},
		{"must exist, missing", filepath.Join(dir, "absent.db"), true, []error{store.ErrInvalid, fs.ErrNotExist}},
		{"must exist, empty", write("empty", nil), true, []error{store.ErrInvalid}},
		{"must exist, foreign bbolt", foreign, true, []error{store.ErrInvalid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testpath.Snapshot(t, tc.path)
			_, err := Open(tc.path, Config{MustExist: tc.mustExist})
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorIs(t, err, w)
			}
			require.NotErrorIs(t, err, store.ErrUnavailable)
			require.Contains(t, err.Error(), tc.path)
			require.Equal(t, before, testpath.Snapshot(t, tc.path), "the path changed")
		})
	}
}

// TestOpenPermissionErrors: an open the system refuses for permission
// or a read-only file system is ErrInvalid, not "unavailable". The refusal
// is injected, so the test holds for root too (whom permission bits do not
// stop; TestOpenUnwritableDirectory checks a real directory).
func TestOpenPermissionErrors(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS} {
		t.Run(errno.Error(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			_, err := Open(path, WithOpenFile(Config{}, func(name string, _ int, _ os.FileMode) (*os.File, error) {
				return nil, &fs.PathError{Op: "open", Path: name, Err: errno}
			}))
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorIs(t, err, errno)
			require.NotErrorIs(t, err, store.ErrUnavailable)
		})
	}
}

// TestOpenUnwritableDirectory: a directory the process may not write
// is ErrInvalid with fs.ErrPermission, not "unavailable".
func TestOpenUnwritableDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.Mkdir(dir, 0o500))
	probe := filepath.Join(dir, "probe")
	if f, err := os.Create(probe); err == nil {
		f.Close()
		os.Remove(probe)
		t.Skip("this process writes into a 0500 directory (running as root?): no permission error to test")
	}
	path := filepath.Join(dir, "x.db")
	_, err := Open(path, Config{})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorIs(t, err, fs.ErrPermission)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestOpenLocked: a file another handle holds is ErrLocked (with
// ErrUnavailable), at once under NoLockWait and after the timeout
// otherwise, naming the holder's pid where the system lists it.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.bbolt")
	e, err := Open(path, Config{})
	require.NoError(t, err)
	defer e.Close()
	for _, timeout := range []time.Duration{NoLockWait, 100 * time.Millisecond} {
		start := time.Now()
		_, err = Open(path, Config{LockTimeout: timeout, MustExist: true})
		took := time.Since(start)
		require.ErrorIs(t, err, ErrLocked)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Contains(t, err.Error(), path)
		if timeout < 0 {
			require.Less(t, took, time.Second, "NoLockWait waited")
		} else {
			require.GreaterOrEqual(t, took, timeout/2)
		}
		if _, ok := LockHolder(path); ok {
			require.Contains(t, err.Error(), "pid "+strconv.Itoa(os.Getpid())+": this process")
		} else {
			require.Contains(t, err.Error(), "pid unknown")
		}
	}
}

// TestOpenMustExistReopens: MustExist opens a database this library
// wrote, with its rows, and opening and reading it writes nothing (through
// a Layer whose gate is read-only: a gate that writes registers its
// process, a write).
func TestOpenMustExistReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.bbolt")
	e, err := Open(path, Config{})
	require.NoError(t, err)
	l := openLayer(t, e)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))
	require.NoError(t, l.Close())

	before := testpath.Snapshot(t, path)
	e, err = Open(path, Config{MustExist: true})
	require.NoError(t, err)
	l, err = fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler), Gate: evolve.GateConfig{ReadOnly: true}})
	require.NoError(t, err)
	require.Equal(t, []store.KeyValue{{Key: k("a"), Value: v("1")}}, scanAll(t, l, p, 10))
	require.NoError(t, l.Close())
	require.Equal(t, before, testpath.Snapshot(t, path), "opening, reading and closing wrote to the file")
}

// TestOpenReadOnly: read-only handles share a file, a writer excludes
// them and they exclude a writer (ErrLocked, at once under NoLockWait); a
// read-only Layer reads, refuses every write with ErrInvalid and leaves
// the file as it was; a missing file is ErrInvalid and is not created.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store.bbolt")
	_, err := Open(path, Config{ReadOnly: true})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.NoFileExists(t, path)

	e, err := Open(path, Config{})
	require.NoError(t, err)
	l := openLayer(t, e)
	p := testPartition("p")
	mustApply(t, l, p, store.NewBatch().Put(k("a"), v("1")))
	_, err = Open(path, Config{ReadOnly: true, LockTimeout: NoLockWait})
	require.ErrorIs(t, err, ErrLocked, "a reader opened beside the writer")
	require.NoError(t, l.Close())

	before := testpath.Snapshot(t, path)
	r1, err := Open(path, Config{ReadOnly: true, LockTimeout: NoLockWait})
	require.NoError(t, err)
	r2, err := Open(path, Config{ReadOnly: true, LockTimeout: NoLockWait})
	require.NoError(t, err, "two readers share the file")
	_, err = Open(path, Config{LockTimeout: NoLockWait})
	require.ErrorIs(t, err, ErrLocked, "a writer opened beside a reader")
	lr := openLayer(t, r1)
	require.Equal(t, []store.KeyValue{{Key: k("a"), Value: v("1")}}, scanAll(t, lr, p, 10))
	_, err = lr.Apply(context.Background(), p, store.NewBatch().Put(k("b"), v("2")))
	require.ErrorIs(t, err, store.ErrInvalid)
	require.NoError(t, lr.Close())
	require.NoError(t, r2.Close())
	require.Equal(t, before, testpath.Snapshot(t, path), "a read-only handle wrote to the file")
}
