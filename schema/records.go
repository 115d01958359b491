package schema

// U64Value is a counter or timestamp value: outbox sequences, relay
// high-water marks, lease reconciliation times.
//
//mk:record version=1
type U64Value struct {
	Value uint64
}

// TimerRefV2 is a timer's reference entry (TimerRefKey) while the timer
// carries state beyond its due time: the attempts its handler failed
// since it last succeeded and the last failure's text (truncated), and,
// for a timer of a periodic kind, the scheduled time of the period it is
// retrying or snoozing in (0: its due time). A timer without such state
// has a U64Value entry instead, as every timer had before retry policies;
// the version byte tells them apart. It is of format 2 of the namespace:
// a process that reads only U64Value entries predates it.
//
//mk:record version=2 format=2
type TimerRefV2 struct {
	DueAtMs    uint64
	Attempts   uint32
	LastError  string `mk:"max=512"`
	PeriodAtMs uint64
}

// DeadLetterV1 is a dead letter's record (DeadLetterKey): when its timer
// became one (Unix milliseconds), the attempts it used, its last error's
// text (truncated), and whether the handler marked that error permanent.
//
//mk:record version=1
type DeadLetterV1 struct {
	AtMs      uint64
	Attempts  uint32
	LastError string `mk:"max=512"`
	Permanent bool
}

// RelayV1 is one queued relay row: writes to apply to a target partition,
// in order, exactly once in effect. Target is the target partition's
// tuple identity (store.IdentityOf), so a row may name a partition of any
// schema; 1024 bytes is fdblayer's default partition identity bound. Puts
// and deletes together are bounded by the outbox writer so a row always
// fits one target batch (98 writes plus the target's high-water guard and
// put is the 100-operation cap).
//
//mk:record version=1
type RelayV1 struct {
	Target  []byte     `mk:"max=1024"`
	Puts    []RelayPut `mk:"max=98"`
	Deletes [][]byte   `mk:"max=98,elem_max=10000"`
	AtMs    uint64
}

// RelayV2 is a queued relay row (RelayV1) with the trace context of the
// writer that queued it, so that its delivery continues the writer's
// trace. The outbox writes it only for a writer with an active span, and
// only at format 2 of the namespace: a process that reads only RelayV1
// rows predates it. Every other row is a RelayV1.
//
//mk:record version=2 format=2
type RelayV2 struct {
	Target  []byte     `mk:"max=1024"`
	Puts    []RelayPut `mk:"max=98"`
	Deletes [][]byte   `mk:"max=98,elem_max=10000"`
	AtMs    uint64
	Trace   TraceContext
}

// TraceContext is a W3C trace context (the traceparent and tracestate
// headers' content) as a row keeps it: the trace id, the id of the span
// that queued the row, the trace flags (bit 0: sampled), and the
// tracestate header's value, at most 512 bytes (the length W3C asks every
// participant to propagate; longer ones are cut by whole entries, as W3C
// says). A zero TraceID is no trace context.
type TraceContext struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   uint8
	State   []byte `mk:"max=512"`
}

// RelayPut is one put of a relay row.
type RelayPut struct {
	Key   []byte `mk:"max=10000"`
	Value []byte `mk:"max=100000"`
}

// RelayScanV1 is the relay's resumable scan over its queued rows: the
// cycle's end sequence, the last sequence checkpointed, and the targets
// blocked for the rest of the cycle: their tuple identities, sorted, at
// most 16.
//
//mk:record version=1
type RelayScanV1 struct {
	CycleEnd uint64
	Cursor   uint64
	Blocked  [][]byte `mk:"max=16,elem_max=1024,sorted"`
}

// RelayTimerV1 is the relay timer's value while a corrupt queued row
// holds its source back: the interval the timer was last moved by, which
// doubles at each fire that still finds a corrupt row, up to a cap. The
// timer of a source held by nothing has an empty value.
//
//mk:record version=1
type RelayTimerV1 struct {
	HoldMs uint64 `mk:"min=1"`
}

// Backlog totals the undelivered terminal outcomes of a partition.
//
//mk:record version=1
type Backlog struct {
	Rows  uint64
	Bytes uint64
}

// OutcomePendingV1 is the value of a pending outcome's index row
// (OutcomePendingKey): the source that queued the outcome, the key of its
// record in the partition, so that delivery reads the record without
// knowing its schema, and when it was queued (Unix milliseconds). A row
// queued before sources existed has an empty value instead.
//
//mk:record version=1
type OutcomePendingV1 struct {
	Source OutcomeSource
	Key    []byte `mk:"max=10000"`
	AtMs   uint64
}

// OutcomePendingV2 is a pending outcome's index row (OutcomePendingV1)
// with the trace context of the writer that queued the outcome, so that
// its delivery continues the writer's trace. The outbox writes it only for
// a writer with an active span, and only at format 2 of the namespace: a
// process that reads only OutcomePendingV1 rows predates it.
//
//mk:record version=2 format=2
type OutcomePendingV2 struct {
	Source OutcomeSource
	Key    []byte `mk:"max=10000"`
	AtMs   uint64
	Trace  TraceContext
}

// OutcomeTimer is the outcome-delivery timer's value: the backoff attempt
// and the opaque store cursor of the last examined pending row.
//
//mk:record version=1
type OutcomeTimer struct {
	Attempt uint32
	Cursor  []byte `mk:"max=4096"`
}

// WatermarkCheckpoint resumes a coordinator watermark scan: the
// coordinator partition's tuple identity, the scan-start
// ceiling, the partial minimum (never above the ceiling), the exact
// recovery and reconciliation markers observed at scan start (absent when
// nil), and the opaque store cursor.
//
//mk:record version=2
type WatermarkCheckpoint struct {
	Coordinator []byte `mk:"max=1024"`
	CeilingMs   uint64
	MinimumMs   uint64 `mk:"le=CeilingMs"`
	Recovery    []byte `mk:"max=100000,optional"`
	Reconcile   []byte `mk:"max=100000,optional"`
	Cursor      []byte `mk:"max=4096"`
}

// SchedulerLeaseV1 is a scheduler worker's claim on a partition: no other
// worker fires the partition's timers before ExpiresAtMs.
//
//mk:record version=1
type SchedulerLeaseV1 struct {
	Owner       string `mk:"max=128"`
	ExpiresAtMs uint64
}

// PauseV1 is an operator's pause (KindPauseKey, PartitionPauseKey): when
// it was made (Unix milliseconds), by whom and why. It is of format 2: a
// binary of format 1 knows no pause and would fire paused timers.
//
//mk:record version=1 format=2
type PauseV1 struct {
	AtMs   uint64
	Who    string `mk:"max=128"`
	Reason string `mk:"max=1024"`
}

// ReceiverNonceV1 is an accepted key's record: the end of its validity
// (after which no request bearing it can pass the receiver's window), and
// a random token naming the claim that wrote it, so that a claim knows its
// own row after an unknown commit result and a release removes only its
// own.
//
//mk:record version=1
type ReceiverNonceV1 struct {
	UntilMs uint64
	Token   uint64
}

// QuarantineV1 records a row moved aside by an operator: when (Unix
// milliseconds), who and why; the companion row moved with it, when the
// row was one of a pair (the reference entry of a timer row, whose value
// is a U64Value or a TimerRefV2), with its value; and what the partition's outcome backlog dropped by when the row
// was a pending outcome, which a restore adds back. The moved row's own
// value is kept beside it (QuarantineValueKey).
//
//mk:record version=1
type QuarantineV1 struct {
	AtMs           uint64
	Who            string `mk:"max=128"`
	Reason         string `mk:"max=1024"`
	Companion      []byte `mk:"max=10000,optional"`
	CompanionValue []byte `mk:"max=1024,optional"`
	BacklogRows    uint64
	BacklogBytes   uint64
}

// MigrationV1 is a migration's checkpoint (MigrationKey): the cursor the
// next page starts from (the migration's own bytes, 16,384 at most: a
// partition identity and a key fit), the identity of the partition its
// last page was in; the rows it read, rewrote (or moved) and left as they
// were (newer or corrupt), the pages whose commit conflicted and ran
// again, the pages and partitions done; when it started, was last
// checkpointed and finished (Unix milliseconds, 0: not yet); the runner
// that holds it (Owner) until LeaseUntilMs (0: released); and the error
// its last run stopped on ("" when none).
//
//mk:record version=1
type MigrationV1 struct {
	Cursor       []byte `mk:"max=16384"`
	Partition    []byte `mk:"max=1024"`
	Rows         uint64
	Rewritten    uint64
	Left         uint64
	Conflicts    uint64
	Pages        uint64
	Partitions   uint64
	StartedAtMs  uint64
	UpdatedAtMs  uint64
	DoneAtMs     uint64
	Owner        string `mk:"max=128"`
	LeaseUntilMs uint64
	LastError    string `mk:"max=512"`
}
