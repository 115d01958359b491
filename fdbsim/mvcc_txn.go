package fdbsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/internal/fdbcode"
	"github.com/mkit-dev/mkitfdb/internal/memkv"
)

// mvccTxn is an MVCCEngine transaction. It reads at version rv, the last
// commit's when it began; a read-write transaction records its read
// conflict ranges and buffers its writes until Commit.
type mvccTxn struct {
	e     *MVCCEngine
	ctx   context.Context
	write bool

	rv         uint64
	start      time.Time // when it got rv, on the engine's clock
	open       bool      // usable: not committed, not closed
	registered bool      // rv is registered with the resolver

	reads  []keyRange
	arena  []byte // copies of read keys the conflict ranges hold
	writes []memkv.Write
	size   int   // bytes as FoundationDB counts them: mutations plus conflict ranges
	err    error // the first limit a Set or Clear broke; Commit returns it

	backoff time.Duration // OnError's next delay, before jitter
}

// reset starts t over at the last committed version: no reads, no writes.
func (t *mvccTxn) reset() error {
	e := t.e
	e.mu.Lock()
	t.endLocked()
	if e.closed {
		e.mu.Unlock()
		return kv.ErrClosed
	}
	t.rv = e.store.begin()
	t.registered = true
	e.mu.Unlock()
	t.start = e.opts.Clock.Now()
	t.open = true
	clear(t.writes)
	t.reads, t.arena, t.writes = t.reads[:0], t.arena[:0], t.writes[:0]
	t.size, t.err = 0, nil
	return nil
}

// endLocked unregisters t's read version; e.mu is held.
func (t *mvccTxn) endLocked() {
	if t.registered {
		t.registered = false
		t.e.store.end(t.rv)
	}
}

// usable fails when t has ended, its context has, or it has outlived the
// engine's lifetime (transaction_too_old).
func (t *mvccTxn) usable() error {
	if !t.open {
		return errMVCCTxnEnded
	}
	if err := t.ctx.Err(); err != nil {
		return err
	}
	if t.e.opts.Clock.Now().Sub(t.start) > t.e.opts.Lifetime {
		t.e.tooOld.Add(1)
		return FDBError{Code: fdbcode.TransactionTooOld}
	}
	return nil
}

// beforeRead waits the injected latency and checks t is still usable
// after it.
func (t *mvccTxn) beforeRead() error {
	if err := t.e.latency(t.ctx); err != nil {
		return err
	}
	return t.usable()
}

// GetMany reads keys at t's version; a read-write transaction adds a point
// read conflict range per key. The values are the engine's, never
// modified.
func (t *mvccTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	if err := t.beforeRead(); err != nil {
		return dst, err
	}
	if t.write {
		for _, k := range keys {
			start := len(t.arena)
			t.arena = append(append(t.arena, k...), 0x00)
			end := t.arena[start:len(t.arena):len(t.arena)]
			t.addRead(keyRange{begin: end[:len(k)], end: end, point: true})
		}
	}
	t.e.reads.Add(1)
	t.e.keysRead.Add(uint64(len(keys)))
	t.e.mu.RLock()
	defer t.e.mu.RUnlock()
	return t.e.store.rows.getMany(dst, keys, t.rv), nil
}

// GetRange reads [begin, end) at t's version, as far as rangeStop lets
// it; a read-write transaction adds the range it covered as a read
// conflict range: up to just after the last row when it stopped at its
// limit or byte budget, the whole range otherwise.
func (t *mvccTxn) GetRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) ([]kv.KeyValue, error) {
	if err := t.beforeRead(); err != nil {
		return dst, err
	}
	t.e.reads.Add(1)
	return t.getRange(dst, begin, end, limit, maxBytes), nil
}

// GetRanges implements [kv.RangesReader]: the ranges are read at t's version,
// each as GetRange reads it, after one round trip's latency, and count as
// one read.
func (t *mvccTxn) GetRanges(reads []kv.RangeRead) ([][]kv.KeyValue, error) {
	if err := t.beforeRead(); err != nil {
		return nil, err
	}
	t.e.reads.Add(1)
	out := make([][]kv.KeyValue, len(reads))
	for i, r := range reads {
		out[i] = t.getRange(nil, r.Begin, r.End, r.Limit, 0)
	}
	return out, nil
}

// getRange is GetRange after its latency, not counted as a read of its
// own.
func (t *mvccTxn) getRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) []kv.KeyValue {
	n := len(dst)
	t.e.mu.RLock()
	dst, stopped := t.e.store.rows.getRange(dst, begin, end, limit, maxBytes, t.rv)
	t.e.mu.RUnlock()
	t.e.keysRead.Add(uint64(len(dst) - n))
	if t.write {
		start := len(t.arena)
		t.arena = append(t.arena, begin...)
		if stopped {
			// The key just after the last one returned: nothing past it
			// was read.
			t.arena = append(append(t.arena, dst[len(dst)-1].Key...), 0x00)
		} else {
			t.arena = append(t.arena, end...)
		}
		r := t.arena[start:len(t.arena):len(t.arena)]
		t.addRead(keyRange{begin: r[:len(begin):len(begin)], end: r[len(begin):]})
	}
	return dst
}

func (t *mvccTxn) addRead(r keyRange) {
	t.reads = append(t.reads, r)
	t.size += len(r.begin) + len(r.end)
}

// Set writes key = value at commit. FoundationDB counts the mutation (key
// and value) and its write conflict range [key, key+0x00).
func (t *mvccTxn) Set(key, value []byte) {
	if !t.checkKey(key) {
		return
	}
	if len(value) > kv.FDBMaxValueBytes {
		t.fail(FDBError{Code: fdbcode.ValueTooLarge})
		return
	}
	t.writes = append(t.writes, memkv.Write{Item: memkv.NewItem(key, value)})
	t.size += len(key) + len(value) + 2*len(key) + 1
}

// Clear deletes key at commit. FoundationDB clears the range [key,
// key+0x00) and counts it twice: the mutation and the write conflict
// range.
func (t *mvccTxn) Clear(key []byte) {
	if !t.checkKey(key) {
		return
	}
	t.writes = append(t.writes, memkv.Write{Item: memkv.KeyItem(bytes.Clone(key)), Del: true})
	t.size += 2 * (2*len(key) + 1)
}

// checkKey reports whether key may be written, failing t otherwise.
func (t *mvccTxn) checkKey(key []byte) bool {
	if len(key) > kv.FDBMaxKeyBytes {
		t.fail(FDBError{Code: fdbcode.KeyTooLarge})
		return false
	}
	return true
}

func (t *mvccTxn) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// Commit commits t's writes at the next version unless a read conflicts
// with a later commit (1020), a limit is broken (2101, 2102, 2103), t is
// too old (1007) or a fault says otherwise; errors after which the writes
// may have landed (1021) wrap store.ErrUnknownResult. A transaction with
// no writes commits without a check. Afterwards only OnError (to retry)
// and Close may be called.
func (t *mvccTxn) Commit() error {
	if err := t.usable(); err != nil {
		return t.commitError(err)
	}
	if !t.write || (len(t.writes) == 0 && t.err == nil) {
		t.close()
		return nil
	}
	if t.err != nil {
		t.close()
		return t.commitError(t.err)
	}
	if t.size > kv.FDBMaxTxnBytes {
		t.close()
		return t.commitError(FDBError{Code: fdbcode.TransactionTooLarge})
	}
	fault, then := t.e.fault(t.ctx)
	if err := t.e.latency(t.ctx); err != nil {
		t.close()
		return fmt.Errorf("fdbsim: mvcc engine: commit interrupted: %w", err)
	}
	// The fault or the latency may have held the commit past the
	// transaction's lifetime or its context's end.
	err := t.usable()
	if err == nil {
		switch fault {
		case CommitNormally:
			err = t.e.commit(t)
		case CommitConflict:
			t.e.conflicts.Add(1)
			err = FDBError{Code: fdbcode.NotCommitted}
		case CommitThenUnknown:
			_ = t.e.commit(t) // landed, unless it conflicted: unknown either way
			err = FDBError{Code: fdbcode.CommitUnknownResult}
		case UnknownWithoutCommit:
			err = FDBError{Code: fdbcode.CommitUnknownResult}
		case CommitFatal:
			err = ErrInjectedFatal
		default:
			err = fmt.Errorf("fdbsim: mvcc engine: unknown fault %d", fault)
		}
	}
	t.close()
	if then != nil {
		then()
	}
	if err != nil {
		return t.commitError(err)
	}
	return nil
}

// commitError wraps a commit's error; FoundationDB's codes are wrapped as
// the FoundationDB engine wraps them (see fdbCommitError).
func (t *mvccTxn) commitError(err error) error {
	var fe FDBError
	if !errors.As(err, &fe) {
		return err
	}
	if fe.Code == fdbcode.CommitUnknownResult {
		t.e.unknown.Add(1)
	}
	return fdbcode.CommitError("fdbsim: mvcc engine", fe.Code, err)
}

// OnError retries transaction_too_old, not_committed and
// commit_unknown_result: it waits FoundationDB's backoff (a random
// fraction of a delay doubling from MVCCConfig.Backoff to MaxBackoff) and
// resets t to the last committed version. Every other error, and the
// context's end during the wait, is returned.
func (t *mvccTxn) OnError(err error) error {
	var fe FDBError
	if !errors.As(err, &fe) {
		return err
	}
	switch fe.Code {
	case fdbcode.TransactionTooOld, fdbcode.NotCommitted, fdbcode.CommitUnknownResult:
	default:
		return err
	}
	d := time.Duration(t.e.random() * float64(t.backoff))
	t.backoff = min(2*t.backoff, t.e.opts.MaxBackoff)
	if werr := clock.Sleep(t.ctx, d); werr != nil {
		return fmt.Errorf("fdbsim: mvcc engine: retry of %w: %w", err, werr)
	}
	if rerr := t.reset(); rerr != nil {
		return rerr
	}
	t.e.retries.Add(1)
	return nil
}

// close ends t: its writes are dropped and its read version unregistered.
func (t *mvccTxn) close() {
	t.open = false
	if t.registered {
		t.e.mu.Lock()
		t.endLocked()
		t.e.mu.Unlock()
	}
}

// Close ends the transaction, dropping uncommitted writes. Safe after
// Commit and more than once.
func (t *mvccTxn) Close() {
	t.close()
	clear(t.writes)
	t.writes = t.writes[:0]
}
