// Package telemetry is the library's small metrics interface: gauges and
// counters with labels, a no-op default, and an in-memory Recorder for
// tests. Package telemetry/prom adapts it to Prometheus.
//
// Every metric the library emits is named by a constant of this package;
// Help describes each. Label names are constants too, so a dashboard can be
// written against this file alone. A metric name is always used with the
// same label names (in any order); adapters may drop a sample that breaks
// this, and say so in their logs.
package telemetry

// Label is one label of a sample: a name and its value. Values never hold
// identity data (a partition's name, a reservation id): only kinds and
// units, so that series stay few.
type Label struct {
	Name  string
	Value string
}

// Metrics receives the library's samples. Implementations are safe for
// concurrent use, never block on I/O in these calls, and never panic: a
// sample they cannot record is dropped (and logged, where they can log).
// The labels slice is not retained past the call.
type Metrics interface {
	// Gauge sets the gauge name with labels to v.
	Gauge(name string, labels []Label, v float64)
	// Add adds delta to the counter name with labels.
	Add(name string, labels []Label, delta uint64)
}

// Noop is a Metrics that records nothing: the default wherever a Metrics is
// optional.
type Noop struct{}

// Gauge does nothing.
func (Noop) Gauge(string, []Label, float64) {}

// Add does nothing.
func (Noop) Add(string, []Label, uint64) {}

// OrNoop returns m, or Noop when m is nil.
func OrNoop(m Metrics) Metrics {
	if m == nil {
		return Noop{}
	}
	return m
}

// Label names used by the library.
const (
	// LabelPartitionKind is the kind of the partition a sample is about
	// (store.Partition.Kind: "ref", "namespace", ...).
	LabelPartitionKind = "partition_kind"
	// LabelSourceKind is the kind of a relay's source partition.
	LabelSourceKind = "source_kind"
	// LabelShardKind is the kind of the partition holding an outbox.
	LabelShardKind = "shard_kind"
	// LabelUnit says what a backlog gauge counts: UnitRows or UnitBytes.
	LabelUnit = "unit"
	// LabelTimerKind is a timer's kind, in decimal.
	LabelTimerKind = "timer_kind"
)

// Values of LabelUnit.
const (
	UnitRows  = "rows"
	UnitBytes = "bytes"
)

// Metric names used by the library. Gauges are plain nouns; counters end
// in _total, as Prometheus expects.
const (
	// MetricRelayBacklogRows (gauge; LabelSourceKind): an upper bound on
	// the relay rows queued in a source partition, set at each relay fire.
	MetricRelayBacklogRows = "mkitfdb_relay_backlog_rows"
	// MetricRelayLagExceeded (counter; LabelSourceKind): relay fires that
	// found a queued row older than the relay lag bound.
	MetricRelayLagExceeded = "mkitfdb_relay_lag_exceeded_total"
	// MetricOutboxBacklog (gauge; LabelShardKind, LabelUnit): undelivered
	// terminal outcomes of a partition, in rows and in bytes, set at each
	// outcome-delivery fire.
	MetricOutboxBacklog = "mkitfdb_outbox_backlog"
	// MetricSyntheticOutcomesAcked (counter): synthetic outcomes (of a
	// source's SourceConfig.Synthetic, such as the reference domain's "s:"
	// reservations) acknowledged locally instead of sent to a sink.
	MetricSyntheticOutcomesAcked = "mkitfdb_synthetic_outcomes_acked_total"
	// MetricTimersFired (counter; LabelPartitionKind, LabelTimerKind):
	// timers whose handler ran and whose Done or Reschedule committed.
	MetricTimersFired = "mkitfdb_timers_fired_total"
	// MetricTimersRetried (counter; LabelPartitionKind, LabelTimerKind):
	// timers whose handler asked for a Retry that committed.
	MetricTimersRetried = "mkitfdb_timers_retried_total"
	// MetricTimersRaced (counter; LabelPartitionKind, LabelTimerKind):
	// timer outcomes whose guards failed (the timer, or a row the handler
	// guarded, changed between the fire and the apply).
	MetricTimersRaced = "mkitfdb_timers_raced_total"
	// MetricTimersFailed (counter; LabelPartitionKind, LabelTimerKind):
	// timers whose handler returned an error, panicked, or returned an
	// outcome the store rejected.
	MetricTimersFailed = "mkitfdb_timers_failed_total"
	// MetricTimersUnknownKind (counter; LabelPartitionKind,
	// LabelTimerKind): due timers of a kind no handler is registered for,
	// counted once per kind per run.
	MetricTimersUnknownKind = "mkitfdb_timers_unknown_kind_total"
	// MetricTimersCorrupt (counter; LabelPartitionKind): due timers left in
	// place because their key, reference entry or value is corrupt.
	MetricTimersCorrupt = "mkitfdb_timers_corrupt_total"
	// MetricTimersDeadLettered (counter; LabelPartitionKind,
	// LabelTimerKind): timers made dead letters, their retry policy's
	// attempts used or their handler's error permanent.
	MetricTimersDeadLettered = "mkitfdb_timers_dead_lettered_total"
)

var help = map[string]string{
	MetricRelayBacklogRows:       "Upper bound on the relay rows queued in a source partition.",
	MetricRelayLagExceeded:       "Relay fires that found a queued row older than the relay lag bound.",
	MetricOutboxBacklog:          "Undelivered terminal outcomes of a partition, in rows or bytes.",
	MetricSyntheticOutcomesAcked: "Synthetic outcomes acknowledged locally instead of sent to a sink.",
	MetricTimersFired:            "Timers whose handler ran and whose Done or Reschedule committed.",
	MetricTimersRetried:          "Timers whose handler asked for a retry that committed.",
	MetricTimersRaced:            "Timer outcomes whose guards failed because a row changed meanwhile.",
	MetricTimersFailed:           "Timers whose handler failed, panicked or returned an outcome the store rejected.",
	MetricTimersUnknownKind:      "Due timers of a kind no handler is registered for, once per kind per run.",
	MetricTimersCorrupt:          "Due timers left in place because their key, reference entry or value is corrupt.",
	MetricTimersDeadLettered:     "Timers made dead letters: their retry policy's attempts used, or their handler's error permanent.",
}

// Help returns the description of a metric the library emits, or "" for a
// name it does not know.
func Help(name string) string { return help[name] }
