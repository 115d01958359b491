package store

import (
	"errors"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// Errors of the Store contract and of Transact, usable with errors.Is.
// Every error a Store returns wraps exactly one of them, and its message
// names the partition (and, where it knows one, the key class), never a
// stored value. An error of Transact may wrap ErrUnknownResult beside
// another (see [ErrUnknownResult]).
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

	// ErrNewerVersion: stored bytes hold a value of a version newer than
	// any this binary's schema declares for its key class, written by a
	// newer binary (during a rolling deploy, say). It is not ErrCorrupt:
	// a handler holds such a row and retries it, never skipping it. It is
	// the same sentinel generated decoders wrap (wire.ErrNewerVersion);
	// a Store itself never returns it.
	ErrNewerVersion = wire.ErrNewerVersion

	// ErrUnavailable: the store could not be reached or gave up (a
	// non-retryable engine error, retries exhausted, a failed probe). The
	// operation had no effect, except for Apply where ErrUnknownResult says
	// otherwise.
	ErrUnavailable = errors.New("store unavailable")

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

// ErrUnknownResult means that a commit's result is unknown: the context
// ended, or the engine gave up (FoundationDB's 1021
// commit_unknown_result), while the commit was in flight. The batch may
// have landed, and may still land later.
//
// A store may also meet an unknown result inside [Store.Apply] and retry
// the batch itself (fdblayer does), reporting what the retry found; it
// never reports Committed for a batch that may not have landed, and
// returns ErrUnknownResult when it cannot retry. Either way a batch can
// land twice, with other writers' commits in between, and its guards
// decide what that does:
//   - a key the batch guards is safe: a retry commits only where every
//     guard still holds, so it never overwrites a change another writer
//     made to a guarded key;
//   - a batch whose writes break its own guards ([Absent] of a key it puts,
//     [Equals] of a value it changes) lands at most once; its retry reports
//     PreconditionFailed, although the batch committed;
//   - a key the batch writes without guarding it is not safe: if its guards
//     still hold, the retry reports Committed and writes the key again, so
//     an unguarded put can overwrite a value another writer put after the
//     first landing, and an unguarded delete can delete a row another
//     writer recreated meanwhile;
//   - a WakeAt lowers the wake time again, at worst waking the partition
//     early; an Exact wakeup is guarded by its [WakeIs].
//
// A batch that guards every key it writes with what its builder read
// ([Guard]) is therefore never applied over another writer's change. Each
// of the library's handlers' batches guards a row it changes (a sequence, a
// high-water mark, a timer row), so it lands at most once, and a
// PreconditionFailed only makes the handler re-read and find its work done.
//
// Callers re-read and decide. [Transact] runs its function again rather
// than replay the batch (see [TransactFunc]): the function finds its own
// work done or builds its batch afresh; one that cannot recognise its own
// work, such as an increment guarded by the counter alone, applies twice.
// When Transact then fails for another reason, its error wraps
// ErrUnknownResult beside the cause, so that the failure never reads as
// "nothing written".
var ErrUnknownResult = errors.New("batch commit result unknown")
