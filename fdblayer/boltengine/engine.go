// Package boltengine is the embedded, durable [kv.Engine]: one bbolt file
// (go.etcd.io/bbolt) holding the keys FoundationDB would hold.
// fdblayer.Open(engine, fdblayer.Config{}) over it is the store of a
// service that runs on one machine. Only programs that import this
// package link bbolt.
package boltengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Engine is the embedded, durable [kv.Engine]: one bbolt file holding one
// bucket whose keys are the same bytes FoundationDB would hold. Each
// commit is synced to disk unless [Config].NoSync says otherwise, so data
// survives closing and reopening the file (and, with sync, a machine
// crash). bbolt runs one write transaction at a time and any number of
// readers beside it; it has no conflicts to retry. It reports
// FoundationDB's limits ([kv.FDBLimits]) so that data written here also
// fits FoundationDB.
//
// All methods are safe for concurrent use. A goroutine must not begin a
// write transaction while it holds a read transaction open: bbolt may
// need to remap the file, which waits for readers.
type Engine struct {
	db          *bolt.DB
	fillPercent float64 // Config.FillPercent; 0: bbolt's default
}

var (
	_ kv.Engine   = (*Engine)(nil)
	_ kv.ReadOnly = (*Engine)(nil)
)

// ReadOnly implements kv.ReadOnly: whether the database is open for
// reading only (Config.ReadOnly).
func (e *Engine) ReadOnly() bool { return e.db.IsReadOnly() }

// bucket names the one bucket.
var bucket = []byte("mkitfdb")

// errTxnEnded: a transaction used after Commit or Close.
var errTxnEnded = errors.New("boltengine: transaction has ended")

// Begin starts a write transaction, waiting for the current writer to
// finish (bbolt's wait does not observe ctx). It fails when ctx is done or
// the engine is closed.
func (e *Engine) Begin(ctx context.Context) (kv.Txn, error) { return e.begin(ctx, true) }

// BeginRead starts a read transaction. It fails when ctx is done or the
// engine is closed.
func (e *Engine) BeginRead(ctx context.Context) (kv.ReadTxn, error) { return e.begin(ctx, false) }

func (e *Engine) begin(ctx context.Context, writable bool) (*boltTxn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tx, err := e.db.Begin(writable)
	if err != nil {
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return nil, fmt.Errorf("boltengine: %w: %w", kv.ErrClosed, err)
		}
		if errors.Is(err, berrors.ErrDatabaseReadOnly) {
			return nil, fmt.Errorf("boltengine: %w: the database is open read-only (Config.ReadOnly): %w", store.ErrInvalid, err)
		}
		return nil, err
	}
	b := tx.Bucket(bucket)
	if b == nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("boltengine: %w: bucket %q is missing", store.ErrCorrupt, bucket)
	}
	if writable && e.fillPercent != 0 {
		b.FillPercent = e.fillPercent
	}
	return &boltTxn{ctx: ctx, tx: tx, b: b}, nil
}

var _ kv.GroupCommitter = (*Engine)(nil)

// GroupCommits implements kv.GroupCommitter: true, since every commit
// costs bbolt a write of its pages and (unless NoSync) an fsync, and
// bbolt runs one writer at a time.
func (e *Engine) GroupCommits() bool { return true }

// Limits reports FoundationDB's limits.
func (e *Engine) Limits() kv.Limits { return kv.FDBLimits() }

// EstimateRangeSize counts the bytes of keys and values in [begin, end)
// exactly, in one read transaction.
func (e *Engine) EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error) {
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
func (e *Engine) Probe(ctx context.Context) error {
	t, err := e.begin(ctx, false)
	if err != nil {
		return err
	}
	t.Close()
	return nil
}

// Close closes the file, waiting for open transactions to end; later
// transactions fail with [kv.ErrClosed].
func (e *Engine) Close() error { return e.db.Close() }

// boltTxn is an Engine transaction.
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
func (t *boltTxn) GetRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) ([]kv.KeyValue, error) {
	if err := t.usable(); err != nil {
		return dst, err
	}
	c := t.b.Cursor()
	n, size := 0, 0
	for k, v := c.Seek(begin); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
		dst = append(dst, kv.KeyValue{Key: k, Value: v})
		if n, size = n+1, size+len(k)+len(v); memkv.RangeStop(n, size, limit, maxBytes) {
			break
		}
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
		return fmt.Errorf("boltengine: %w", t.err)
	}
	if err := t.tx.Commit(); err != nil {
		return fmt.Errorf("boltengine: commit: %w: %w", store.ErrUnknownResult, err)
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
