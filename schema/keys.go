package schema

// OutboxSequenceKey holds the last relay or outcome sequence allocated in a
// partition (a U64Value); the outbox writer guards it.
//
//mk:key tag=1
type OutboxSequenceKey struct{}

// RelayScanKey holds the relay's scan state (a RelayScanV1).
//
//mk:key tag=2
type RelayScanKey struct{}

// OutcomeBacklogKey holds the undelivered outcome totals (a Backlog).
//
//mk:key tag=3
type OutcomeBacklogKey struct{}

// LeaseRecoveryKey holds a coordinator's lease recovery marker (a
// LeaseRecovery).
//
//mk:key tag=4
type LeaseRecoveryKey struct{}

// LeaseReconcileKey holds the time a coordinator's lease table was last
// reconciled after a recovery (a U64Value, milliseconds).
//
//mk:key tag=5
type LeaseReconcileKey struct{}

// RelayKey holds one queued relay row (a RelayV1), ordered by sequence.
// Sequences start at 1; a stored sequence of 0 is corrupt.
//
//mk:key tag=16
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

// OutcomePendingKey indexes an undelivered terminal outcome by the
// sequence it was appended at.
//
//mk:key tag=18
type OutcomePendingKey struct {
	Seq           uint64
	ReservationID ReservationID
}

// LeasedShardKey holds a coordinator's lease of one ref shard (a
// LeasedShard).
//
//mk:key tag=19
type LeasedShardKey struct {
	Repo     RepoName
	ShardRef ShardRef
}

// RelayHighWaterKey holds, in a target partition, the highest relay
// sequence delivered from one source partition (a U64Value). Source is
// the source partition's tuple identity (store.IdentityOf).
//
//mk:key tag=20
type RelayHighWaterKey struct {
	Source []byte `mk:"max=1024"`
}

// ReservationKey holds one reservation (a ReservationV1).
//
//mk:key tag=21
type ReservationKey struct {
	ID ReservationID
}

// SchedulerLeaseKey holds the scheduler lease of a partition (a
// SchedulerLeaseV1): the worker firing its timers, until the lease expires.
//
//mk:key tag=6
type SchedulerLeaseKey struct{}

// TimerRefKey names the one timer of a (kind, reference) pair: it holds
// that timer's due time (a U64Value), so a writer can find, guard and move
// the timer without scanning. The timers package keeps it in step with the
// TimerKey row in every batch that writes either.
//
//mk:key tag=7
type TimerRefKey struct {
	Kind      uint16
	Reference string `mk:"max=256"`
}
