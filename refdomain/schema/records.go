package schema

// AbortReason says why a reservation was aborted.
//
//mk:enum
type AbortReason uint8

const (
	AbortReasonRefConflict   AbortReason = 1
	AbortReasonQuotaExceeded AbortReason = 2
	AbortReasonExpired       AbortReason = 3
	AbortReasonRejected      AbortReason = 4
	AbortReasonInternal      AbortReason = 5
)

// ReservationV1 is a reservation: ticketed while in flight, then committed
// or aborted (its terminal outcome).
//
//mk:record version=1 union
type ReservationV1 struct {
	Ticketed  *ReservationTicketed  `mk:"tag=1"`
	Committed *ReservationCommitted `mk:"tag=2"`
	Aborted   *ReservationAborted   `mk:"tag=3"`
}

// ReservationTicketed is a reservation in flight.
type ReservationTicketed struct {
	TicketID [32]byte
}

// ReservationCommitted is a reservation that committed its refs.
type ReservationCommitted struct {
	Repository   RepoName
	OccurredAtMs uint64
	BytesStored  uint64
	NewToRepo    uint64
	NewToStore   uint64
	Refs         []RefUpdate `mk:"max=64"`
}

// RefUpdate is one ref a committed reservation moved.
type RefUpdate struct {
	Ref    ShardRef
	OldOID []byte `mk:"max=32"`
	NewOID []byte `mk:"max=32"`
}

// ReservationAborted is a reservation that was aborted.
type ReservationAborted struct {
	Repository   RepoName
	OccurredAtMs uint64
	Reason       AbortReason
	Detail       string `mk:"max=1024"`
}

// LeasedShard is a coordinator's lease of one ref shard, with the running
// maximum of the shard's relay watermark.
//
//mk:record version=1
type LeasedShard struct {
	AuthorityGeneration      *uint64
	AckedAuthorityGeneration *uint64
	Epoch                    uint64
	ExpiresAtMs              uint64
	AckedEpoch               uint64
	RelayWatermarkMs         uint64
	SweepDueMs               uint64
}

// LeaseRecovery marks that a coordinator's lease table was restored.
// Recovery-time rule: a marker whose ActivationOnly is true records a
// first activation, not a recovery, and has no recovery time; any other
// marker's recovery time is ResumedAtMs. While a recovery time exists and
// no reconciliation later than it is recorded, the lease table is
// recovering and watermark reads fail closed.
//
//mk:record version=1
type LeaseRecovery struct {
	AuthorityFence *uint64
	AuthorityReady *uint64
	ActivationOnly *bool
	ResumedAtMs    uint64
}
