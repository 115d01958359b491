package admin

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// DefaultMaxRows bounds the rows a view reads of each queue of a
// partition (-max-rows): past it, counts say "more than N".
const DefaultMaxRows = 1000

// maxCorruptShown bounds the corrupt rows one partition's report lists.
const maxCorruptShown = 16

// Count is a count of rows read up to a bound: More says there are more
// than N.
type Count struct {
	N    int  `json:"n"`
	More bool `json:"more,omitempty"`
}

func (c Count) String() string {
	if c.More {
		return fmt.Sprintf("more than %d", c.N)
	}
	return fmt.Sprint(c.N)
}

// PartitionReport is what the partitions view shows of one partition. Its
// JSON form is stable: fields may be added, none renamed or removed.
type PartitionReport struct {
	// Partition is the identity as a tuple (what -partition takes), Kind
	// its kind by its schema ("" when its namespace is not linked).
	Partition string `json:"partition"`
	Namespace string `json:"namespace"`
	Kind      string `json:"kind,omitempty"`
	// Wake is the partition's wake time in the due index, if any; Parked
	// says a scheduler's claim parked it instead (at store.MaxTime, which
	// only a timer written during the claim lowers, to at most the
	// lease's expiry): see Lease.
	Wake   *time.Time `json:"wake,omitempty"`
	Parked bool       `json:"parked,omitempty"`
	// WakePaused says a scheduler left due timers of the partition for a
	// pause: the due index holds it aside (never at a date of its own:
	// Wake is then its next timer no pause held, if any) until that timer
	// is due or a resume; WakeResumed says a resume since ended that
	// pause, so the schedulers' next tick claims it.
	WakePaused  bool `json:"wake_paused,omitempty"`
	WakeResumed bool `json:"wake_resumed,omitempty"`
	// Pause is the pause of the partition's queues (relay, outcome
	// delivery), if an operator paused them.
	Pause *PauseReport `json:"pause,omitempty"`
	// Pauses are the timer kinds paused for the whole store, in the
	// library's partition that holds them (timers.MembersPartition) only.
	Pauses []PauseReport `json:"pauses,omitempty"`
	// OutboxSequence is the last sequence the outbox allocated.
	OutboxSequence uint64 `json:"outbox_sequence"`
	// Relay is the relay queue; Timers the timers by kind; Outcomes the
	// outcome backlog.
	Relay    RelayReport   `json:"relay"`
	Timers   []TimerKinds  `json:"timers"`
	Outcomes OutcomeReport `json:"outcomes"`
	// Lease is the lease of the scheduler that claimed the partition, if
	// one did.
	Lease       *LeaseReport `json:"lease,omitempty"`
	Quarantined Count        `json:"quarantined"`
	// DeadLetters counts the partition's dead letters (timers -dead lists
	// them).
	DeadLetters Count `json:"dead_letters"`
	// Members are the schedulers' memberships, in the library's
	// partition that holds them (timers.MembersPartition) only.
	Members []MemberRow `json:"members,omitempty"`
	// Note says why the partition's due timers are not firing now, when
	// something keeps them ("" otherwise).
	Note string `json:"note,omitempty"`
	// Corrupt lists rows of the library's classes that do not decode (at
	// most 16; CorruptMore says more were found).
	Corrupt     []Row `json:"corrupt,omitempty"`
	CorruptMore bool  `json:"corrupt_more,omitempty"`
	// Newer lists rows of the library's classes of a newer version than
	// this binary reads (Row.Newer: a newer binary wrote them), at most 16
	// too: not corrupt, held by their handlers until a binary that reads
	// them runs.
	Newer []Row `json:"newer,omitempty"`
}

// RelayReport is a partition's relay queue and scan state.
type RelayReport struct {
	Rows  Count `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Oldest is the queue time of the first row that decodes (rows are
	// queued in sequence order).
	Oldest *time.Time `json:"oldest,omitempty"`
	// CycleEnd, Cursor and Blocked are the relay's scan state (Blocked:
	// the targets blocked for the rest of the cycle, as tuples).
	CycleEnd uint64   `json:"cycle_end"`
	Cursor   uint64   `json:"cursor"`
	Blocked  []string `json:"blocked,omitempty"`
	// Hold is how long the relay timer was last moved for a corrupt row
	// holding the source (0: not held).
	Hold time.Duration `json:"hold_ns,omitempty"`
}

// TimerKinds is a partition's timers of one kind.
type TimerKinds struct {
	Kind    uint16    `json:"kind"`
	Name    string    `json:"name"`
	Count   Count     `json:"count"`
	Due     int       `json:"due"`
	NextDue time.Time `json:"next_due"`
	// Paused says no scheduler fires the kind's timers here: the kind is
	// paused for the whole store, or it is a queue of a partition whose
	// queues are paused.
	Paused bool `json:"paused,omitempty"`
}

// OutcomeReport is a partition's outcome backlog: the backlog record's
// totals, the pending rows read, the oldest queue time, and the delivery
// timer's next attempt and backoff attempt.
type OutcomeReport struct {
	Rows        uint64     `json:"rows"`
	Bytes       uint64     `json:"bytes"`
	Pending     Count      `json:"pending"`
	Oldest      *time.Time `json:"oldest,omitempty"`
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	Attempt     uint32     `json:"attempt,omitempty"`
}

// msTime converts stored Unix milliseconds to a time in UTC.
func msTime(ms uint64) time.Time { return time.UnixMilli(int64(ms)).UTC() }

// storedMs is t as stored data holds it (see store.EncodeTime): the times
// it takes come from the store.
func storedMs(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}

func ptime(t time.Time) *time.Time { return &t }

// schemaOf returns the linked schema of a partition identity and its kind.
func schemaOf(id []byte) (registry.Schema, string, string) {
	s, p, n, ns, err := registry.IdentityPrefix(id)
	if err != nil || n != len(id) {
		return s, ns, ""
	}
	return s, ns, p.Kind()
}

// classRange is the key range of a library key class.
func classRange(tag gen.Tag) (store.Key, store.Key) {
	a, b := gen.ClassRange(tag)
	return a, b
}

// scanRange reads up to limit rows of [start, end) of p, page by page,
// calling fn for each; it returns how many it read and whether more
// follow.
func scanRange(ctx context.Context, s store.Store, p store.Partition, start, end store.Key, limit int, fn func(k store.Key, v store.Value)) (Count, error) {
	var c Count
	var after store.Cursor
	for c.N < limit {
		page, err := s.Scan(ctx, p, start, end, after, min(limit-c.N, 512))
		if err != nil {
			return c, err
		}
		for _, r := range page.Entries {
			fn(r.Key, r.Value)
			c.N++
		}
		if page.Next == nil {
			return c, nil
		}
		after = page.Next
	}
	// At the limit: one more row says whether there are more.
	page, err := s.Scan(ctx, p, start, end, after, 1)
	if err != nil {
		return c, err
	}
	c.More = len(page.Entries) > 0
	return c, nil
}

// inspection is the report of one partition being read (see inspect).
type inspection struct {
	v   *viewer
	id  store.Identity
	sch registry.Schema
	rep PartitionReport
	// earliestDue is the earliest due time of the timers read, and
	// earliestKind its kind.
	earliestDue  time.Time
	earliestKind timers.Kind
	// ps is the partition's lease, wake time and queue pause.
	ps partitionState
}

// inspect reads what the partitions view shows of partition id: a fixed
// number of point reads and, per queue, at most maxRows rows.
func (v *viewer) inspect(ctx context.Context, id store.Identity) (PartitionReport, error) {
	idb, _ := id.AppendTuple(nil)
	sch, ns, kind := schemaOf(idb)
	in := &inspection{v: v, id: id, sch: sch,
		rep: PartitionReport{Partition: formatTuple(idb), Namespace: ns, Kind: kind, Timers: []TimerKinds{}}}
	steps := []func(context.Context) error{in.wake, in.singletons, in.relayRows, in.timerRows, in.pendingRows, in.quarantinedRows, in.deadLetters}
	if isMembers(idb) {
		in.rep.Namespace, in.rep.Kind = gen.SchemaNamespace, membersKind
		steps = append(steps, in.members, in.kindPauses)
	}
	if bytes.Equal(idb, evolveIdentity) {
		in.rep.Namespace, in.rep.Kind = gen.SchemaNamespace, evolveKind
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return in.rep, err
		}
	}
	in.note()
	return in.rep, nil
}

// note says why the partition's due timers, if it has any, are not
// firing.
func (in *inspection) note() {
	rep := &in.rep
	if in.earliestDue.IsZero() || in.earliestDue.After(in.v.now) {
		if rep.Lease != nil {
			rep.Note = rep.Lease.text(in.v.now)
		}
		return
	}
	ps := in.ps
	ps.lease = rep.Lease
	_, rep.Note = in.v.whyNotFiring(in.earliestDue, in.earliestKind, ps)
}

// corrupt lists a row that does not decode, up to maxCorruptShown: with
// the newer rows when a newer binary wrote it.
func (in *inspection) corrupt(r Row) {
	if r.Newer != "" {
		if len(in.rep.Newer) < maxCorruptShown {
			noteFormat(&r, in.v.l)
			in.rep.Newer = append(in.rep.Newer, r)
		}
		return
	}
	if len(in.rep.Corrupt) == maxCorruptShown {
		in.rep.CorruptMore = true
		return
	}
	in.rep.Corrupt = append(in.rep.Corrupt, r)
}

// singletons reads the partition's one-of-a-kind rows: the outbox
// sequence, the relay's scan state, the outcome backlog, the scheduler
// lease, and the library's timers (the relay's hold, the delivery's next
// attempt).
func (in *inspection) singletons(ctx context.Context) error {
	rep := &in.rep
	relayRef, _ := timers.RefKey(timers.KindRelay, "")
	outcomeRef, _ := timers.RefKey(timers.KindOutcomeDelivery, "")
	keys := []store.Key{outbox.SequenceKey(), relay.ScanKey(), outbox.BacklogKey(), relayRef, outcomeRef, timers.LeaseKey()}
	vs, err := in.v.l.GetMany(ctx, in.id, keys)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if vs[i] == nil {
			continue
		}
		if r := decodeRow(in.sch, k, vs[i]); r.Corrupt != "" || r.Newer != "" {
			in.corrupt(r)
		}
	}
	if seq, err := outbox.DecodeSequence(vs[0]); err == nil {
		rep.OutboxSequence = seq
	}
	if vs[1] != nil {
		if st, err := gen.DecodeRelayScanV1(vs[1]); err == nil {
			rep.Relay.CycleEnd, rep.Relay.Cursor = st.CycleEnd, st.Cursor
			for _, b := range st.Blocked {
				rep.Relay.Blocked = append(rep.Relay.Blocked, formatTuple(b))
			}
		}
	}
	if b, err := outbox.DecodeBacklog(vs[2]); err == nil {
		rep.Outcomes.Rows, rep.Outcomes.Bytes = b.Rows, b.Bytes
	}
	rep.Lease = in.v.newLease(vs[5])
	return in.libraryTimers(ctx, vs[3], vs[4])
}

// libraryTimers reads the rows of the relay and delivery timers, whose
// reference entries hold relayRef and outcomeRef, for the relay's hold
// and the delivery's next attempt.
func (in *inspection) libraryTimers(ctx context.Context, relayRef, outcomeRef store.Value) error {
	rep := &in.rep
	var timerKeys []store.Key
	for _, ref := range []struct {
		v    store.Value
		kind timers.Kind
	}{{relayRef, timers.KindRelay}, {outcomeRef, timers.KindOutcomeDelivery}} {
		due, err := timers.DecodeRef(ref.v)
		if ref.v == nil || err != nil {
			timerKeys = append(timerKeys, nil)
			continue
		}
		k, _ := timers.TimerKey(due, ref.kind, "")
		timerKeys = append(timerKeys, k)
		if ref.kind == timers.KindOutcomeDelivery {
			rep.Outcomes.NextAttempt = ptime(msTime(storedMs(due)))
		}
	}
	for i, k := range timerKeys {
		if k == nil {
			continue
		}
		v, ok, err := in.v.l.Get(ctx, in.id, k)
		if err != nil {
			return err
		}
		if !ok || len(v) == 0 {
			continue
		}
		if i == 0 {
			if rt, err := gen.DecodeRelayTimerV1(v); err == nil {
				rep.Relay.Hold = time.Duration(rt.HoldMs) * time.Millisecond
			}
		} else if ot, err := outbox.DecodeDeliveryTimer(v); err == nil {
			rep.Outcomes.Attempt = ot.Attempt
		}
	}
	return nil
}

// relayRows reads the relay queue: its rows, bytes and oldest queue time.
func (in *inspection) relayRows(ctx context.Context) error {
	rep := &in.rep
	start, end := classRange(gen.TagRelayKey)
	var err error
	rep.Relay.Rows, err = scanRange(ctx, in.v.l, in.id, start, end, in.v.maxRows, func(k store.Key, v store.Value) {
		rep.Relay.Bytes += int64(len(k) + len(v))
		r, err := outbox.DecodeRelay(v)
		if _, kerr := gen.ParseRelayKey(k); kerr != nil || err != nil {
			in.corrupt(decodeRow(in.sch, k, v))
			return
		}
		if rep.Relay.Oldest == nil {
			rep.Relay.Oldest = ptime(msTime(r.AtMs))
		}
	})
	return err
}

// timerRows reads the timers, counted by kind.
func (in *inspection) timerRows(ctx context.Context) error {
	rep := &in.rep
	now := in.v.now
	start, end := classRange(gen.TagTimerKey)
	byKind := map[uint16]int{}
	tc, err := scanRange(ctx, in.v.l, in.id, start, end, in.v.maxRows, func(k store.Key, v store.Value) {
		tk, err := gen.ParseTimerKey(k)
		if err != nil {
			in.corrupt(decodeRow(in.sch, k, v))
			return
		}
		i, ok := byKind[tk.Kind]
		if !ok {
			i = len(rep.Timers)
			byKind[tk.Kind] = i
			k := timers.Kind(tk.Kind)
			rep.Timers = append(rep.Timers, TimerKinds{Kind: tk.Kind, Name: in.v.kindName(k), NextDue: msTime(tk.DueAtMs),
				Paused: in.v.kindPause(k) != nil || in.ps.pause != nil && k.Queue()})
		}
		if due := msTime(tk.DueAtMs); in.earliestDue.IsZero() || due.Before(in.earliestDue) {
			in.earliestDue, in.earliestKind = due, timers.Kind(tk.Kind)
		}
		rep.Timers[i].Count.N++
		if !msTime(tk.DueAtMs).After(now) {
			rep.Timers[i].Due++
		}
	})
	if err != nil {
		return err
	}
	// Counts are of the rows read: past the bound each kind may have more.
	for i := range rep.Timers {
		rep.Timers[i].Count.More = tc.More
	}
	return nil
}

// pendingRows reads the pending outcomes: their count and oldest queue
// time.
func (in *inspection) pendingRows(ctx context.Context) error {
	rep := &in.rep
	start, end := classRange(gen.TagOutcomePendingKey)
	var err error
	rep.Outcomes.Pending, err = scanRange(ctx, in.v.l, in.id, start, end, in.v.maxRows, func(k store.Key, v store.Value) {
		if _, kerr := gen.ParseOutcomePendingKey(k); kerr != nil {
			in.corrupt(decodeRow(in.sch, k, v))
			return
		}
		if len(v) == 0 {
			return // a row queued before pending rows named their source
		}
		pv, err := outbox.DecodePending(v)
		if err != nil {
			in.corrupt(decodeRow(in.sch, k, v))
			return
		}
		if at := msTime(pv.AtMs); rep.Outcomes.Oldest == nil || at.Before(*rep.Outcomes.Oldest) {
			rep.Outcomes.Oldest = ptime(at)
		}
	})
	return err
}

// quarantinedRows counts the quarantined rows.
func (in *inspection) quarantinedRows(ctx context.Context) error {
	start, end := classRange(gen.TagQuarantineKey)
	var err error
	in.rep.Quarantined, err = scanRange(ctx, in.v.l, in.id, start, end, in.v.maxRows, func(store.Key, store.Value) {})
	return err
}

// deadLetters counts the dead letters: their records, one a letter (each
// has a row of its value beside it).
func (in *inspection) deadLetters(ctx context.Context) error {
	start, end := classRange(gen.TagDeadLetterKey)
	var err error
	in.rep.DeadLetters, err = scanRange(ctx, in.v.l, in.id, start, end, in.v.maxRows, func(store.Key, store.Value) {})
	return err
}

// wake reads the partition's wake time and queue pause (and the store's
// pauses, once per viewer).
func (in *inspection) wake(ctx context.Context) error {
	ps, err := in.v.stateOf(ctx, in.id)
	if err != nil {
		return err
	}
	in.ps = ps
	w := ps.wake
	in.rep.Parked, in.rep.WakePaused, in.rep.WakeResumed, in.rep.Pause = w.parked, w.paused, w.resumed, ps.pause
	if !w.at.IsZero() {
		in.rep.Wake = ptime(w.at)
	}
	return nil
}

// kindPauses reads the kinds paused for the whole store, in the library's
// partition that holds them.
func (in *inspection) kindPauses(ctx context.Context) error {
	ps, err := in.v.kindPauses(ctx)
	if len(ps) > 0 {
		in.rep.Pauses = ps
	}
	return err
}

// members reads the schedulers' memberships, in the library's partition
// that holds them.
func (in *inspection) members(ctx context.Context) error {
	rows, _, err := in.v.memberRows(ctx)
	in.rep.Members = rows
	return err
}
