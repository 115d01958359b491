package mpack

// The msgp mode. This file (package mpack) is in map mode, where decoding
// into a reused value must not keep a variant the input omits; its copy in
// ../mtuple replaces the directive below with //msgp:tuple for every type.
//
//msgp:clearomitted

// RelayPut is gen.RelayPut.
type RelayPut struct {
	Key   []byte `msg:"key,zerocopy"`
	Value []byte `msg:"value,zerocopy"`
}

// RelayV1 is gen.RelayV1.
type RelayV1 struct {
	Target  []byte     `msg:"target,zerocopy"`
	Puts    []RelayPut `msg:"puts"`
	Deletes [][]byte   `msg:"deletes,zerocopy"`
	AtMs    uint64     `msg:"at_ms"`
}

// ReservationTicketed is refdomain.ReservationTicketed.
type ReservationTicketed struct {
	TicketID [32]byte `msg:"ticket_id"`
}

// RefUpdate is refdomain.RefUpdate.
type RefUpdate struct {
	Ref    string `msg:"ref"`
	OldOID []byte `msg:"old_oid,zerocopy"`
	NewOID []byte `msg:"new_oid,zerocopy"`
}

// ReservationCommitted is refdomain.ReservationCommitted.
type ReservationCommitted struct {
	Repository   string      `msg:"repository"`
	OccurredAtMs uint64      `msg:"occurred_at_ms"`
	BytesStored  uint64      `msg:"bytes_stored"`
	NewToRepo    uint64      `msg:"new_to_repo"`
	NewToStore   uint64      `msg:"new_to_store"`
	Refs         []RefUpdate `msg:"refs"`
}

// ReservationAborted is refdomain.ReservationAborted; Reason holds the
// refdomain.AbortReason value.
type ReservationAborted struct {
	Repository   string `msg:"repository"`
	OccurredAtMs uint64 `msg:"occurred_at_ms"`
	Reason       uint8  `msg:"reason"`
	Detail       string `msg:"detail"`
}

// ReservationV1 is refdomain.ReservationV1: exactly one state is set.
type ReservationV1 struct {
	Ticketed  *ReservationTicketed  `msg:"ticketed,omitempty"`
	Committed *ReservationCommitted `msg:"committed,omitempty"`
	Aborted   *ReservationAborted   `msg:"aborted,omitempty"`
}
