// Package fdbengine is the [kv.Engine] over a FoundationDB cluster:
// fdblayer.Open(engine, fdblayer.Config{}) over it is the store of a
// service whose state lives in FoundationDB. It is a module of its own
// (github.com/mkit-dev/mkitfdb/fdblayer/fdbengine), because it links
// FoundationDB's client through cgo: building it needs cgo, FoundationDB's
// C headers and libfdb_c, and only the programs that import it do. The
// mkitfdb command of this module (cmd/mkitfdb) is the operator's command
// that opens clusters.
//
// Its tests need libfdb_c to link and a cluster to run: set
// FDB_CLUSTER_FILE, or run scripts/test-fdb.sh of the main module (make
// test-fdb), which starts a throwaway fdbserver.
package fdbengine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
	"github.com/mkit-dev/mkitfdb/store"
)

// APIVersion is the FoundationDB API version the engine selects: the
// highest the Go binding supports.
const APIVersion = 730

// engineRetries bounds the retries of EstimateRangeSize and Probe, which
// have no Layer retry loop around them.
const engineRetries = 10

var (
	apiOnce sync.Once
	apiErr  error
	// openMu serializes fdb.OpenDatabase, whose cache of databases is not
	// safe for concurrent use.
	openMu sync.Mutex
)

// selectAPIVersion selects APIVersion once per process. The binding
// accepts the same version selected again (by other code in the process)
// and refuses a different one.
func selectAPIVersion() error {
	apiOnce.Do(func() { apiErr = fdb.APIVersion(APIVersion) })
	return apiErr
}

// Engine is the [kv.Engine] over a FoundationDB cluster. A transaction's
// context maps onto FoundationDB's:
// a deadline becomes the transaction's timeout option, and the context's
// end cancels the transaction. FoundationDB may still commit a transaction
// cancelled or timed out during its commit, so such a commit error, like
// 1021 commit_unknown_result, wraps store.ErrUnknownResult. OnError is
// FoundationDB's: it retries conflicts (1020), unknown results,
// transaction_too_old and the like after the client's backoff.
//
// It reports FoundationDB's limits ([kv.FDBLimits]), is
// [kv.Distributed]: the Layer spreads its due index over the cluster's
// storage servers, and is [kv.Optimistic].
//
// All methods are safe for concurrent use.
type Engine struct {
	db     fdb.Database
	closed atomic.Bool
}

var (
	_ kv.Engine      = (*Engine)(nil)
	_ kv.Distributed = (*Engine)(nil)
	_ kv.Optimistic  = (*Engine)(nil)
)

// Config configures Open. The zero value opens the cluster of the
// FDB_CLUSTER_FILE environment variable, or the client's default cluster
// file.
type Config struct {
	// ClusterFile names the cluster's cluster file; "" means the
	// FDB_CLUSTER_FILE environment variable, or the client's default
	// cluster file (/etc/foundationdb/fdb.cluster on Linux) when that is
	// empty too.
	ClusterFile string
}

// Open connects to the cluster c names. It selects APIVersion on first
// use. The binding keeps one database handle per cluster file for the
// whole process: engines opened on one file share it. It fails with
// store.ErrUnavailable when the client cannot start or another API
// version is already selected; connecting happens in the background, so
// an unreachable cluster shows in Probe, not here.
func Open(c Config) (*Engine, error) {
	clusterFile := c.ClusterFile
	if clusterFile == "" {
		clusterFile = os.Getenv("FDB_CLUSTER_FILE")
	}
	if err := selectAPIVersion(); err != nil {
		return nil, fmt.Errorf("fdbengine: FoundationDB API version %d: %w: %w", APIVersion, store.ErrUnavailable, err)
	}
	openMu.Lock()
	db, err := fdb.OpenDatabase(clusterFile)
	openMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("fdbengine: open FoundationDB %q: %w: %w", clusterFile, store.ErrUnavailable, err)
	}
	return &Engine{db: db}, nil
}

// Begin starts a transaction bound to ctx.
func (e *Engine) Begin(ctx context.Context) (kv.Txn, error) { return e.begin(ctx) }

// Distributed reports true: a cluster's keys are spread over its storage
// servers (see [kv.Distributed]).
func (e *Engine) Distributed() bool { return true }

// Optimistic reports true: a transaction holds a read version, no lock,
// and never waits for another (see [kv.Optimistic]).
func (e *Engine) Optimistic() bool { return true }

// BeginRead starts a transaction bound to ctx; it is never committed.
func (e *Engine) BeginRead(ctx context.Context) (kv.ReadTxn, error) { return e.begin(ctx) }

func (e *Engine) begin(ctx context.Context) (*fdbTxn, error) {
	if e.closed.Load() {
		return nil, kv.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tr, err := e.db.CreateTransaction()
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		// From API version 610 on, the timeout survives OnError's reset,
		// so it bounds every retry too.
		if err := tr.Options().SetTimeout(fdbcode.TimeoutMs(time.Until(deadline))); err != nil {
			tr.Cancel()
			return nil, err
		}
	}
	return &fdbTxn{ctx: ctx, tr: tr, stop: context.AfterFunc(ctx, tr.Cancel)}, nil
}

// Limits reports FoundationDB's limits.
func (e *Engine) Limits() kv.Limits { return kv.FDBLimits() }

// EstimateRangeSize returns FoundationDB's sampled estimate of the bytes
// in [begin, end): accurate for large ranges, rough for small ones.
func (e *Engine) EstimateRangeSize(ctx context.Context, begin, end []byte) (int64, error) {
	var n int64
	err := e.run(ctx, func(t *fdbTxn) (err error) {
		n, err = t.tr.GetEstimatedRangeSizeBytes(fdb.KeyRange{Begin: fdb.Key(begin), End: fdb.Key(end)}).Get()
		return err
	})
	return n, err
}

// Probe gets a read version, which needs the cluster to answer.
func (e *Engine) Probe(ctx context.Context) error {
	return e.run(ctx, func(t *fdbTxn) error {
		_, err := t.tr.GetReadVersion().Get()
		return err
	})
}

// run runs fn in a transaction, retrying what OnError retries, a bounded
// number of times.
func (e *Engine) run(ctx context.Context, fn func(*fdbTxn) error) error {
	t, err := e.begin(ctx)
	if err != nil {
		return err
	}
	defer t.Close()
	for attempt := 0; ; attempt++ {
		err := fn(t)
		if err == nil || attempt == engineRetries {
			return err
		}
		if err := t.OnError(err); err != nil {
			return err
		}
	}
}

// Close marks the engine closed; later transactions fail with
// [kv.ErrClosed], and so does a second Close.
// The process-wide database handle stays open for other engines.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return kv.ErrClosed
	}
	return nil
}

// fdbTxn is an Engine transaction.
type fdbTxn struct {
	ctx  context.Context
	tr   fdb.Transaction
	stop func() bool // unregisters the cancel on ctx's end
	futs []fdb.FutureByteSlice
}

// GetMany issues every read, then waits for each. The values are the
// binding's copies.
func (t *fdbTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	futs := t.futs[:0]
	for _, k := range keys {
		futs = append(futs, t.tr.Get(fdb.Key(k)))
	}
	t.futs = futs
	defer clear(futs)
	for _, f := range futs {
		v, err := f.Get()
		if err != nil {
			return dst, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// GetRanges implements kv.RangesReader: each range is read in a goroutine of
// its own (a Transaction is safe for concurrent use), so that the reads
// are in flight together.
func (t *fdbTxn) GetRanges(reads []kv.RangeRead) ([][]kv.KeyValue, error) {
	out := make([][]kv.KeyValue, len(reads))
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() {
			kvs, err := t.tr.GetRange(fdb.KeyRange{Begin: fdb.Key(r.Begin), End: fdb.Key(r.End)}, fdb.RangeOptions{Limit: r.Limit}).GetSliceWithError()
			if err != nil {
				errs[i] = err
				return
			}
			rows := make([]kv.KeyValue, len(kvs))
			for j, row := range kvs {
				rows[j] = kv.KeyValue{Key: row.Key, Value: row.Value}
			}
			out[i] = rows
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetRange reads a row limit in one request (StreamingModeExact) when it
// has no byte budget. With one it iterates in StreamingModeWantAll,
// which transfers as much of the limit per request as the cluster allows,
// and stops at the budget (see memkv.RangeStop): the binding's range options
// carry no target bytes.
func (t *fdbTxn) GetRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) ([]kv.KeyValue, error) {
	r := fdb.KeyRange{Begin: fdb.Key(begin), End: fdb.Key(end)}
	if maxBytes <= 0 {
		kvs, err := t.tr.GetRange(r, fdb.RangeOptions{Limit: limit}).GetSliceWithError()
		if err != nil {
			return dst, err
		}
		for _, row := range kvs {
			dst = append(dst, kv.KeyValue{Key: row.Key, Value: row.Value})
		}
		return dst, nil
	}
	it := t.tr.GetRange(r, fdb.RangeOptions{Limit: limit, Mode: fdb.StreamingModeWantAll}).Iterator()
	n, size := 0, 0
	for it.Advance() {
		row, err := it.Get()
		if err != nil {
			return dst, err
		}
		dst = append(dst, kv.KeyValue{Key: row.Key, Value: row.Value})
		if n, size = n+1, size+len(row.Key)+len(row.Value); memkv.RangeStop(n, size, limit, maxBytes) {
			break
		}
	}
	return dst, nil
}

func (t *fdbTxn) Set(key, value []byte) { t.tr.Set(fdb.Key(key), value) }

func (t *fdbTxn) Clear(key []byte) { t.tr.Clear(fdb.Key(key)) }

// Commit commits. An error after which the transaction may still have
// landed (1021, 1039, or a cancel or timeout while committing) wraps
// store.ErrUnknownResult.
func (t *fdbTxn) Commit() error {
	if err := t.tr.Commit().Get(); err != nil {
		return commitError(err)
	}
	return nil
}

// commitError wraps a commit's error, with store.ErrUnknownResult when the
// commit may have landed (see fdbcode.MayHaveCommitted).
func commitError(err error) error {
	var fe fdb.Error
	if errors.As(err, &fe) {
		return fdbcode.CommitError("fdbengine", fe.Code, err)
	}
	return fmt.Errorf("fdbengine: commit: %w", err)
}

// OnError asks FoundationDB whether err is retryable; if it is, the client
// waits its backoff and resets the transaction, and OnError returns nil.
// Errors that are not FoundationDB's are returned as they are.
func (t *fdbTxn) OnError(err error) error {
	var fe fdb.Error
	if !errors.As(err, &fe) {
		return err
	}
	if err := t.tr.OnError(fe).Get(); err != nil {
		return fmt.Errorf("fdbengine: %w", err)
	}
	return nil
}

// Close stops watching the context. An uncommitted transaction is
// released with its last reference (the binding's finalizer).
func (t *fdbTxn) Close() { t.stop() }
