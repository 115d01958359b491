package boltengine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mkit-dev/mkitfdb/store"
)

// DefaultLockTimeout is how long Open waits for another process to
// release the file when Config.LockTimeout is zero.
const DefaultLockTimeout = 5 * time.Second

// NoLockWait, as Config.LockTimeout, makes Open try the file lock once and
// fail at once with ErrLocked when another handle holds it.
const NoLockWait time.Duration = -1

// Config configures Open. The zero value creates the file if needed, syncs
// every commit and waits DefaultLockTimeout for the file's lock.
type Config struct {
	// NoSync skips the fsync after each commit: much faster, but a machine
	// crash (not a process crash) can lose recent commits or corrupt the
	// file. Set it only for data that can be rebuilt.
	NoSync bool
	// LockTimeout bounds the wait for the file lock (bbolt allows one
	// process per file); zero means DefaultLockTimeout, NoLockWait (any
	// negative value) means no wait at all.
	LockTimeout time.Duration
	// FileMode is the mode of a new file; zero means 0600.
	FileMode os.FileMode
	// FillPercent is how full bbolt fills the pages it splits, in
	// (0, 1]; zero means bbolt's default, 0.5. Pages split half full stay
	// half full when keys arrive in order (the pages left of an insert
	// point are never written again), which doubles the file of a store
	// whose partitions grow at their ends (queues, sequences, times); set
	// 1 for such a store. Keep the default where keys arrive in random
	// order: there 1 leaves more pages half empty than 0.5 does. It is not
	// stored in the file: each open chooses anew.
	FillPercent float64
	// MustExist opens only a database this library already wrote: the
	// file is neither created nor initialised, and a missing or empty file,
	// or a bbolt file without the library's bucket, is an error wrapping
	// store.ErrInvalid. Nothing is written to a file that fails the check.
	MustExist bool
	// ReadOnly opens an existing database for reading only, as MustExist
	// does, under a shared file lock: any number of read-only handles
	// share the file, but none opens while a writer holds it, and no
	// writer opens while one is open. Write transactions fail (Begin
	// returns an error wrapping store.ErrInvalid), so a Layer over the
	// engine reads and never writes.
	ReadOnly bool

	// openFile replaces os.OpenFile; tests use it to break the file.
	openFile func(string, int, os.FileMode) (*os.File, error)
}

// Open opens (creating if needed, unless Config.MustExist) the bbolt file
// at path. Its errors say what must change:
//   - store.ErrInvalid (with the fs error, e.g. fs.ErrNotExist or
//     fs.ErrPermission, where there is one): the path cannot be used as
//     given and retrying will not help: its directory is missing or not a
//     directory, the process may not open or create the file, something
//     other than a regular file (a directory, a device) is there, or, with
//     MustExist, no database of this library is there;
//   - ErrLocked together with store.ErrUnavailable: another handle, in
//     this process or another, holds the file's lock past LockTimeout (a
//     writer's lock excludes every other handle; a ReadOnly handle's
//     shared lock excludes writers); the
//     message names the holder's pid where the system says (Linux's
//     /proc/locks) and says "pid unknown" otherwise;
//   - store.ErrCorrupt: the file is not a bbolt file of this library;
//   - store.ErrUnavailable: any other failure to open or initialise it.
//
// A path that fails a check is left as it was: nothing is created, written
// or removed. A FillPercent out of [0, 1] is an error wrapping
// store.ErrInvalid.
func Open(path string, o Config) (*Engine, error) {
	if !(o.FillPercent >= 0 && o.FillPercent <= 1) {
		return nil, fmt.Errorf("boltengine: open %s: %w: FillPercent %v is out of [0, 1]", path, store.ErrInvalid, o.FillPercent)
	}
	if o.ReadOnly {
		o.MustExist = true
	}
	if err := checkPath(path, o.MustExist); err != nil {
		return nil, err
	}
	timeout := o.LockTimeout
	switch {
	case timeout == 0:
		timeout = DefaultLockTimeout
	case timeout < 0:
		// bbolt gives up after its first try when the timeout is shorter
		// than its 50 ms retry interval; zero would mean "wait forever".
		timeout = time.Nanosecond
	}
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	openFile := o.openFile
	if openFile == nil {
		openFile = os.OpenFile
	}
	if o.MustExist {
		inner := openFile
		openFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
			return inner(name, flag&^os.O_CREATE, perm)
		}
	}
	db, err := bolt.Open(path, o.FileMode, &bolt.Options{Timeout: timeout, NoSync: o.NoSync, OpenFile: openFile, ReadOnly: o.ReadOnly})
	if err != nil {
		return nil, openError(path, err)
	}
	// A file that has the bucket is opened without a write, so opening
	// and closing a database changes nothing in it.
	var exists bool
	_ = db.View(func(tx *bolt.Tx) error {
		exists = tx.Bucket(bucket) != nil
		return nil
	})
	switch {
	case exists:
	case o.MustExist:
		_ = db.Close()
		return nil, fmt.Errorf("boltengine: open %s: %w: a bbolt file without the %q bucket, not a database of this library", path, store.ErrInvalid, bucket)
	default:
		err = db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(bucket)
			return err
		})
		if err != nil {
			_ = db.Close()
			if errors.Is(err, berrors.ErrIncompatibleValue) {
				return nil, fmt.Errorf("boltengine: open %s: %w: %q is not a bucket", path, store.ErrCorrupt, bucket)
			}
			return nil, fmt.Errorf("boltengine: open %s: %w: %w", path, store.ErrUnavailable, err)
		}
	}
	return &Engine{db: db, fillPercent: o.FillPercent}, nil
}

// checkPath rejects, before anything is opened, a path whose directory
// is missing or something other than a regular file, and (with mustExist)
// a missing or empty file: bbolt would create the one and initialise the
// other.
func checkPath(path string, mustExist bool) error {
	invalid := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("boltengine: open %s: %w: %s: %w", path, store.ErrInvalid, what, err)
		}
		return fmt.Errorf("boltengine: open %s: %w: %s", path, store.ErrInvalid, what)
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return invalid("a directory is there, not a database file", nil)
	case err == nil && !fi.Mode().IsRegular():
		return invalid(fmt.Sprintf("not a regular file (%s)", fi.Mode().Type()), nil)
	case err == nil && mustExist && fi.Size() == 0:
		return invalid("an empty file, not a database", nil)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return openError(path, err)
	case mustExist:
		return invalid("no database there", fs.ErrNotExist)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return invalid(fmt.Sprintf("directory %s does not exist", dir), fs.ErrNotExist)
	case err != nil:
		return openError(path, err)
	case !di.IsDir():
		return invalid(fmt.Sprintf("%s is not a directory", dir), syscall.ENOTDIR)
	}
	return nil
}

// openError maps an error of bolt.Open (or of a stat of its path) to
// the store sentinel that says what the caller must fix.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		holder := "pid unknown"
		if pid, ok := lockHolder(path); ok {
			holder = fmt.Sprintf("pid %d", pid)
			if pid == os.Getpid() {
				holder = fmt.Sprintf("pid %d: this process, through another open handle", pid)
			}
		}
		return fmt.Errorf("%w (%s): %s: %w", ErrLocked, holder, path, store.ErrUnavailable)
	case errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum):
		return fmt.Errorf("boltengine: open %s: %w: not a bbolt database of this library: %w", path, store.ErrCorrupt, err)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("boltengine: open %s: %w: %w", path, store.ErrInvalid, err)
	}
	return fmt.Errorf("boltengine: open %s: %w: %w", path, store.ErrUnavailable, err)
}
