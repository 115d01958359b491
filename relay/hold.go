package relay

import (
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Bounds of the hold on a source whose window a corrupt row stops: the
// first fire that finds the row moves the relay timer [CorruptHoldMin]
// later, each later fire that still finds a corrupt row twice as far as
// the one before, up to [CorruptHoldMax] (see Corrupt rows in the package
// doc). The hold is kept in the timer's value, a [gen.RelayTimerV1].
const (
	CorruptHoldMin = time.Second
	CorruptHoldMax = 5 * time.Minute
)

// holdBack returns the outcome of a fire a corrupt row (or one of a newer
// version) stopped: the relay timer moved by the next hold, which its
// value records, carrying the checkpoint batch last; and it logs the row,
// once per hold (and counts a newer one, MetricRelayNewerRows).
func (f *fire) holdBack(t timers.DueTimer, last *store.Batch) timers.Fired {
	hold := uint64(CorruptHoldMin / time.Millisecond)
	if prev := f.heldMs(t.Value); prev > 0 {
		hold = min(addSat(prev, prev), uint64(CorruptHoldMax/time.Millisecond))
	}
	value, err := gen.EncodeRelayTimerV1(gen.RelayTimerV1{HoldMs: hold})
	if err != nil {
		// hold is at least CorruptHoldMin: the record's one rule holds.
		panic("relay: encode RelayTimerV1: " + err.Error())
	}
	if f.newer {
		f.metrics.Add(telemetry.MetricRelayNewerRows, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: f.src.Kind()}}, 1)
		f.log.Warn("relay: relay row of a newer version than this binary reads; tick stopped until a binary that reads it relays it",
			"source", f.src, "key", f.corruptKey, "retry_in", time.Duration(hold)*time.Millisecond, "error", f.corruptErr)
	} else {
		f.log.Warn("relay: corrupt relay row; tick stopped", "source", f.src, "key", f.corruptKey,
			"retry_in", time.Duration(hold)*time.Millisecond, "error", f.corruptErr)
	}
	return timers.Reschedule{DueAt: f.c.Now.Add(time.Duration(hold) * time.Millisecond), Value: value, Batch: last}
}

// heldMs returns the hold a relay timer's value records: 0 for the empty
// value of a source held by nothing (the value every relay timer had
// before holds were recorded). A value that does not decode is logged and
// read as no hold: it holds nothing the relay needs, and the next hold
// rewrites it.
func (f *fire) heldMs(v store.Value) uint64 {
	if len(v) == 0 {
		return 0
	}
	rt, err := gen.DecodeRelayTimerV1(v)
	if err != nil {
		f.log.Warn("relay: relay timer value does not decode; the hold restarts", "source", f.src, "error", err)
		return 0
	}
	return rt.HoldMs
}
