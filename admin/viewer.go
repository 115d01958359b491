package admin

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: one source of each view's facts.
//
// Every view is read by a viewer: it reads the store and returns the
// view's facts as the exported report types (PartitionReport, TimerRow,
// LagReport, ...), with every judgement already made: a timer's state and
// why it is not firing, a lease's holder and whether it expired, a
// partition parked by a claim, a value shortened for a screen. The
// command prints them as text or, with -json, as JSON; the web view
// renders the same values as HTML or JSON. No renderer reads the store
// or decides a state, so the three cannot tell different stories.

// viewer reads the views' facts from a store at one moment.
type viewer struct {
	l         *fdblayer.Layer
	now       time.Time
	kindNames map[timers.Kind]string
	// handled says whether the service registers a handler for a kind:
	// nil when the reader does not know (the command, a process of its
	// own), the service's Registry in the web view.
	handled func(timers.Kind) bool
	maxRows int
	// pauses are the store's pauses, once read (see storePauses).
	pauses *timers.Pauses
}

// nowMs is the viewer's time as stored times are compared with it.
func (v *viewer) nowMs() uint64 { return uint64(max(v.now.UnixMilli(), 0)) }

// kindName names a timer kind: the service's name for it, else the
// library's (kind(N) for one nobody named).
func (v *viewer) kindName(k timers.Kind) string {
	if n, ok := v.kindNames[k]; ok {
		return n
	}
	return k.String()
}

// parseKind parses a kind by number, kind(N) or name.
func (v *viewer) parseKind(s string) (timers.Kind, error) {
	for _, k := range []timers.Kind{timers.KindRelay, timers.KindOutcomeDelivery} {
		if s == k.String() {
			return k, nil
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.kindNames)) {
		if v.kindNames[k] == s {
			return k, nil
		}
	}
	var n uint16
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(s, "kind("), ")"), "%d", &n); err != nil || n == 0 {
		return 0, usagef("-kind %q is no timer kind: a number from 1 to 65535 or a kind's name (relay, outcome-delivery)", s)
	}
	return timers.Kind(n), nil
}

// membersIdentity is the tuple identity of timers.MembersPartition, the
// library's one partition of its own.
var membersIdentity = func() []byte {
	b, _ := timers.MembersPartition.AppendTuple(nil)
	return b
}()

// isMembers reports whether identity is timers.MembersPartition's.
func isMembers(identity []byte) bool { return bytes.Equal(identity, membersIdentity) }

// membersKind is the kind the views give timers.MembersPartition.
const membersKind = "scheduler-members"

// evolveIdentity is the tuple identity of evolve.Partition, the library's
// partition of the store's formats and processes (see the formats
// subcommand).
var evolveIdentity = func() []byte {
	b, _ := evolve.Partition.AppendTuple(nil)
	return b
}()

// evolveKind is the kind the views give evolve.Partition.
const evolveKind = "store-formats"

// LeaseReport is a scheduler's lease on a partition: the claim of the
// scheduler named Owner, which fires the partition's due timers until
// Expires. A lease that expired (Expired) belongs to a scheduler that
// stopped before it released it (a crash, a kill): its partition stays
// parked until another scheduler takes the lease over, at its next
// listing of parked partitions (every quarter of its LeaseDuration).
type LeaseReport struct {
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"`
	Expired bool      `json:"expired,omitempty"`
	// Corrupt is the decoder's reason when the lease row does not decode:
	// no scheduler claims the partition until it is repaired.
	Corrupt string `json:"corrupt,omitempty"`
}

// newLease reads a partition's lease row (nil when there is none).
func (v *viewer) newLease(raw store.Value) *LeaseReport {
	if raw == nil {
		return nil
	}
	ls, err := decodeLease(raw)
	if err != nil {
		return &LeaseReport{Corrupt: err.Error()}
	}
	exp := msTime(ls.ExpiresAtMs)
	return &LeaseReport{Owner: ls.Owner, Expires: exp, Expired: !exp.After(v.now)}
}

// text says who holds the lease and until when, relative to now.
func (ls *LeaseReport) text(now time.Time) string {
	switch {
	case ls.Corrupt != "":
		return "the scheduler lease does not decode (" + ls.Corrupt + "): no scheduler claims the partition until it is repaired"
	case ls.Expired:
		return fmt.Sprintf("held by %q until %s (expired %s): that scheduler stopped without releasing it; the next scheduler to list the parked partitions takes it over",
			ls.Owner, stamp(ls.Expires), rel(ls.Expires, now))
	}
	return fmt.Sprintf("held by %q until %s (%s): its due timers fire under it, or, if that scheduler is gone, when it expires",
		ls.Owner, stamp(ls.Expires), rel(ls.Expires, now))
}

// wakeState is what the due index says of a partition: its wake time,
// or that a scheduler's claim parked it, or that a scheduler left due
// timers in it for a pause.
type wakeState struct {
	at     time.Time // zero: none; when paused, the next timer no pause held
	parked bool
	// paused: a scheduler left due timers of a paused kind or queue in the
	// partition (see timers.PausedWake); resumed: a resume since ended
	// that pause, so the schedulers' next tick claims the partition.
	paused, resumed bool
}

// wakeOf says what the wake time at (ok false: none) means, under the
// store's pauses ps.
func wakeOf(at time.Time, ok bool, ps timers.Pauses) wakeState {
	d := timers.DescribeWake(at, ok)
	switch {
	case d.Parked:
		return wakeState{parked: true}
	case d.Paused:
		w := wakeState{paused: true, resumed: ps.Ended(d)}
		if !d.At.IsZero() {
			w.at = msTime(storedMs(d.At))
		}
		return w
	case d.At.IsZero():
		return wakeState{}
	}
	return wakeState{at: msTime(storedMs(d.At))}
}

// whyNotFiring says why a due timer of kind k (0: the partition's
// earliest) of a partition in state ps does not fire now, and the state
// that says so: "" when nothing keeps it from firing at the scheduler's
// next tick.
func (v *viewer) whyNotFiring(due time.Time, k timers.Kind, ps partitionState) (state, note string) {
	ls, w := ps.lease, ps.wake
	if p := v.kindPause(k); k != 0 && p != nil {
		return "paused", p.Text(v.now) + "; it keeps its place: " + p.resumeHint("") + " fires it"
	}
	if p := ps.pause; p != nil && k.Queue() {
		return "paused", p.Text(v.now) + "; it keeps its place: " + p.resumeHint(ps.partition) + " fires it"
	}
	switch {
	case ls != nil && ls.Corrupt != "":
		return "held", ls.text(v.now)
	case ls != nil:
		return "leased", ls.text(v.now)
	case w.parked:
		return "parked", "the partition is parked with no lease (a scheduler's release failed): the next scheduler to list the parked partitions takes it"
	case w.paused && w.resumed:
		return "", "a resume ended the pause a scheduler left the partition's timers for: the schedulers' next tick fires them"
	case w.paused && k == 0:
		return "", "a scheduler left due timers of the partition for a pause (timers lists which)"
	case w.paused && (w.at.IsZero() || w.at.After(due)):
		return "", "a scheduler left the partition for a pause that has ended since: its next claim (at the resume's next tick, or when a timer write lowers the wake time) fires it"
	case w.at.IsZero():
		return "", "the partition has no wake time: no scheduler finds it until a timer write or a repair sets one"
	case w.at.After(due):
		return "", fmt.Sprintf("the due index wakes the partition at %s (%s), after this due time", stamp(w.at), rel(w.at, v.now))
	}
	return "", ""
}
