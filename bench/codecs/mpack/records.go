package mpack

// The msgp mode. This file (package mpack) is in map mode, where decoding
// into a reused value must not keep a variant the input omits; its copy in
// ../mtuple replaces the directive below with //msgp:tuple for every type.
//
//msgp:clearomitted

// RefPartition is gen.RefPartition.
type RefPartition struct {
	NS       string `msg:"ns"`
	Repo     string `msg:"repo"`
	ShardRef string `msg:"shard_ref"`
}

// NamespacePartition is gen.NamespacePartition.
type NamespacePartition struct {
	NS string `msg:"ns"`
}

// CoordinatorPartition is gen.CoordinatorPartition.
type CoordinatorPartition struct {
	NS string `msg:"ns"`
}

// RepoIndexPartition is gen.RepoIndexPartition.
type RepoIndexPartition struct {
	NS   string `msg:"ns"`
	Repo string `msg:"repo"`
}

// RefIndexPartition is gen.RefIndexPartition.
type RefIndexPartition struct {
	NS       string `msg:"ns"`
	Repo     string `msg:"repo"`
	ShardRef string `msg:"shard_ref"`
}

// ContentShardPartition is gen.ContentShardPartition.
type ContentShardPartition struct {
	NS    string `msg:"ns"`
	Shard uint32 `msg:"shard"`
}

// Partition is gen.Partition: exactly one variant is set.
type Partition struct {
	Ref          *RefPartition          `msg:"ref,omitempty"`
	Namespace    *NamespacePartition    `msg:"namespace,omitempty"`
	Coordinator  *CoordinatorPartition  `msg:"coordinator,omitempty"`
	RepoIndex    *RepoIndexPartition    `msg:"repo_index,omitempty"`
	RefIndex     *RefIndexPartition     `msg:"ref_index,omitempty"`
	ContentShard *ContentShardPartition `msg:"content_shard,omitempty"`
}

// RelayPut is gen.RelayPut.
type RelayPut struct {
	Key   []byte `msg:"key,zerocopy"`
	Value []byte `msg:"value,zerocopy"`
}

// RelayV1 is gen.RelayV1.
type RelayV1 struct {
	Target  Partition  `msg:"target"`
	Puts    []RelayPut `msg:"puts"`
	Deletes [][]byte   `msg:"deletes,zerocopy"`
	AtMs    uint64     `msg:"at_ms"`
}

// ReservationTicketed is gen.ReservationTicketed.
type ReservationTicketed struct {
	TicketID [32]byte `msg:"ticket_id"`
}

// RefUpdate is gen.RefUpdate.
type RefUpdate struct {
	Ref    string `msg:"ref"`
	OldOID []byte `msg:"old_oid,zerocopy"`
	NewOID []byte `msg:"new_oid,zerocopy"`
}

// ReservationCommitted is gen.ReservationCommitted.
type ReservationCommitted struct {
	Repository   string      `msg:"repository"`
	OccurredAtMs uint64      `msg:"occurred_at_ms"`
	BytesStored  uint64      `msg:"bytes_stored"`
	NewToRepo    uint64      `msg:"new_to_repo"`
	NewToStore   uint64      `msg:"new_to_store"`
	Refs         []RefUpdate `msg:"refs"`
}

// ReservationAborted is gen.ReservationAborted; Reason holds the
// gen.AbortReason value.
type ReservationAborted struct {
	Repository   string `msg:"repository"`
	OccurredAtMs uint64 `msg:"occurred_at_ms"`
	Reason       uint8  `msg:"reason"`
	Detail       string `msg:"detail"`
}

// ReservationV1 is gen.ReservationV1: exactly one state is set.
type ReservationV1 struct {
	Ticketed  *ReservationTicketed  `msg:"ticketed,omitempty"`
	Committed *ReservationCommitted `msg:"committed,omitempty"`
	Aborted   *ReservationAborted   `msg:"aborted,omitempty"`
}
