package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
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
		"reference, due time and state: due or waiting; held, for the library's timers\n" +
		"a corrupt row holds (the relay's) or a failing sink backs off (outcome delivery);\n" +
		"orphan, for a timer row its reference entry does not name, which no handler\n" +
		"fires. With -due it lists the partitions the due index says are due now and\n" +
		"their due timers. With -dead it lists the dead letters instead: timers that used\n" +
		"their retry policy's attempts or failed permanently, with their attempts, last\n" +
		"error and value, which never fire again until redrive -dead or delete-dead.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "only this partition (a tuple or x:HEX)")
		fs.BoolVar(&o.due, "due", false, "only what is due now, per the due index")
		fs.BoolVar(&o.dead, "dead", false, "the dead letters instead of the timers")
		fs.IntVar(&o.maxRows, "max-rows", DefaultMaxRows, "the most timers listed of each partition")
	},
	run: (*Command).timers,
}

var lagCommand = subcommand{
	name:  "lag",
	short: "a summary: the oldest queued row and the most delayed timer",
	long: "lag reads the head of every partition's queues and reports the oldest queued relay\n" +
		"row and pending outcome (by their queue times) and the most delayed timer (the\n" +
		"earliest due time before now), each with its partition, and how many partitions\n" +
		"hold queued rows and are due now.",
	flags: func(fs *flag.FlagSet, o *options) {},
	run:   (*Command).lag,
}

// TimerRow is one timer as the timers view shows it.
type TimerRow struct {
	Partition string    `json:"partition"`
	Kind      uint16    `json:"kind"`
	Name      string    `json:"name"`
	Reference string    `json:"reference"`
	Due       time.Time `json:"due"`
	// State is due, waiting, held or orphan; Note says why it is held or
	// an orphan, or how often a retrying timer failed.
	State string `json:"state"`
	Note  string `json:"note,omitempty"`
	Row   Row    `json:"row"`
}

// partitionTimers reads up to maxRows timers of p due before until (0:
// all) and their reference entries.
func (c *Command) partitionTimers(ctx context.Context, s store.Store, id store.Identity, until uint64, maxRows int, now time.Time) ([]TimerRow, Count, error) {
	idb, _ := id.AppendTuple(nil)
	sch, _, _ := schemaOf(idb)
	start, end := classRange(gen.TagTimerKey)
	if until != 0 {
		end = tuple.AppendUint(tuple.AppendUint(nil, uint64(gen.TagTimerKey)), until)
	}
	var out []TimerRow
	var refs []store.Key
	n, err := scanRange(ctx, s, id, start, end, maxRows, func(k store.Key, v store.Value) {
		row := decodeRow(sch, k, v)
		tr := TimerRow{Partition: formatTuple(idb), Row: row}
		tk, err := gen.ParseTimerKey(k)
		if err != nil {
			tr.State, tr.Note = "orphan", "the key does not parse: "+err.Error()
			out, refs = append(out, tr), append(refs, nil)
			return
		}
		kind := timers.Kind(tk.Kind)
		tr.Kind, tr.Name, tr.Reference, tr.Due = tk.Kind, c.kindName(kind), tk.Reference, msTime(tk.DueAtMs)
		tr.State = "waiting"
		if !tr.Due.After(now) {
			tr.State = "due"
		}
		switch {
		case kind == timers.KindRelay && len(v) > 0:
			if rt, err := gen.DecodeRelayTimerV1(v); err == nil {
				tr.State, tr.Note = "held", fmt.Sprintf("a corrupt relay row holds the source (last moved %s later)", time.Duration(rt.HoldMs)*time.Millisecond)
			}
		case kind == timers.KindOutcomeDelivery:
			if ot, err := gen.DecodeOutcomeTimer(v); err == nil && ot.Attempt > 0 {
				tr.State, tr.Note = "held", fmt.Sprintf("the sink failed: backing off, attempt %d", ot.Attempt)
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
	vals, err := s.GetMany(ctx, id, keys)
	if err != nil {
		return nil, n, err
	}
	j := 0
	for i := range out {
		if refs[i] == nil {
			continue
		}
		v := vals[j]
		j++
		due, err := timers.DecodeRef(v)
		switch {
		case v == nil:
			out[i].State, out[i].Note = "orphan", "no reference entry: no handler fires it"
		case err != nil:
			out[i].State, out[i].Note = "orphan", "the reference entry does not decode: "+err.Error()
		case msTime(storedMs(due)) != out[i].Due:
			out[i].State, out[i].Note = "orphan", "the reference entry names the timer due "+stamp(msTime(storedMs(due)))
		case out[i].Note == "" && isTimerRefV2(v):
			// A timer retrying after failed fires (see timers.RetryPolicy).
			if r, err := gen.DecodeTimerRefV2(v); err == nil && r.Attempts > 0 {
				out[i].Note = fmt.Sprintf("%d failed attempts, the last: %q", r.Attempts, r.LastError)
			}
		}
	}
	return out, n, nil
}

func (c *Command) timers(ctx context.Context, st *opened, o *options) error {
	if o.dead {
		if o.due {
			return usagef("timers: -due and -dead: a dead letter is never due")
		}
		return c.deadView(ctx, st, o)
	}
	now := c.now()
	nowMs := uint64(max(now.UnixMilli(), 0))
	var all []TimerRow
	more := false
	each := func(id store.Identity, until uint64) error {
		rows, n, err := c.partitionTimers(ctx, st.layer, id, until, o.maxRows, now)
		all = append(all, rows...)
		more = more || n.More
		return err
	}
	var err error
	switch {
	case o.due:
		var due []store.DueEntry
		err = dueEntries(ctx, st.layer, nowMs, func(e store.DueEntry) error {
			if o.partID == nil || string(e.Partition) == string(o.partID) {
				due = append(due, e)
			}
			return nil
		})
		// Oldest first across the index's buckets.
		slices.SortFunc(due, func(a, b store.DueEntry) int {
			return cmp.Or(a.At.Compare(b.At), bytes.Compare(a.Partition, b.Partition))
		})
		for _, e := range due {
			if err != nil {
				break
			}
			var id store.Identity
			if id, err = store.ParseIdentity(e.Partition); err == nil {
				err = each(id, nowMs+1)
			}
		}
	default:
		err = eachPartition(ctx, st, o, func(id store.Identity) error { return each(id, 0) })
	}
	if err != nil {
		return err
	}
	if o.json {
		if all == nil {
			all = []TimerRow{}
		}
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"now": now.UTC(), "timers": all, "more": more})
	}
	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKIND\tREFERENCE\tDUE\tSTATE\tVALUE")
	for _, t := range all {
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
		fmt.Fprintf(tw, "%s\t%s\t%q\t%s\t%s\t%s\n", t.Partition, name, t.Reference, due, state, t.Row.Value)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d timers\n", len(all))
	if more {
		fmt.Fprintf(c.cfg.Stdout, "more timers follow in some partitions: raise -max-rows\n")
	}
	return nil
}

// LagReport is the lag view: the oldest queued relay row and pending
// outcome, and the most delayed timer, across the store.
type LagReport struct {
	Now time.Time `json:"now"`
	// Partitions counts the partitions read; Queued those holding relay
	// rows or pending outcomes; Due those the due index says are due.
	Partitions int `json:"partitions"`
	Queued     int `json:"queued"`
	Due        int `json:"due"`
	// OldestRelay, OldestOutcome and MostDelayedTimer are nil when there
	// is none.
	OldestRelay      *LagItem `json:"oldest_relay,omitempty"`
	OldestOutcome    *LagItem `json:"oldest_outcome,omitempty"`
	MostDelayedTimer *LagItem `json:"most_delayed_timer,omitempty"`
}

// LagItem is a row of the lag view: where, which key, when it was queued
// or due, and how long ago (Age, in nanoseconds in JSON).
type LagItem struct {
	Partition string        `json:"partition"`
	Key       string        `json:"key"`
	At        time.Time     `json:"at"`
	Age       time.Duration `json:"age_ns"`
	What      string        `json:"what,omitempty"`
}

// lagHead bounds the rows read at the head of each queue for lag.
const lagHead = 16

func (c *Command) lag(ctx context.Context, st *opened, o *options) error {
	now := c.now()
	rep := LagReport{Now: now.UTC()}
	older := func(cur **LagItem, item LagItem) {
		if *cur == nil || item.At.Before((*cur).At) {
			item.Age = now.Sub(item.At)
			*cur = &item
		}
	}
	err := walk(ctx, st.layer, func(id store.Identity) error {
		rep.Partitions++
		idb, _ := id.AppendTuple(nil)
		part := formatTuple(idb)
		queued := false
		start, end := classRange(gen.TagRelayKey)
		_, err := scanRange(ctx, st.layer, id, start, end, lagHead, func(k store.Key, v store.Value) {
			queued = true
			if r, err := outbox.DecodeRelay(v); err == nil {
				older(&rep.OldestRelay, LagItem{Partition: part, Key: formatTuple(k), At: msTime(r.AtMs), What: "relay row"})
			}
		})
		if err != nil {
			return err
		}
		start, end = classRange(gen.TagOutcomePendingKey)
		_, err = scanRange(ctx, st.layer, id, start, end, lagHead, func(k store.Key, v store.Value) {
			queued = true
			if r, err := outbox.DecodePending(v); err == nil {
				older(&rep.OldestOutcome, LagItem{Partition: part, Key: formatTuple(k), At: msTime(r.AtMs), What: "pending outcome of " + r.Source.String()})
			}
		})
		if err != nil {
			return err
		}
		if queued {
			rep.Queued++
		}
		start, end = classRange(gen.TagTimerKey)
		_, err = scanRange(ctx, st.layer, id, start, end, 1, func(k store.Key, v store.Value) {
			if tk, err := gen.ParseTimerKey(k); err == nil && !msTime(tk.DueAtMs).After(now) {
				older(&rep.MostDelayedTimer, LagItem{Partition: part, Key: formatTuple(k), At: msTime(tk.DueAtMs),
					What: c.kindName(timers.Kind(tk.Kind)) + " timer " + fmt.Sprintf("%q", tk.Reference)})
			}
		})
		return err
	}, func(Unlinked) error { return nil })
	if err != nil {
		return err
	}
	err = dueEntries(ctx, st.layer, uint64(max(now.UnixMilli(), 0)), func(store.DueEntry) error { rep.Due++; return nil })
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(c.cfg.Stdout).Encode(rep)
	}
	w := c.cfg.Stdout
	fmt.Fprintf(w, "now %s\n%d partitions, %d with queued rows, %d due now\n", stamp(now), rep.Partitions, rep.Queued, rep.Due)
	line := func(label string, it *LagItem, verb string) {
		if it == nil {
			fmt.Fprintf(w, "%-20s none\n", label)
			return
		}
		fmt.Fprintf(w, "%-20s %s %s ago (%s), %s %s in %s\n", label, verb, it.Age.Round(time.Millisecond), stamp(it.At), it.What, it.Key, it.Partition)
	}
	line("oldest relay row", rep.OldestRelay, "queued")
	line("oldest outcome", rep.OldestOutcome, "queued")
	line("most delayed timer", rep.MostDelayedTimer, "due")
	return nil
}

// isTimerRefV2 reports whether a reference entry's value is a TimerRefV2,
// the version that carries failed attempts.
func isTimerRefV2(v []byte) bool {
	ver, err := gen.VersionOfTimerRefKeyValue(v)
	return err == nil && ver == gen.VersionTimerRefV2
}
