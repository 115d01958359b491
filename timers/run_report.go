package timers

import (
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// corruptRow counts and logs (at most once per HeldBackoff for the row,
// see Registry) a timer row that cannot be moved, and wakes the partition
// HeldBackoff later for it, so that a repair is seen.
func (r *run) corruptRow(key store.Key, kind Kind, msg string, attrs ...any) {
	r.report.Held++
	r.countCorrupt()
	r.noteNext(addMs(r.now, uint64(r.cfg.heldBackoff/time.Millisecond)))
	if !r.reg.logHeld(r.p, key, r.now, r.cfg.heldBackoff) {
		return
	}
	if kind != 0 {
		attrs = append(attrs, "kind", r.kindName(kind))
	}
	r.log.Warn("timers: "+msg, attrs...)
}

func (r *run) countCorrupt() {
	r.report.Corrupt++
	r.count(telemetry.MetricTimersCorrupt, 0)
}

// newerRow counts and logs (at most once per HeldBackoff for the row) a
// timer row left in place because its reference entry is of a newer
// version than this binary reads, and wakes the partition HeldBackoff
// later for it: a binary that reads it fires the timer.
func (r *run) newerRow(key store.Key, kind Kind, msg string, attrs ...any) {
	r.report.Held++
	r.countNewer()
	r.noteNext(addMs(r.now, uint64(r.cfg.heldBackoff/time.Millisecond)))
	if !r.reg.logHeld(r.p, key, r.now, r.cfg.heldBackoff) {
		return
	}
	r.log.Warn("timers: "+msg, append(attrs, "kind", r.kindName(kind))...)
}

func (r *run) countNewer() {
	r.report.Newer++
	r.count(telemetry.MetricTimersNewer, 0)
}

// perPartition reports whether metric is counted per partition kind only.
func perPartition(metric *telemetry.Desc) bool {
	return metric == telemetry.MetricTimersCorrupt || metric == telemetry.MetricTimersNewer
}

func (r *run) unknownKind(kind Kind) {
	for _, k := range r.unknown {
		if k == kind {
			return
		}
	}
	r.unknown = append(r.unknown, kind)
	r.report.UnknownKind++
	r.count(telemetry.MetricTimersUnknownKind, kind)
	r.log.Warn("timers: no handler registered for timer kind; its timers wait", "kind", r.kindName(kind), "retry_in", r.cfg.heldBackoff)
}

// noteNext notes that the partition needs running again at due (a due
// time of 0 at 1: the wake time 0 means none).
func (r *run) noteNext(due uint64) {
	due = realWakeMs(max(due, 1))
	if r.nextDueMs == 0 || due < r.nextDueMs {
		r.nextDueMs = due
	}
}

func (r *run) count(metric *telemetry.Desc, kind Kind) {
	if perPartition(metric) {
		kind = 0 // counted per partition kind only
	}
	for i := range r.tallies {
		if r.tallies[i].metric == metric && r.tallies[i].kind == kind {
			r.tallies[i].n++
			return
		}
	}
	r.tallies = append(r.tallies, tally{metric: metric, kind: kind, n: 1})
}

// emit sends the run's tallies to the metrics, one sample per series.
func (r *run) emit() {
	pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: r.p.Kind()}
	for _, t := range r.tallies {
		if perPartition(t.metric) {
			r.cfg.metrics.Add(t.metric, []telemetry.Label{pk}, t.n)
			continue
		}
		r.cfg.metrics.Add(t.metric, []telemetry.Label{pk, {Name: telemetry.LabelTimerKind, Value: t.kind.label()}}, t.n)
	}
}
