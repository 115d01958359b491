package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var timersCommand = subcommand{
	name:  "timers",
	short: "timers: every one, what is due now (-due), or the dead letters (-dead)",
	long: "timers lists the timers of -partition, or of every partition, in due order: kind,\n" +
		"reference, due time and state: waiting (not due yet); due (fires at the next\n" +
		"scheduler tick); leased (due, in a partition a scheduler claimed: it fires under\n" +
		"that lease, or, if that scheduler died, once the lease expires; who holds it and\n" +
		"until when is said); parked (due, in a partition parked with no lease); held (a\n" +
		"corrupt relay row holds the relay's, a failing sink backs off outcome delivery,\n" +
		"or the lease does not decode); orphan (a timer row its reference entry does not\n" +
		"name, which no handler fires). A due timer's note says why it is not firing when\n" +
		"something keeps it. -kind and -state keep the timers of one kind or state. With\n" +
		"-due it lists the due timers of the partitions the due index says are due now\n" +
		"and of those a scheduler's claim parked. With -dead it lists the dead letters\n" +
		"instead: timers that used their retry policy's attempts or failed permanently,\n" +
		"with their attempts, last error and value, which never fire again until redrive\n" +
		"-dead or delete-dead. Text shortens long values (-full prints them whole).",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "only this partition (a tuple or x:HEX)")
		fs.BoolVar(&o.due, "due", false, "only what is due now, per the due index")
		fs.BoolVar(&o.dead, "dead", false, "the dead letters instead of the timers")
		fs.StringVar(&o.kind, "kind", "", "only timers of this kind (a number or a name)")
		fs.StringVar(&o.state, "state", "", "only timers in this state: due, waiting, held, leased, parked or orphan")
		fs.BoolVar(&o.full, "full", false, "print values whole (text shortens long ones; -json never does)")
		fs.IntVar(&o.maxRows, "max-rows", DefaultMaxRows, "the most timers listed of each partition")
	},
	run: (*Command).timers,
}

var lagCommand = subcommand{
	name:  "lag",
	short: "a summary: the oldest queued row and the most delayed timer",
	long: "lag reads the head of every partition's queues and reports the oldest queued relay\n" +
		"row and pending outcome (by their queue times) and the most delayed timer (the\n" +
		"earliest due time before now, and why it is not firing when something keeps it),\n" +
		"each with its partition; how many partitions hold queued rows and are due now\n" +
		"(listed for the schedulers, or parked by a scheduler's claim); the schedulers\n" +
		"holding leases, until when, and how many expired; and the dead letters.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.maxRows, "max-rows", DefaultMaxRows, "the most dead letters counted of each partition")
	},
	run: (*Command).lag,
}

// TimerRow is one timer as the timers view shows it.
type TimerRow struct {
	Partition string    `json:"partition"`
	Kind      uint16    `json:"kind"`
	Name      string    `json:"name"`
	Reference string    `json:"reference"`
	Due       time.Time `json:"due"`
	// State is waiting (not due yet), due (fires at the scheduler's next
	// tick), leased (due, in a partition a scheduler claimed: it fires
	// under that lease, or once the lease expires), parked (due, in a
	// partition parked with no lease), paused (due, of a kind an operator
	// paused for the whole store, or a queue of a partition whose queues
	// are paused: it keeps its place until resumed), held (a corrupt relay row or a
	// failing sink holds it, the scheduler lease does not decode, or the
	// service registers no handler for its kind) or orphan (a timer row
	// its reference entry does not name, which no handler fires). Note
	// says why it is held, leased, parked or an orphan, why a due timer
	// is not firing, or how often a retrying timer failed.
	State string `json:"state"`
	Note  string `json:"note,omitempty"`
	Row   Row    `json:"row"`
}

// TimerStates are the states the timers view filters by: a TimerRow's,
// and dead for the dead letters.
var TimerStates = []string{"due", "waiting", "held", "leased", "parked", "paused", "orphan", "dead"}

// timerFilter says which timers a timers view lists.
type timerFilter struct {
	partition []byte // nil: every partition
	due       bool   // only those due now, found through the due index
	kind      timers.Kind
	state     string // "": any
	after     []byte // continue the walk after this partition
	limit     int    // partitions walked (0: all)
}

func (f timerFilter) keep(t TimerRow) bool {
	return (f.kind == 0 || timers.Kind(t.Kind) == f.kind) && (f.state == "" || f.state == t.State)
}

// TimersReport is the timers view: the timers listed, in each partition
// in due order, and whether some partitions hold more than were read.
type TimersReport struct {
	Now    time.Time  `json:"now"`
	Timers []TimerRow `json:"timers"`
	More   bool       `json:"more"`
	// Next, when set, is the partition a further page starts after.
	Next string `json:"next,omitempty"`
	// Pauses are the timer kinds paused for the whole store.
	Pauses []PauseReport `json:"pauses"`
}

// partitionState is what decides whether a partition's due timers fire:
// its lease, its wake time and its queues' pause (the store's kind pauses
// are the viewer's).
type partitionState struct {
	partition string // as a tuple
	lease     *LeaseReport
	wake      wakeState
	pause     *PauseReport
}

// stateOf reads partition id's lease, wake time and queue pause, and the
// store's pauses once per viewer.
func (v *viewer) stateOf(ctx context.Context, id store.Identity) (partitionState, error) {
	pauses, err := v.storePauses(ctx)
	if err != nil {
		return partitionState{}, err
	}
	vs, err := v.l.GetMany(ctx, id, []store.Key{timers.LeaseKey(), timers.PartitionPauseKey()})
	if err != nil {
		return partitionState{}, err
	}
	at, ok, err := v.l.NextWake(ctx, id)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return partitionState{}, err
	}
	idb, _ := id.AppendTuple(nil)
	ps := partitionState{partition: formatTuple(idb), lease: v.newLease(vs[0]), wake: wakeOf(at, ok, pauses)}
	if vs[1] != nil {
		if ps.pause, err = v.partitionPause(ctx, id); err != nil {
			return partitionState{}, err
		}
	}
	return ps, nil
}

// library reports whether k is one of the library's own kinds, whose
// handlers every service that uses them registers.
func library(k timers.Kind) bool { return k < 256 }

// partitionTimers reads up to maxRows timers of p due before until (0:
// all) and their reference entries, and says the state of each.
func (v *viewer) partitionTimers(ctx context.Context, id store.Identity, until uint64) ([]TimerRow, Count, error) {
	idb, _ := id.AppendTuple(nil)
	sch, _, _ := schemaOf(idb)
	ps, err := v.stateOf(ctx, id)
	if err != nil {
		return nil, Count{}, err
	}
	start, end := classRange(gen.TagTimerKey)
	if until != 0 {
		end = tuple.AppendUint(tuple.AppendUint(nil, uint64(gen.TagTimerKey)), until)
	}
	var out []TimerRow
	var refs []store.Key
	n, err := scanRange(ctx, v.l, id, start, end, v.maxRows, func(k store.Key, val store.Value) {
		row := decodeRow(sch, k, val)
		tr := TimerRow{Partition: formatTuple(idb), Row: row}
		tk, err := gen.ParseTimerKey(k)
		if err != nil {
			tr.State, tr.Note = "orphan", "the key does not parse: "+err.Error()
			out, refs = append(out, tr), append(refs, nil)
			return
		}
		kind := timers.Kind(tk.Kind)
		tr.Kind, tr.Name, tr.Reference, tr.Due = tk.Kind, v.kindName(kind), tk.Reference, msTime(tk.DueAtMs)
		tr.State = "waiting"
		if !tr.Due.After(v.now) {
			tr.State = "due"
		}
		switch {
		case kind == timers.KindRelay && len(val) > 0:
			if rt, err := gen.DecodeRelayTimerV1(val); err == nil {
				tr.State, tr.Note = "held", fmt.Sprintf("a corrupt relay row holds the source (last moved %s later)", time.Duration(rt.HoldMs)*time.Millisecond)
			}
		case kind == timers.KindOutcomeDelivery:
			if ot, err := gen.DecodeOutcomeTimer(val); err == nil && ot.Attempt > 0 {
				tr.State, tr.Note = "held", fmt.Sprintf("the sink failed: backing off, attempt %d", ot.Attempt)
			}
		}
		if tr.State == "due" {
			// Why a due timer is not firing: the partition's claim or wake
			// time first, then the service's handlers.
			state, note := v.whyNotFiring(tr.Due, kind, ps)
			switch {
			case state != "":
				tr.State, tr.Note = state, note
			case v.handled != nil && !library(kind) && !v.handled(kind):
				tr.State, tr.Note = "held", fmt.Sprintf("this service registers no handler for %s: each fire moves it the scheduler's HeldBackoff later", v.kindName(kind))
			default:
				tr.Note = note
			}
		}
		ref, _ := timers.RefKey(kind, tk.Reference)
		out, refs = append(out, tr), append(refs, ref)
	})
	if err != nil {
		return nil, n, err
	}
	var keys []store.Key
	for _, r := range refs {
		if r != nil {
			keys = append(keys, r)
		}
	}
	vals, err := v.l.GetMany(ctx, id, keys)
	if err != nil {
		return nil, n, err
	}
	j := 0
	for i := range out {
		if refs[i] == nil {
			continue
		}
		val := vals[j]
		j++
		due, err := timers.DecodeRef(val)
		switch {
		case val == nil:
			out[i].State, out[i].Note = "orphan", "no reference entry: no handler fires it"
		case err != nil:
			out[i].State, out[i].Note = "orphan", "the reference entry does not decode: "+err.Error()
		case msTime(storedMs(due)) != out[i].Due:
			out[i].State, out[i].Note = "orphan", "the reference entry names the timer due "+stamp(msTime(storedMs(due)))
		case out[i].Note == "" && isTimerRefV2(val):
			// A timer retrying after failed fires (see timers.RetryPolicy).
			if r, err := gen.DecodeTimerRefV2(val); err == nil && r.Attempts > 0 {
				out[i].Note = fmt.Sprintf("%d failed attempts, the last: %q", r.Attempts, r.LastError)
			}
		}
	}
	return out, n, nil
}

// timers lists the timers f selects: of its partition or of every
// partition, or, with f.due, of the partitions the due index says are
// due now and of those a scheduler's claim parked (their due timers are
// due too, and fire under the claim's lease).
func (v *viewer) timers(ctx context.Context, f timerFilter) (TimersReport, error) {
	rep := TimersReport{Now: v.now.UTC(), Timers: []TimerRow{}}
	var err error
	if rep.Pauses, err = v.kindPauses(ctx); err != nil {
		return rep, err
	}
	nowMs := v.nowMs()
	each := func(id store.Identity, until uint64) error {
		rows, n, err := v.partitionTimers(ctx, id, until)
		for _, r := range rows {
			if f.keep(r) {
				rep.Timers = append(rep.Timers, r)
			}
		}
		rep.More = rep.More || n.More
		return err
	}
	if !f.due {
		next, err := v.eachPartition(ctx, f.partition, f.after, f.limit, func(id store.Identity) error { return each(id, 0) })
		if next != nil {
			rep.Next = formatTuple(next)
		}
		return rep, err
	}
	due, err := v.duePartitions(ctx)
	if err != nil {
		return rep, err
	}
	for _, e := range due {
		if f.partition != nil && string(e.Partition) != string(f.partition) {
			continue
		}
		id, err := store.ParseIdentity(e.Partition)
		if err != nil {
			return rep, err
		}
		if err := each(id, nowMs+1); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// duePartitions lists the due index's entries due now, oldest first
// across its buckets, then those a scheduler's claim parked, then those a
// scheduler left due timers in for a pause.
func (v *viewer) duePartitions(ctx context.Context) ([]store.DueEntry, error) {
	var due []store.DueEntry
	err := dueEntries(ctx, v.l, v.nowMs(), func(e store.DueEntry) error {
		due = append(due, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(due, func(a, b store.DueEntry) int {
		return cmp.Or(a.At.Compare(b.At), bytes.Compare(a.Partition, b.Partition))
	})
	parked, err := v.parkedPartitions(ctx)
	if err != nil {
		return nil, err
	}
	paused, err := v.pausedPartitions(ctx)
	return append(append(due, parked...), paused...), err
}

// parkedPartitions lists the due index's parked entries, in identity
// order: the partitions a scheduler claimed (see timers.ParkedWake).
func (v *viewer) parkedPartitions(ctx context.Context) ([]store.DueEntry, error) {
	var parked []store.DueEntry
	q := store.DueQuery{From: timers.ParkedWake, Until: store.MaxTime, Limit: 256}
	for {
		page, err := v.l.ScanDue(ctx, q)
		if err != nil {
			return nil, err
		}
		parked = append(parked, page...)
		if len(page) < q.Limit {
			break
		}
		q.After = &page[len(page)-1]
	}
	slices.SortFunc(parked, func(a, b store.DueEntry) int { return bytes.Compare(a.Partition, b.Partition) })
	return parked, nil
}

func (c *Command) timers(ctx context.Context, st *opened, o *options) error {
	if o.dead {
		if o.due {
			return usagef("timers: -due and -dead: a dead letter is never due")
		}
		if o.state != "" || o.kind != "" {
			return usagef("timers: -dead lists every dead letter: -kind and -state filter timers")
		}
		return c.deadView(ctx, st, o)
	}
	v := c.viewer(st, o)
	f := timerFilter{partition: o.partID, due: o.due, state: o.state}
	if o.kind != "" {
		k, err := v.parseKind(o.kind)
		if err != nil {
			return err
		}
		f.kind = k
	}
	switch {
	case f.state == "dead":
		return usagef("timers: -state dead: the dead letters are timers -dead")
	case f.state != "" && !slices.Contains(TimerStates, f.state):
		return usagef("timers: -state %q is none of %s", f.state, strings.Join(TimerStates, ", "))
	}
	rep, err := v.timers(ctx, f)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	now := v.now
	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	for _, p := range rep.Pauses {
		fmt.Fprintf(c.cfg.Stdout, "paused: %s\n", p.Text(now))
	}
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKIND\tREFERENCE\tDUE\tSTATE\tVALUE")
	for _, t := range rep.Timers {
		due, name := "-", t.Name
		if !t.Due.IsZero() {
			due = stamp(t.Due) + " (" + rel(t.Due, now) + ")"
		}
		if name == "" {
			name = "?"
		}
		state := t.State
		if t.Note != "" {
			state += ": " + t.Note
		}
		value := t.Row.Short()
		if o.full {
			value = t.Row.Value
		}
		fmt.Fprintf(tw, "%s\t%s\t%q\t%s\t%s\t%s\n", t.Partition, name, t.Reference, due, state, value)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d timers\n", len(rep.Timers))
	if rep.More {
		fmt.Fprintf(c.cfg.Stdout, "more timers follow in some partitions: raise -max-rows\n")
	}
	return nil
}

// LagReport is the lag view: the oldest queued relay row and pending
// outcome, and the most delayed timer, across the store; the partitions
// due now, the schedulers' leases and the dead letters.
type LagReport struct {
	Now time.Time `json:"now"`
	// Partitions counts the partitions read; Queued those holding relay
	// rows or pending outcomes; Due those the due index lists as due now
	// for the schedulers; Parked those a scheduler's claim parked, whose
	// due timers fire under its lease (or once it expires).
	Partitions int `json:"partitions"`
	Queued     int `json:"queued"`
	Due        int `json:"due"`
	Parked     int `json:"parked"`
	// PausedPartitions counts the partitions a scheduler left due timers
	// in for a pause; Pauses are the timer kinds paused for the whole
	// store.
	PausedPartitions int           `json:"paused_partitions"`
	Pauses           []PauseReport `json:"pauses"`
	// Leases are the schedulers holding partition leases, by owner.
	Leases []LeaseHolder `json:"leases"`
	// DeadLetters counts the dead letters (more than N when a partition
	// holds more than -max-rows), in DeadPartitions partitions.
	DeadLetters    Count `json:"dead_letters"`
	DeadPartitions int   `json:"dead_partitions"`
	// OldestRelay, OldestOutcome and MostDelayedTimer are nil when there
	// is none.
	OldestRelay      *LagItem `json:"oldest_relay,omitempty"`
	OldestOutcome    *LagItem `json:"oldest_outcome,omitempty"`
	MostDelayedTimer *LagItem `json:"most_delayed_timer,omitempty"`
}

// LeaseHolder is a scheduler holding partition leases: how many, how
// many of them expired, and the latest expiry.
type LeaseHolder struct {
	Owner      string    `json:"owner"`
	Partitions int       `json:"partitions"`
	Expired    int       `json:"expired"`
	Until      time.Time `json:"until"`
}

// LagItem is a row of the lag view: where, which key, when it was queued
// or due, and how long ago (Age, in nanoseconds in JSON); Note says why a
// due timer is not firing.
type LagItem struct {
	Partition string        `json:"partition"`
	Key       string        `json:"key"`
	At        time.Time     `json:"at"`
	Age       time.Duration `json:"age_ns"`
	What      string        `json:"what,omitempty"`
	Note      string        `json:"note,omitempty"`
}

// lagHead bounds the rows read at the head of each queue for lag.
const lagHead = 16

// lag reads the lag view: the head of every partition's queues, its
// lease and its dead letters, and the due index.
func (v *viewer) lag(ctx context.Context) (LagReport, error) {
	now := v.now
	rep := LagReport{Now: now.UTC(), Leases: []LeaseHolder{}}
	var err error
	if rep.Pauses, err = v.kindPauses(ctx); err != nil {
		return rep, err
	}
	older := func(cur **LagItem, item LagItem) bool {
		if *cur == nil || item.At.Before((*cur).At) {
			item.Age = now.Sub(item.At)
			*cur = &item
			return true
		}
		return false
	}
	holders := map[string]int{}
	_, err = walk(ctx, v.l, nil, 0, func(id store.Identity) error {
		rep.Partitions++
		idb, _ := id.AppendTuple(nil)
		part := formatTuple(idb)
		queued := false
		start, end := classRange(gen.TagRelayKey)
		_, err := scanRange(ctx, v.l, id, start, end, lagHead, func(k store.Key, val store.Value) {
			queued = true
			if r, err := outbox.DecodeRelay(val); err == nil {
				older(&rep.OldestRelay, LagItem{Partition: part, Key: formatTuple(k), At: msTime(r.AtMs), What: "relay row"})
			}
		})
		if err != nil {
			return err
		}
		start, end = classRange(gen.TagOutcomePendingKey)
		_, err = scanRange(ctx, v.l, id, start, end, lagHead, func(k store.Key, val store.Value) {
			queued = true
			if r, err := outbox.DecodePending(val); err == nil {
				older(&rep.OldestOutcome, LagItem{Partition: part, Key: formatTuple(k), At: msTime(r.AtMs), What: "pending outcome of " + r.Source.String()})
			}
		})
		if err != nil {
			return err
		}
		if queued {
			rep.Queued++
		}
		ps, err := v.stateOf(ctx, id)
		if err != nil {
			return err
		}
		if ls := ps.lease; ls != nil && ls.Corrupt == "" {
			i, ok := holders[ls.Owner]
			if !ok {
				i = len(rep.Leases)
				holders[ls.Owner] = i
				rep.Leases = append(rep.Leases, LeaseHolder{Owner: ls.Owner})
			}
			h := &rep.Leases[i]
			h.Partitions++
			if ls.Expired {
				h.Expired++
			}
			if ls.Expires.After(h.Until) {
				h.Until = ls.Expires
			}
		}
		start, end = classRange(gen.TagDeadLetterKey)
		dead, err := scanRange(ctx, v.l, id, start, end, v.maxRows, func(store.Key, store.Value) {})
		if err != nil {
			return err
		}
		if dead.N > 0 {
			rep.DeadPartitions++
			rep.DeadLetters.N += dead.N
			rep.DeadLetters.More = rep.DeadLetters.More || dead.More
		}
		start, end = classRange(gen.TagTimerKey)
		_, err = scanRange(ctx, v.l, id, start, end, 1, func(k store.Key, val store.Value) {
			tk, err := gen.ParseTimerKey(k)
			if err != nil || msTime(tk.DueAtMs).After(now) {
				return
			}
			item := LagItem{Partition: part, Key: formatTuple(k), At: msTime(tk.DueAtMs),
				What: v.kindName(timers.Kind(tk.Kind)) + " timer " + fmt.Sprintf("%q", tk.Reference)}
			_, item.Note = v.whyNotFiring(item.At, timers.Kind(tk.Kind), ps)
			older(&rep.MostDelayedTimer, item)
		})
		return err
	}, func(Unlinked) error { return nil })
	if err != nil {
		return rep, err
	}
	if err := dueEntries(ctx, v.l, v.nowMs(), func(store.DueEntry) error { rep.Due++; return nil }); err != nil {
		return rep, err
	}
	parked, err := v.parkedPartitions(ctx)
	if err != nil {
		return rep, err
	}
	rep.Parked = len(parked)
	paused, err := v.pausedPartitions(ctx)
	rep.PausedPartitions = len(paused)
	return rep, err
}

func (c *Command) lag(ctx context.Context, st *opened, o *options) error {
	v := c.viewer(st, o)
	rep, err := v.lag(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	w := c.cfg.Stdout
	now := v.now
	fmt.Fprintf(w, "now %s\n%d partitions, %d with queued rows, %d due now: %d listed for the schedulers, %d parked by a scheduler's claim\n",
		stamp(now), rep.Partitions, rep.Queued, rep.Due+rep.Parked, rep.Due, rep.Parked)
	for _, h := range rep.Leases {
		fmt.Fprintf(w, "%-20s %s\n", "leases", h.text(now))
	}
	for _, p := range rep.Pauses {
		fmt.Fprintf(w, "%-20s %s\n", "paused", p.Text(now))
	}
	if rep.PausedPartitions > 0 {
		fmt.Fprintf(w, "%-20s %s left with due timers for a pause (timers -state paused lists them)\n", "paused partitions", plural(rep.PausedPartitions, "partition"))
	}
	fmt.Fprintf(w, "%-20s %s\n", "dead letters", rep.deadText())
	line := func(label string, it *LagItem, verb string) {
		if it == nil {
			fmt.Fprintf(w, "%-20s none\n", label)
			return
		}
		fmt.Fprintf(w, "%-20s %s %s ago (%s), %s %s in %s\n", label, verb, it.Age.Round(time.Millisecond), stamp(it.At), it.What, it.Key, it.Partition)
		if it.Note != "" {
			fmt.Fprintf(w, "%-20s not firing: %s\n", "", it.Note)
		}
	}
	line("oldest relay row", rep.OldestRelay, "queued")
	line("oldest outcome", rep.OldestOutcome, "queued")
	line("most delayed timer", rep.MostDelayedTimer, "due")
	return nil
}

// text says what h holds: "mkitfdb-demo holds 4 partitions until T (in
// 7s), 1 of them expired".
func (h LeaseHolder) text(now time.Time) string {
	s := fmt.Sprintf("%q holds %s until %s (%s)", h.Owner, plural(h.Partitions, "partition lease"), stamp(h.Until), rel(h.Until, now))
	if h.Expired > 0 {
		s += fmt.Sprintf(", %d of them expired: taken over at another scheduler's next listing of parked partitions", h.Expired)
	}
	return s
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// deadText counts the dead letters.
func (rep LagReport) deadText() string {
	if rep.DeadLetters.N == 0 {
		return "none"
	}
	return fmt.Sprintf("%s in %s (timers -dead lists them)", rep.DeadLetters, plural(rep.DeadPartitions, "partition"))
}

// isTimerRefV2 reports whether a reference entry's value is a TimerRefV2,
// the version that carries failed attempts.
func isTimerRefV2(v []byte) bool {
	ver, err := gen.VersionOfTimerRefKeyValue(v)
	return err == nil && ver == gen.VersionTimerRefV2
}
