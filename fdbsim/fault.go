package fdbsim

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/store"
)

// Fault says what one write commit does.
type Fault uint8

const (
	// CommitNormally commits (unless the transaction's context has ended,
	// in which case nothing is written and Commit returns its error).
	CommitNormally Fault = iota
	// CommitConflict writes nothing and fails with a retryable conflict,
	// like FoundationDB's 1020 not_committed.
	CommitConflict
	// CommitThenUnknown writes, then fails with an error wrapping
	// store.ErrUnknownResult, like a 1021 commit_unknown_result for a
	// commit that landed. The error is retryable.
	CommitThenUnknown
	// UnknownWithoutCommit writes nothing and fails like CommitThenUnknown:
	// a 1021 for a commit that did not land.
	UnknownWithoutCommit
	// CommitFatal writes nothing and fails with a non-retryable error.
	CommitFatal
)

// FaultFunc decides what a write commit does. It runs inside Commit with
// the transaction's context, before the engine commits: on the memory
// and bbolt engines the transaction holds the engine exclusively then, so
// it must not use the engine (nor a Layer over it); it may block, for
// instance until ctx ends, to hold a commit in flight. The returned then,
// when non-nil, runs after the engine is released and before Commit
// returns: the place to act as a concurrent writer through a Layer. A
// FaultFunc is called from the committing goroutine, one commit at a time
// on the memory and bbolt engines.
type FaultFunc func(ctx context.Context) (f Fault, then func())

// Errors a commit fails with under a Fault of InjectFaults.
var (
	// ErrInjectedConflict is CommitConflict's error; OnError retries it.
	ErrInjectedConflict = errors.New("fdbsim: injected conflict")
	// ErrInjectedUnknown is wrapped (with store.ErrUnknownResult) by the
	// errors of CommitThenUnknown and UnknownWithoutCommit; OnError
	// retries them.
	ErrInjectedUnknown = errors.New("fdbsim: injected unknown commit result")
	// ErrInjectedFatal is CommitFatal's error; OnError gives up on it.
	ErrInjectedFatal = errors.New("fdbsim: injected fatal error")
)

// InjectFaults returns inner with f deciding each of its write commits:
// CommitConflict and UnknownWithoutCommit close the transaction without
// committing, CommitThenUnknown commits and then fails, and OnError
// retries the injected conflicts and unknown results at once (there is no
// contention to back off from) on a fresh transaction of inner, whose
// Begin may fail (a context's end, a closed engine). Read transactions,
// and every other error, are inner's own. The result is Distributed,
// Optimistic and a GroupCommitter, and its transactions RangesReaders,
// when inner's are.
//
// A write transaction of inner runs on its context without the
// cancellation (context.WithoutCancel); the result checks the context
// before each read and commit instead, so that a commit f lets through
// after holding it (CommitThenUnknown) lands even when the context ended
// meanwhile, as a commit in flight may on FoundationDB.
//
// It is meant for the memory and bbolt engines, whose transactions
// never conflict of themselves; on an MVCCEngine, MVCCConfig.Fault
// injects the same faults the way the engine meets them (counted in its
// Stats, a CommitThenUnknown landing only when the commit does not
// conflict). It is safe for concurrent use as inner is.
func InjectFaults(inner kv.Engine, f FaultFunc) kv.Engine {
	return &faultEngine{Engine: inner, fault: f}
}

// faultEngine is InjectFaults's engine.
type faultEngine struct {
	kv.Engine
	fault FaultFunc
}

// Distributed reports whether the inner engine is.
func (e *faultEngine) Distributed() bool { return distributed(e.Engine) }

func distributed(e kv.Engine) bool {
	d, ok := e.(kv.Distributed)
	return ok && d.Distributed()
}

// Optimistic reports whether the inner engine is.
func (e *faultEngine) Optimistic() bool { return optimistic(e.Engine) }

// GroupCommits reports whether the inner engine does.
func (e *faultEngine) GroupCommits() bool { return groupCommits(e.Engine) }

func groupCommits(e kv.Engine) bool {
	g, ok := e.(kv.GroupCommitter)
	return ok && g.GroupCommits()
}

func optimistic(e kv.Engine) bool {
	o, ok := e.(kv.Optimistic)
	return ok && o.Optimistic()
}

// ReadOnly reports whether the inner engine is.
func (e *faultEngine) ReadOnly() bool { return readOnly(e.Engine) }

func readOnly(e kv.Engine) bool {
	r, ok := e.(kv.ReadOnly)
	return ok && r.ReadOnly()
}

// Begin starts a transaction of the inner engine whose commits f decides.
func (e *faultEngine) Begin(ctx context.Context) (kv.Txn, error) {
	inner, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	t := &faultTxn{Txn: inner, e: e, ctx: ctx}
	if _, ok := inner.(kv.RangesReader); ok {
		return &faultRangesTxn{t}, nil
	}
	return t, nil
}

// begin begins a write transaction of the inner engine on ctx without
// its cancellation, once ctx is checked.
func (e *faultEngine) begin(ctx context.Context) (kv.Txn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.Engine.Begin(context.WithoutCancel(ctx))
}

// faultTxn is a transaction of a faultEngine: the inner engine's, which
// OnError replaces after an injected fault.
type faultTxn struct {
	kv.Txn
	e   *faultEngine
	ctx context.Context
}

// faultRangesTxn is a faultTxn over a RangesReader.
type faultRangesTxn struct{ *faultTxn }

func (t *faultRangesTxn) GetRanges(reads []kv.RangeRead) ([][]kv.KeyValue, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, err
	}
	return t.Txn.(kv.RangesReader).GetRanges(reads)
}

func (t *faultTxn) GetMany(dst [][]byte, keys [][]byte) ([][]byte, error) {
	if err := t.ctx.Err(); err != nil {
		return dst, err
	}
	return t.Txn.GetMany(dst, keys)
}

func (t *faultTxn) GetRange(dst []kv.KeyValue, begin, end []byte, limit, maxBytes int) ([]kv.KeyValue, error) {
	if err := t.ctx.Err(); err != nil {
		return dst, err
	}
	return t.Txn.GetRange(dst, begin, end, limit, maxBytes)
}

// Commit asks the fault function, then commits, fails or both.
func (t *faultTxn) Commit() error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	fault, then := t.e.fault(t.ctx)
	var err error
	switch fault {
	case CommitNormally:
		// The fault may have held the commit until the context ended.
		if err = t.ctx.Err(); err != nil {
			t.Txn.Close()
			err = fmt.Errorf("fdbsim: commit interrupted: %w", err)
		} else {
			err = t.Txn.Commit()
		}
	case CommitConflict:
		t.Txn.Close()
		err = ErrInjectedConflict
	case CommitThenUnknown:
		if err = t.Txn.Commit(); err == nil {
			err = fmt.Errorf("%w: %w", store.ErrUnknownResult, ErrInjectedUnknown)
		}
	case UnknownWithoutCommit:
		t.Txn.Close()
		err = fmt.Errorf("%w: %w", store.ErrUnknownResult, ErrInjectedUnknown)
	case CommitFatal:
		t.Txn.Close()
		err = ErrInjectedFatal
	default:
		t.Txn.Close()
		err = fmt.Errorf("fdbsim: unknown fault %d", fault)
	}
	if then != nil {
		then()
	}
	return err
}

// OnError retries an injected conflict or unknown result on a fresh
// transaction of the inner engine; any other error is the inner
// transaction's to judge.
func (t *faultTxn) OnError(err error) error {
	if !errors.Is(err, ErrInjectedConflict) && !errors.Is(err, ErrInjectedUnknown) {
		return t.Txn.OnError(err)
	}
	t.Txn.Close()
	inner, berr := t.e.begin(t.ctx)
	if berr != nil {
		return berr
	}
	t.Txn = inner
	return nil
}
