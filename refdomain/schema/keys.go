package schema

// ReservationID names one reservation; ids that start with "s:" are
// synthetic (acknowledged locally, never sent to a sink).
//
//mk:identity min=1 max=128
type ReservationID string

// ReservationKey holds one reservation (a ReservationV1). A terminal
// reservation's outcome is queued for delivery under the same id (the
// library's OutcomePendingKey).
//
//mk:key tag=100 value=ReservationV1
type ReservationKey struct {
	ID ReservationID
}

// LeasedShardKey holds a coordinator's lease of one ref shard (a
// LeasedShard).
//
//mk:key tag=101 value=LeasedShard
type LeasedShardKey struct {
	Repo     RepoName
	ShardRef ShardRef
}

// LeaseRecoveryKey holds a coordinator's lease recovery marker (a
// LeaseRecovery).
//
//mk:key tag=102 value=LeaseRecovery
type LeaseRecoveryKey struct{}

// LeaseReconcileKey holds the time a coordinator's lease table was last
// reconciled after a recovery (the library's U64Value, milliseconds).
//
//mk:key tag=103
type LeaseReconcileKey struct{}
