package fdblayer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mkit-dev/mkitfdb/store"
)

// BoltEngine is the embedded, durable Engine: one bbolt file holding one
// bucket whose keys are the same bytes FoundationDB would hold. Each
// commit is synced to disk unless BoltOptions.NoSync says otherwise, so
// data survives closing and reopening the file (and, with sync, a machine
// crash). bbolt runs one write transaction at a time and any number of
// readers beside it; it has no conflicts to retry. It reports
// FoundationDB's limits (FDBMaxKeyBytes, ...) so that data written here
// also fits FoundationDB.
//
// All methods are safe for concurrent use. A goroutine must not begin a
// write transaction while it holds a read transaction open: bbolt may
// need to remap the file, which waits for readers.
type BoltEngine struct {
	db *bolt.DB
}

// boltBucket names the one bucket.
var boltBucket = []byte("mkitfdb")

// DefaultBoltLockTimeout is how long OpenBoltEngine waits for another
// process to release the file when BoltOptions.LockTimeout is zero.
const DefaultBoltLockTimeout = 5 * time.Second

// BoltOptions configures OpenBoltEngine. The zero value syncs every commit.
type BoltOptions struct {
	// NoSync skips the fsync after each commit: much faster, but a machine
	// crash (not a process crash) can lose recent commits or corrupt the
	// file. Set it only for data that can be rebuilt.
	NoSync bool
	// LockTimeout bounds the wait for the file lock (bbolt allows one
	// process per file); zero means DefaultBoltLockTimeout.
	LockTimeout time.Duration
	// FileMode is the mode of a new file; zero means 0600.
	FileMode os.FileMode

	// openFile replaces os.OpenFile; tests use it to break the file.
	openFile func(string, int, os.FileMode) (*os.File, error)
}

// OpenBoltEngine opens (creating if needed) the bbolt file at path. It
// fails with an error wrapping store.ErrCorrupt when the file is not a
// bbolt file of this library, and store.ErrUnavailable when it cannot be
// opened or locked in time.
func OpenBoltEngine(path string, o BoltOptions) (*BoltEngine, error) {
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultBoltLockTimeout
	}
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	db, err := bolt.Open(path, o.FileMode, &bolt.Options{Timeout: o.LockTimeout, NoSync: o.NoSync, OpenFile: o.openFile})
	if err != nil {
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
			return nil, fmt.Errorf("fdblayer: open bbolt %s: %w: %w", path, store.ErrCorrupt, err)
		}
		return nil, fmt.Errorf("fdblayer: open bbolt %s: %w: %w", path, store.ErrUnavailable, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		if errors.Is(err, berrors.ErrIncompatibleValue) {
			return nil, fmt.Errorf("fdblayer: open bbolt %s: %w: %q is not a bucket", path, store.ErrCorrupt, boltBucket)
		}
		return nil, fmt.Errorf("fdblayer: open bbolt %s: %w: %w", path, store.ErrUnavailable, err)
	}
	return &BoltEngine{db: db}, nil
}

// Begin starts a write transaction, waiting for the current writer to
// finish (bbolt's wait does not observe ctx). It fails when ctx is done or
// the engine is closed.
func (e *BoltEngine) Begin(ctx context.Context) (Txn, error) { return e.begin(ctx, true) }

// BeginRead starts a read transaction. It fails when ctx is done or the
// engine is closed.
func (e *BoltEngine) BeginRead(ctx context.Context) (ReadTxn, error) { return e.begin(ctx, false) }

func (e *BoltEngine) begin(ctx context.Context, writable bool) (*boltTxn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tx, err := e.db.Begin(writable)
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return nil, fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return nil, err
	}
	b := tx.Bucket(boltBucket)
	if b == nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("fdblayer: bbolt: %w: bucket %q is missing", store.ErrCorrupt, boltBucket)
	}
	return &boltTxn{ctx: ctx, tx: tx, b: b}, nil
}

// Limits reports FoundationDB's limits.
func (e *BoltEngine) Limits() Limits { return fdbLimits() }

// EstimateRangeSize counts the bytes of keys and values in [begin, end)
// exactly, in one read transaction.
func (e *BoltEngine) EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error) {
	t, err := e.begin(ctx, false)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	var n int64
	c := t.b.Cursor()
	for k, v := c.Seek(begin); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
		n += int64(len(k) + len(v))
	}
	return n, nil
}

// Probe opens and ends a read transaction. It fails when ctx is done or
// the engine is closed.
func (e *BoltEngine) Probe(ctx context.Context) error {
	t, err := e.begin(ctx, false)
	if err != nil {
		return err
	}
	t.Close()
	return nil
}

// Close closes the file, waiting for open transactions to end.
func (e *BoltEngine) Close() error { return e.db.Close() }

// boltTxn is a BoltEngine transaction.
type boltTxn struct {
	ctx  context.Context
	tx   *bolt.Tx
	b    *bolt.Bucket
	err  error // the first Set or Clear error, returned by Commit
	done bool
}

// GetMany returns slices of bbolt's memory map, valid until Close. bbolt
// returns nil only for a missing key: a zero-length value reads as a
// non-nil empty slice.
func (t *boltTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	if err := t.usable(); err != nil {
		return dst, err
	}
	for _, k := range keys {
		dst = append(dst, t.b.Get(k))
	}
	return dst, nil
}

// GetRange returns slices of bbolt's memory map, valid until Close.
func (t *boltTxn) GetRange(dst []KeyValue, begin, end []byte, limit int) ([]KeyValue, error) {
	if err := t.usable(); err != nil {
		return dst, err
	}
	c := t.b.Cursor()
	n := 0
	for k, v := c.Seek(begin); k != nil && n < limit && bytes.Compare(k, end) < 0; k, v = c.Next() {
		dst = append(dst, KeyValue{Key: k, Value: v})
		n++
	}
	return dst, nil
}

func (t *boltTxn) usable() error {
	if t.done {
		return errTxnEnded
	}
	return t.ctx.Err()
}

func (t *boltTxn) Set(key, value []byte) {
	if t.err == nil {
		t.err = t.b.Put(key, value)
	}
}

func (t *boltTxn) Clear(key []byte) {
	if t.err == nil {
		t.err = t.b.Delete(key)
	}
}

// Commit writes and, unless NoSync, syncs the file. A failed write leaves
// the file's state unknown (the meta page may have reached the disk), so
// its error wraps store.ErrUnknownResult; a Set or Clear that failed
// earlier makes Commit roll back and return that error, nothing written.
func (t *boltTxn) Commit() error {
	if t.done {
		return errTxnEnded
	}
	t.done = true
	if t.err != nil {
		_ = t.tx.Rollback()
		return fmt.Errorf("fdblayer: bbolt: %w", t.err)
	}
	if err := t.tx.Commit(); err != nil {
		return fmt.Errorf("fdblayer: bbolt commit: %w: %w", store.ErrUnknownResult, err)
	}
	return nil
}

// OnError returns err: bbolt serializes writers, so none of its errors is
// worth retrying.
func (t *boltTxn) OnError(err error) error { return err }

func (t *boltTxn) Close() {
	if !t.done {
		t.done = true
		_ = t.tx.Rollback()
	}
}
