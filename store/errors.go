package store

import (
	"errors"

	"github.com/mkit-dev/mkitfdb/gen/wire"
)

// Errors of the Store contract and of Transact, usable with errors.Is.
// Every error a Store returns wraps exactly one of them, and its message
// names the partition (and, where it knows one, the key class), never a
// stored value. An error of Transact may wrap ErrUnknownResult beside
// another (see Transact).
var (
	// ErrInvalid: the caller's input is unusable: a batch over a capability
	// limit, an empty batch, a key or value over its bound, a malformed or
	// foreign cursor, a partition identity that cannot encode. Returned before
	// any I/O; nothing was written. It is the same sentinel generated codecs
	// wrap for values that cannot encode. An engine's open wraps it for a
	// configuration the user must change, such as a database path whose
	// directory is missing or that the process may not write: retrying does
	// not help, unlike ErrUnavailable.
	ErrInvalid = wire.ErrInvalid

	// ErrCorrupt: stored bytes do not decode. It is the same sentinel
	// generated decoders wrap, so a handler's decode error and a store's
	// read it up through one errors.Is.
	ErrCorrupt = wire.ErrCorrupt

	// ErrUnavailable: the store could not be reached or gave up (a
	// non-retryable engine error, retries exhausted, a failed probe). The
	// operation had no effect, except for Apply where ErrUnknownResult says
	// otherwise.
	ErrUnavailable = errors.New("store unavailable")

	// ErrUnknownResult: Apply could not learn whether its batch committed
	// (the context ended, or the engine gave up, while the commit was in
	// flight). The batch may have landed, or may still land later. Callers
	// re-read and rely on their preconditions. A batch replayed after it
	// landed fails a guard its own writes broke rather than applying twice,
	// but one whose guards still hold lands again: its unguarded writes can
	// undo another writer's change made in between (see Store.Apply).
	ErrUnknownResult = errors.New("batch commit result unknown")

	// ErrPreconditionFailed: Transact gave up on a batch whose preconditions
	// kept failing, because other writers kept changing the rows it read,
	// once its retries ran out. Apply itself reports a failed precondition
	// as an outcome, not an error. Nothing of the last attempt was written.
	ErrPreconditionFailed = errors.New("batch precondition failed")

	// ErrDeadlinePassed: Transact applied a batch whose deadline had passed
	// on the store's clock (Apply's DeadlinePassed outcome, which Transact
	// does not retry). Nothing of that attempt was written.
	ErrDeadlinePassed = errors.New("batch deadline passed")
)
