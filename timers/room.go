package timers

import (
	"math"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// OutcomeOps is the most operations RunDue adds to a handler's batch to
// make a timer's outcome: the guards of the timer row and its reference
// entry, a Reschedule's (or a periodic kind's Done's) three writes (the
// old row's delete, the new row and the reference entry), a Scheduler
// claim's lease guard and the claim's release (the lease's delete and the
// wake time's guard), so that the release lands with the run's last
// outcome instead of in a transaction of its own.
const OutcomeOps = 2 + 3 + 1 + 2

// HandlerCapabilities returns caps less what RunDue adds to the batch of
// timer t's outcome: OutcomeOps more ReservedBatchOps, and MaxBatchBytes
// less the bytes of the timer's guards and change (its row's key and value,
// the moved row at any due time, its reference entry as read, with its
// failed attempts and last error, and as rewritten) and of a Scheduler
// claim's lease guard and release. A handler whose batch passes
// Validate(HandlerCapabilities(caps, t)) returns an outcome that fits one
// batch of a store with caps, whatever the outcome (Done, Reschedule,
// Retry), with a claim or without; a Reschedule whose Value is larger
// than t's needs that much more room. RunDue commits several timers'
// outcomes together only as far as the store's limits allow, so each
// handler may use all of this room. A handler's batch that does not fit
// fails its timer (see Report.Failed).
func HandlerCapabilities(caps store.Capabilities, t DueTimer) store.Capabilities {
	caps.ReservedBatchOps += OutcomeOps
	caps.MaxBatchBytes -= outcomeBytes(t)
	return caps
}

// outcomeBytes is the most key and value bytes RunDue adds to a handler's
// batch for timer t's outcome (see HandlerCapabilities).
func outcomeBytes(t DueTimer) int {
	refKey, _ := RefKey(t.Kind, t.Reference) // t's own: its reference is in bounds
	moved, _ := timerKey(math.MaxUint64, t.Kind, t.Reference)
	ref := len(encodeRef(math.MaxUint64))
	// The guard requires the entry as read: with failed attempts, a last
	// error or a period's time it is a TimerRefV2. Done and Reschedule
	// write a U64Value.
	guardRef := ref
	if t.Attempts > 0 || t.LastError != "" || !t.Period.IsZero() {
		guardRef = len(encodeRefState(refState{due: math.MaxUint64, attempts: math.MaxUint32, lastErr: t.LastError, periodAt: math.MaxUint64, format: gen.SchemaFormat}))
	}
	guards := len(t.Key) + len(t.Value) + len(refKey) + guardRef
	change := len(t.Key) + len(moved) + len(t.Value) + len(refKey) + ref
	return guards + change + leaseGuardBytes + len(gen.AppendSchedulerLeaseKey(nil))
}

// leaseGuardBytes is the most bytes a Scheduler claim's lease guard adds
// to an outcome batch: the lease key and the longest lease.
var leaseGuardBytes = func() int {
	owner := make([]byte, gen.MaxSchedulerLeaseV1Owner)
	lease, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: string(owner), ExpiresAtMs: math.MaxUint64})
	if err != nil {
		panic("timers: the longest lease does not encode: " + err.Error())
	}
	return len(gen.AppendSchedulerLeaseKey(nil)) + len(lease)
}()
