package telemetry

// Label names used by the library: one name per concept.
const (
	// LabelPartitionKind is the kind of the partition a sample is about
	// (store.Partition.Kind: "ref", "namespace", ...): the partition a
	// timer, a relay source or an outbox lives in.
	LabelPartitionKind = "partition_kind"
	// LabelTimerKind is a timer's kind, in decimal.
	LabelTimerKind = "timer_kind"
	// LabelMigration is a migration's name (evolve.Migration.Name): a few
	// per store, chosen by the program, never identity data.
	LabelMigration = "migration"
)

// The catalogue: every metric the library emits. Gauges are plain nouns;
// counters end in _total. Units are UCUM, as OpenTelemetry's semantic
// conventions spell them: "By" for bytes, and a count of things is the
// thing's name in braces ("{row}", "{timer}").
var (
	// MetricRelayBacklogRows: an upper bound on the relay rows queued in a
	// source partition, set at each relay fire.
	MetricRelayBacklogRows = &Desc{
		name: "mkitfdb_relay_backlog_rows", typ: Gauge, unit: "{row}", labels: []string{LabelPartitionKind},
		help: "Upper bound on the relay rows queued in a source partition.",
	}
	// MetricRelayLagExceeded: relay fires that found a queued row older
	// than the relay lag bound.
	MetricRelayLagExceeded = &Desc{
		name: "mkitfdb_relay_lag_exceeded_total", typ: Counter, unit: "{fire}", labels: []string{LabelPartitionKind},
		help: "Relay fires that found a queued row older than the relay lag bound.",
	}
	// MetricRelayNewerRows: relay fires stopped by a queued row of a newer
	// version than this binary reads (store.ErrNewerVersion): the source
	// is held, as by a corrupt row, until a binary that reads it fires it.
	MetricRelayNewerRows = &Desc{
		name: "mkitfdb_relay_newer_rows_total", typ: Counter, unit: "{row}", labels: []string{LabelPartitionKind},
		help: "Relay fires stopped by a queued row of a newer version than this binary reads.",
	}
	// MetricOutboxBacklogRows: undelivered terminal outcomes of a
	// partition, set at each outcome-delivery fire.
	MetricOutboxBacklogRows = &Desc{
		name: "mkitfdb_outbox_backlog_rows", typ: Gauge, unit: "{row}", labels: []string{LabelPartitionKind},
		help: "Undelivered terminal outcomes of a partition.",
	}
	// MetricOutboxBacklogBytes: the bytes of the terminal records of a
	// partition's undelivered outcomes, set at each outcome-delivery fire.
	MetricOutboxBacklogBytes = &Desc{
		name: "mkitfdb_outbox_backlog_bytes", typ: Gauge, unit: "By", labels: []string{LabelPartitionKind},
		help: "Bytes of the terminal records of a partition's undelivered outcomes.",
	}
	// MetricSyntheticOutcomesAcked: synthetic outcomes (of a source's
	// outcome.SourceConfig.Synthetic) acknowledged locally instead of sent
	// to a sink.
	MetricSyntheticOutcomesAcked = &Desc{
		name: "mkitfdb_synthetic_outcomes_acked_total", typ: Counter, unit: "{outcome}",
		help: "Synthetic outcomes acknowledged locally instead of sent to a sink.",
	}
	// MetricOutcomeNewerRows: pending outcomes passed over in a delivery
	// fire because their pending row or their record is of a newer version
	// than this binary reads (store.ErrNewerVersion): kept, and delivered
	// by a binary that reads them.
	MetricOutcomeNewerRows = &Desc{
		name: "mkitfdb_outcome_newer_rows_total", typ: Counter, unit: "{row}", labels: []string{LabelPartitionKind},
		help: "Pending outcomes passed over because their row or record is of a newer version than this binary reads.",
	}
	// MetricTimersFired: timers whose handler ran and whose Done or
	// Reschedule committed.
	MetricTimersFired = &Desc{
		name: "mkitfdb_timers_fired_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind, LabelTimerKind},
		help: "Timers whose handler ran and whose Done or Reschedule committed.",
	}
	// MetricTimersRetried: timers whose handler asked for a Retry that
	// committed.
	MetricTimersRetried = &Desc{
		name: "mkitfdb_timers_retried_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind, LabelTimerKind},
		help: "Timers whose handler asked for a retry that committed.",
	}
	// MetricTimersRaced: timer outcomes whose guards failed (the timer, or
	// a row the handler guarded, changed between the fire and the apply).
	MetricTimersRaced = &Desc{
		name: "mkitfdb_timers_raced_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind, LabelTimerKind},
		help: "Timer outcomes whose guards failed because a row changed meanwhile.",
	}
	// MetricTimersFailed: timers whose handler returned an error,
	// panicked, or returned an outcome the store rejected.
	MetricTimersFailed = &Desc{
		name: "mkitfdb_timers_failed_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind, LabelTimerKind},
		help: "Timers whose handler failed, panicked or returned an outcome the store rejected.",
	}
	// MetricTimersUnknownKind: due timers of a kind no handler is
	// registered for, counted once per kind per run.
	MetricTimersUnknownKind = &Desc{
		name: "mkitfdb_timers_unknown_kind_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind, LabelTimerKind},
		help: "Due timers of a kind no handler is registered for, once per kind per run.",
	}
	// MetricTimersCorrupt: due timers not fired because their key,
	// reference entry or value is corrupt (left in place), or because their
	// handler found corrupt data (moved HeldBackoff later).
	MetricTimersCorrupt = &Desc{
		name: "mkitfdb_timers_corrupt_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind},
		help: "Due timers not fired because their row is corrupt or their handler found corrupt data.",
	}
	// MetricTimersNewer: due timers not fired because their reference
	// entry is of a newer version than this binary reads (left in place),
	// or their handler met a row of a newer version (store.ErrNewerVersion;
	// moved HeldBackoff later): a binary that reads it fires them.
	MetricTimersNewer = &Desc{
		name: "mkitfdb_timers_newer_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind},
		help: "Due timers not fired because their entry, or a row their handler read, is of a newer version than this binary reads.",
	}
	// MetricTimersDeadLettered: timers made dead letters, their retry
	// policy's attempts used or their handler's error permanent.
	MetricTimersDeadLettered = &Desc{
		name: "mkitfdb_timers_dead_lettered_total", typ: Counter, unit: "{timer}", labels: []string{LabelPartitionKind, LabelTimerKind},
		help: "Timers made dead letters: their retry policy's attempts used, or their handler's error permanent.",
	}
	// MetricSchedulerTicks: Scheduler.Tick calls.
	MetricSchedulerTicks = &Desc{
		name: "mkitfdb_scheduler_ticks_total", typ: Counter, unit: "{tick}",
		help: "Scheduler ticks.",
	}
	// MetricSchedulerClaimed: partitions claimed and run.
	MetricSchedulerClaimed = &Desc{
		name: "mkitfdb_scheduler_partitions_claimed_total", typ: Counter, unit: "{partition}", labels: []string{LabelPartitionKind},
		help: "Partitions the scheduler claimed and ran.",
	}
	// MetricSchedulerContended: due partitions skipped because another
	// worker held their lease or won the claim.
	MetricSchedulerContended = &Desc{
		name: "mkitfdb_scheduler_lease_contended_total", typ: Counter, unit: "{partition}", labels: []string{LabelPartitionKind},
		help: "Due partitions skipped because another worker held their lease or won the claim.",
	}
	// MetricSchedulerLeaseLost: runs whose lease was no longer theirs at
	// the finishing batch.
	MetricSchedulerLeaseLost = &Desc{
		name: "mkitfdb_scheduler_lease_lost_total", typ: Counter, unit: "{run}", labels: []string{LabelPartitionKind},
		help: "Partition runs whose lease was no longer theirs at the finishing batch.",
	}
	// MetricSchedulerRecovered: claims that took over another owner's
	// expired lease.
	MetricSchedulerRecovered = &Desc{
		name: "mkitfdb_scheduler_leases_recovered_total", typ: Counter, unit: "{lease}", labels: []string{LabelPartitionKind},
		help: "Claims that took over another owner's expired lease.",
	}
	// MetricSchedulerRequeued: runs the budget cut, left due for the next
	// tick.
	MetricSchedulerRequeued = &Desc{
		name: "mkitfdb_scheduler_requeued_total", typ: Counter, unit: "{run}", labels: []string{LabelPartitionKind},
		help: "Partition runs the budget cut, left due for the next tick.",
	}
	// MetricSchedulerStale: due index entries whose partition's wake time
	// had moved on when looked at.
	MetricSchedulerStale = &Desc{
		name: "mkitfdb_scheduler_stale_entries_total", typ: Counter, unit: "{entry}", labels: []string{LabelPartitionKind},
		help: "Due index entries whose partition's wake time had moved on when looked at.",
	}
	// MetricSchedulerCorrupt: due index entries whose identity names no
	// partition, and leases that do not decode.
	MetricSchedulerCorrupt = &Desc{
		name: "mkitfdb_scheduler_corrupt_total", typ: Counter, unit: "{row}",
		help: "Due index entries that name no partition, and leases that do not decode.",
	}
	// MetricSchedulerErrors: partitions whose claim, run or finishing
	// batch failed.
	MetricSchedulerErrors = &Desc{
		name: "mkitfdb_scheduler_partition_errors_total", typ: Counter, unit: "{partition}", labels: []string{LabelPartitionKind},
		help: "Partitions whose claim, run or finishing batch failed.",
	}
)

// The migrations' metrics (package evolve's Runner), emitted as each page
// is checkpointed.
var (
	// MetricMigrationRows: rows a migration's pages read.
	MetricMigrationRows = &Desc{
		name: "mkitfdb_migration_rows_total", typ: Counter, unit: "{row}", labels: []string{LabelMigration},
		help: "Rows a migration's pages read.",
	}
	// MetricMigrationRowsRewritten: rows a migration rewrote or moved.
	MetricMigrationRowsRewritten = &Desc{
		name: "mkitfdb_migration_rows_rewritten_total", typ: Counter, unit: "{row}", labels: []string{LabelMigration},
		help: "Rows a migration rewrote or moved.",
	}
	// MetricMigrationRowsLeft: rows a migration left as they were (of a
	// newer version, corrupt), and regions of partitions it could not
	// tell apart, each logged.
	MetricMigrationRowsLeft = &Desc{
		name: "mkitfdb_migration_rows_left_total", typ: Counter, unit: "{row}", labels: []string{LabelMigration},
		help: "Rows a migration left as they were (newer or corrupt), and regions it could not split, each logged.",
	}
	// MetricMigrationPages: pages a migration checkpointed.
	MetricMigrationPages = &Desc{
		name: "mkitfdb_migration_pages_total", typ: Counter, unit: "{page}", labels: []string{LabelMigration},
		help: "Pages a migration checkpointed.",
	}
	// MetricMigrationConflicts: runs of a migration's pages that a
	// concurrent writer made run again (a failed guard or a conflict).
	MetricMigrationConflicts = &Desc{
		name: "mkitfdb_migration_conflicts_total", typ: Counter, unit: "{conflict}", labels: []string{LabelMigration},
		help: "Runs of a migration's pages that a concurrent writer made run again.",
	}
	// MetricMigrationPartitions: partitions a migration finished.
	MetricMigrationPartitions = &Desc{
		name: "mkitfdb_migration_partitions_total", typ: Counter, unit: "{partition}", labels: []string{LabelMigration},
		help: "Partitions a migration finished.",
	}
	// MetricMigrationDone: 1 once a migration is done, 0 while a runner
	// runs it.
	MetricMigrationDone = &Desc{
		name: "mkitfdb_migration_done", typ: Gauge, unit: "{migration}", labels: []string{LabelMigration},
		help: "1 once a migration is done, 0 while a runner runs it.",
	}
)

// catalogue lists every Desc above; Check accepts only these.
var catalogue = []*Desc{
	MetricRelayBacklogRows,
	MetricRelayLagExceeded,
	MetricRelayNewerRows,
	MetricOutboxBacklogRows,
	MetricOutboxBacklogBytes,
	MetricSyntheticOutcomesAcked,
	MetricOutcomeNewerRows,
	MetricTimersFired,
	MetricTimersRetried,
	MetricTimersRaced,
	MetricTimersFailed,
	MetricTimersUnknownKind,
	MetricTimersCorrupt,
	MetricTimersNewer,
	MetricTimersDeadLettered,
	MetricSchedulerTicks,
	MetricSchedulerClaimed,
	MetricSchedulerContended,
	MetricSchedulerLeaseLost,
	MetricSchedulerRecovered,
	MetricSchedulerRequeued,
	MetricSchedulerStale,
	MetricSchedulerCorrupt,
	MetricSchedulerErrors,
	MetricMigrationRows,
	MetricMigrationRowsRewritten,
	MetricMigrationRowsLeft,
	MetricMigrationPages,
	MetricMigrationConflicts,
	MetricMigrationPartitions,
	MetricMigrationDone,
}
