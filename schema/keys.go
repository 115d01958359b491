package schema

// OutboxSequenceKey holds the last relay or outcome sequence allocated in a
// partition (a U64Value); the outbox writer guards it.
//
//mk:key tag=1 value=U64Value
type OutboxSequenceKey struct{}

// RelayScanKey holds the relay's scan state (a RelayScanV1).
//
//mk:key tag=2 value=RelayScanV1
type RelayScanKey struct{}

// OutcomeBacklogKey holds the undelivered outcome totals (a Backlog).
//
//mk:key tag=3 value=Backlog
type OutcomeBacklogKey struct{}

// RelayKey holds one queued relay row (a RelayV1, or a RelayV2 carrying
// its writer's trace context), ordered by sequence. Sequences start at 1;
// a stored sequence of 0 is corrupt.
//
//mk:key tag=16 value=RelayV1,RelayV2
type RelayKey struct {
	Seq uint64
}

// TimerKey holds one durable timer, ordered by due time; the value is
// owned by the timer's handler.
//
//mk:key tag=17
type TimerKey struct {
	DueAtMs   uint64
	Kind      uint16
	Reference string `mk:"max=256"`
}

// OutcomeID names an outcome queued for delivery: the id its source gives
// it (the id of its envelope, which receivers deduplicate by). Rows
// queued before outcome sources existed hold a reservation id of the
// reference domain.
//
//mk:identity min=1 max=256
type OutcomeID string

// OutcomeSource names the outcome source (package outcome) that queued a
// pending outcome.
//
//mk:identity min=1 max=64
type OutcomeSource string

// OutcomePendingKey indexes an undelivered terminal outcome by the
// sequence it was appended at; its value (an OutcomePendingV1, or an
// OutcomePendingV2 carrying its writer's trace context) names the
// outcome's source and record.
//
//mk:key tag=18 value=OutcomePendingV1,OutcomePendingV2
type OutcomePendingKey struct {
	Seq uint64
	ID  OutcomeID
}

// RelayHighWaterKey holds, in a target partition, the highest relay
// sequence delivered from one source partition (a U64Value). Source is
// the source partition's tuple identity (store.IdentityOf).
//
//mk:key tag=20 value=U64Value
type RelayHighWaterKey struct {
	Source []byte `mk:"max=1024"`
}

// SchedulerLeaseKey holds the scheduler lease of a partition (a
// SchedulerLeaseV1): the worker firing its timers, until the lease expires.
//
//mk:key tag=6 value=SchedulerLeaseV1
type SchedulerLeaseKey struct{}

// SchedulerMemberKey holds, in the schedulers' own partition
// (timers.MembersPartition), one Scheduler's membership (a
// SchedulerLeaseV1: its owner, live until ExpiresAtMs). The schedulers
// sharing a store share out the due index's buckets by it.
//
//mk:key tag=8
type SchedulerMemberKey struct {
	Owner string `mk:"max=128"`
}

// TimerRefKey names the one timer of a (kind, reference) pair: it holds
// that timer's due time, so a writer can find, guard and move the timer
// without scanning: a U64Value, or a TimerRefV2 while the timer carries
// failed attempts or a period's scheduled time. The timers package keeps
// it in step with the TimerKey row in every batch that writes either, and
// reads it through TimerRefKeyValues (its TimerRefKeyVersions upgrades a
// U64Value to a TimerRefV2 of the same due time).
//
//mk:key tag=7 value=U64Value,TimerRefV2
type TimerRefKey struct {
	Kind      uint16
	Reference string `mk:"max=256"`
}

// DeadLetterKey holds a dead letter (a DeadLetterV1): a timer that used
// its retry policy's attempts or failed with an error its handler marked
// permanent, moved out of the timer rows so that it never fires again on
// its own, until an operator re-drives or deletes it. DueAtMs is the due
// time of its last fire. Its value row is DeadLetterValueKey's.
//
//mk:key tag=9 value=DeadLetterV1
type DeadLetterKey struct {
	Kind      uint16
	Reference string `mk:"max=256"`
	DueAtMs   uint64
}

// KindPauseKey holds, in the schedulers' partition
// (timers.MembersPartition), an operator's pause of one timer kind for the
// whole store (a PauseV1: who, when, why): no Scheduler fires a timer of
// the kind while it is there, and the timers keep their place.
//
//mk:key tag=11 value=PauseV1
type KindPauseKey struct {
	Kind uint16
}

// PauseGenerationKey holds, in the schedulers' partition, how many times
// a kind pause was resumed (a U64Value): the generation a Scheduler writes
// the wake time of a partition it left timers in for a pause under, so
// that a resume makes every such partition due again.
//
//mk:key tag=12 value=U64Value
type PauseGenerationKey struct{}

// PartitionPauseKey holds an operator's pause of its partition's queues
// (a PauseV1): no Scheduler fires the partition's relay and outcome
// delivery timers (the library's kinds) while it is there.
//
//mk:key tag=13 value=PauseV1
type PartitionPauseKey struct{}

// DeadLetterValueKey holds a dead letter's timer value, byte for byte (the
// handler's own value: no record wraps it). It is written and deleted with
// its DeadLetterKey row.
//
//mk:key tag=10
type DeadLetterValueKey struct {
	Kind      uint16
	Reference string `mk:"max=256"`
	DueAtMs   uint64
}

// ReceiverNonceKey holds a key an outcome receiver accepted (a
// ReceiverNonceV1): a request's nonce or a Standard Webhooks message id,
// kept in the receiving service's partition until it expires, so that
// every replica of the receiver refuses a replay any of them accepted.
//
//mk:key tag=40 value=ReceiverNonceV1
type ReceiverNonceKey struct {
	Key string `mk:"max=320"`
}

// ReceiverNonceExpiryKey indexes the ReceiverNonceKey rows by expiry, for
// the sweep that deletes expired ones; its value is the indexed row's
// value, which the sweep's delete is guarded by. A ReceiverNonceKey row
// and its index row are written and deleted together.
//
//mk:key tag=41 value=ReceiverNonceV1
type ReceiverNonceExpiryKey struct {
	UntilMs uint64
	Key     string `mk:"max=320"`
}

// ReceiverReplayKey holds a key an outcome receiver claimed for a sender
// (a ReceiverNonceV1): a request's nonce, a Standard Webhooks message id,
// or an attempt's digest (package outcome says which), kept in the
// receiving service's partition until it expires, so that every replica
// of the receiver refuses a replay any of them accepted. Sender is the
// name the receiver is configured with, so that receivers of several
// senders share a partition without refusing each other's keys. It
// replaces ReceiverNonceKey, whose rows, written without a sender, are
// honoured until they expire.
//
//mk:key tag=42 value=ReceiverNonceV1
type ReceiverReplayKey struct {
	Sender string `mk:"max=128"`
	Key    string `mk:"max=320"`
}

// ReceiverReplayExpiryKey indexes the ReceiverReplayKey rows by expiry,
// for the sweep that deletes expired ones; its value is the indexed row's
// value, which the sweep's delete is guarded by. A ReceiverReplayKey row
// and its index row are written and deleted together.
//
//mk:key tag=43 value=ReceiverNonceV1
type ReceiverReplayExpiryKey struct {
	UntilMs uint64
	Sender  string `mk:"max=128"`
	Key     string `mk:"max=320"`
}

// QuarantineKey holds a row an operator moved aside from a queue of its
// partition (mkitfdb quarantine): who, when and why, and the rows moved
// (a QuarantineV1). Key is the moved row's own key, so a row is
// quarantined at most once at a time and restored by naming it. No
// handler reads this range: a quarantined row is gone from its queue.
//
//mk:key tag=50 value=QuarantineV1
type QuarantineKey struct {
	Key []byte `mk:"max=10000"`
}

// QuarantineValueKey holds the value of the row at Key, as it was when it
// was moved aside, byte for byte (the moved row's own value, whatever it
// is: no record wraps it, so a value of any size the store takes is
// kept). It is written and deleted with its QuarantineKey row.
//
//mk:key tag=51
type QuarantineValueKey struct {
	Key []byte `mk:"max=10000"`
}

// MigrationKey holds, in the library's store partition
// (evolve.Partition), the checkpoint of one migration (a MigrationV1),
// named by the migration for ever: where it stopped, what it did, and the
// runner that holds it until when.
//
//mk:key tag=63 value=MigrationV1
type MigrationKey struct {
	Name string `mk:"max=128"`
}
