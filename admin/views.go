package admin

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// flushEvery is how many table rows a streamed text view aligns at once.
const flushEvery = 64

var partitionsCommand = subcommand{
	name:  "partitions",
	short: "every partition: outbox, relay backlog, blocked targets, timers, outcomes",
	long: "partitions lists every partition of the store with its outbox sequence, its relay\n" +
		"backlog (rows, bytes, the oldest row's queue time), blocked targets and scan state,\n" +
		"its timers by kind with the next due time, its wake time in the due index (parked:\n" +
		"a scheduler claimed it), its outcome backlog and next attempt, its quarantined\n" +
		"rows, its dead letters and every corrupt row of the library's classes, with the\n" +
		"decoder's reason; below the table, a scheduler's lease on a partition (who holds\n" +
		"it, until when) and why its due timers are not firing. The library's own\n" +
		"partition of scheduler memberships is listed with its members. It reads at most\n" +
		"-max-rows rows of each queue of a partition (counts past it say \"more than N\")\n" +
		"and streams: a large store prints as it goes.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.IntVar(&o.maxRows, "max-rows", DefaultMaxRows, "the most rows read of each queue of a partition")
	},
	run: (*Command).partitions,
}

// rel says when t is relative to now: "5s ago", "in 30s" or "now".
func rel(t, now time.Time) string {
	d := t.Sub(now).Round(time.Millisecond)
	switch {
	case d == 0:
		return "now"
	case d < 0:
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// jsonStream writes one JSON object whose one array field streams.
type jsonStream struct {
	w     io.Writer
	n     int
	field string
}

func startJSON(w io.Writer, now time.Time, field string) *jsonStream {
	fmt.Fprintf(w, "{\"now\":%q,\n%q:[", now.UTC().Format(time.RFC3339Nano), field)
	return &jsonStream{w: w, field: field}
}

func (j *jsonStream) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if j.n > 0 {
		fmt.Fprint(j.w, ",")
	}
	j.n++
	_, err = fmt.Fprintf(j.w, "\n%s", b)
	return err
}

// end closes the array and adds the other fields.
func (j *jsonStream) end(extra map[string]any) error {
	fmt.Fprint(j.w, "\n]")
	for _, k := range sortedKeys(extra) {
		b, err := json.Marshal(extra[k])
		if err != nil {
			return err
		}
		fmt.Fprintf(j.w, ",\n%q:%s", k, b)
	}
	_, err := fmt.Fprintln(j.w, "}")
	return err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// PartitionsReport is a page of the partitions view.
type PartitionsReport struct {
	Now        time.Time         `json:"now"`
	Partitions []PartitionReport `json:"partitions"`
	Unlinked   []Unlinked        `json:"unlinked"`
	Next       string            `json:"next,omitempty"`
}

// partitions reads the report of every partition after after (nil: from
// the first), at most limit of them (0: all), calling fn with each and
// unlinked with each unlinked region, and returns where to continue.
func (v *viewer) partitions(ctx context.Context, after []byte, limit int, fn func(PartitionReport) error, unlinked func(Unlinked) error) ([]byte, error) {
	return walk(ctx, v.l, after, limit, func(id store.Identity) error {
		rep, err := v.inspect(ctx, id)
		if err != nil {
			return err
		}
		return fn(rep)
	}, unlinked)
}

func (c *Command) partitions(ctx context.Context, st *opened, o *options) error {
	v := c.viewer(st, o)
	now := v.now
	var unlinked []Unlinked
	onUnlinked := func(u Unlinked) error { unlinked = append(unlinked, u); return nil }
	if o.json {
		js := startJSON(c.cfg.Stdout, now, "partitions")
		_, err := v.partitions(ctx, nil, 0, func(rep PartitionReport) error { return js.add(rep) }, onUnlinked)
		if err != nil {
			return err
		}
		if unlinked == nil {
			unlinked = []Unlinked{}
		}
		return js.end(map[string]any{"unlinked": unlinked})
	}

	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, partitionHeader)
	var details []PartitionReport
	n := 0
	_, err := v.partitions(ctx, nil, 0, func(rep PartitionReport) error {
		partitionLine(tw, rep, now)
		if n++; n%flushEvery == 0 {
			_ = tw.Flush()
		}
		if rep.hasDetails() {
			details = append(details, rep)
		}
		return nil
	}, onUnlinked)
	_ = tw.Flush()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.cfg.Stdout, "%d partitions\n", n)
	for _, rep := range details {
		partitionDetails(c.cfg.Stdout, rep, now)
	}
	for _, u := range unlinked {
		fmt.Fprintf(c.cfg.Stdout, "\nnot linked: %s\n", u.text())
	}
	return nil
}

// text says what an unlinked region is and what to do.
func (u Unlinked) text() string {
	return fmt.Sprintf("%s (first key %s): no linked schema tells its partitions apart; those with a wake time are listed with the others (build an admin command that links the schema's generated package)", u.Prefix, u.FirstKey)
}

// partitionHeader heads the partitions table.
const partitionHeader = "PARTITION\tKIND\tSEQ\tRELAY\tBYTES\tOLDEST\tBLOCKED\tTIMERS\tNEXT DUE\tWAKE\tOUTCOMES\tNEXT ATTEMPT\tQUARANTINED\tDEAD\tCORRUPT"

// hasDetails reports whether the partitions view details rep below its
// table.
func (rep PartitionReport) hasDetails() bool {
	return len(rep.Relay.Blocked) > 0 || rep.Relay.Hold > 0 || len(rep.Corrupt) > 0 || len(rep.Newer) > 0 || len(rep.Timers) > 0 ||
		rep.Outcomes.Attempt > 0 || rep.Lease != nil || rep.Note != "" || len(rep.Members) > 0 || rep.DeadLetters.N > 0 ||
		rep.WakePaused || rep.Pause != nil || len(rep.Pauses) > 0
}

// NoteBeyondLease is Note when it says more than the lease does.
func (rep PartitionReport) NoteBeyondLease(now time.Time) string {
	if rep.Lease != nil && rep.Note == rep.Lease.text(now) {
		return ""
	}
	return rep.Note
}

// WakeText says when the due index wakes the partition: "-", "parked"
// (a scheduler's claim holds it), "paused" (a scheduler left due timers
// for a pause: until a resume, or "paused, in 5s" when its next timer no
// pause holds is due), "resumed: next tick", or when, relative to now.
func (rep PartitionReport) WakeText(now time.Time) string {
	switch {
	case rep.Parked:
		return "parked"
	case rep.WakePaused && rep.WakeResumed:
		return "resumed: next tick"
	case rep.WakePaused && rep.Wake == nil:
		return "paused"
	case rep.WakePaused:
		return "paused, " + rel(*rep.Wake, now)
	case rep.Wake == nil:
		return "-"
	}
	return rel(*rep.Wake, now)
}

func partitionLine(w io.Writer, rep PartitionReport, now time.Time) {
	kind := rep.Kind
	if kind == "" {
		kind = "?"
	}
	oldest := "-"
	if rep.Relay.Oldest != nil {
		oldest = rel(*rep.Relay.Oldest, now)
	}
	var kinds []string
	var next *time.Time
	for _, t := range rep.Timers {
		kinds = append(kinds, fmt.Sprintf("%s:%s", t.Name, t.Count))
		if next == nil || t.NextDue.Before(*next) {
			next = ptime(t.NextDue)
		}
	}
	timersCol, nextCol := "-", "-"
	if len(kinds) > 0 {
		timersCol, nextCol = strings.Join(kinds, ","), rel(*next, now)
	}
	outcomes, attempt := "-", "-"
	if rep.Outcomes.Rows > 0 || rep.Outcomes.Pending.N > 0 {
		outcomes = fmt.Sprintf("%d", rep.Outcomes.Rows)
	}
	if rep.Outcomes.NextAttempt != nil {
		attempt = rel(*rep.Outcomes.NextAttempt, now)
	}
	corrupt := fmt.Sprint(len(rep.Corrupt))
	if rep.CorruptMore {
		corrupt = "more than " + corrupt
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		rep.Partition, kind, rep.OutboxSequence, rep.Relay.Rows, rep.Relay.Bytes, oldest,
		len(rep.Relay.Blocked), timersCol, nextCol, rep.WakeText(now), outcomes, attempt, rep.Quarantined, rep.DeadLetters, corrupt)
}

func partitionDetails(w io.Writer, rep PartitionReport, now time.Time) {
	fmt.Fprintf(w, "\n%s\n", rep.Partition)
	if rep.Lease != nil {
		fmt.Fprintf(w, "  lease: %s\n", rep.Lease.text(now))
	}
	if rep.Parked {
		fmt.Fprintf(w, "  wake: parked by a scheduler's claim (until a timer write lowers it, or the claim's release sets it)\n")
	}
	if rep.WakePaused {
		fmt.Fprintf(w, "  wake: %s\n", rep.pausedWakeText(now))
	}
	if rep.Pause != nil {
		fmt.Fprintf(w, "  pause: %s\n", rep.Pause.Text(now))
	}
	for _, p := range rep.Pauses {
		fmt.Fprintf(w, "  pause: %s\n", p.Text(now))
	}
	if note := rep.NoteBeyondLease(now); note != "" {
		fmt.Fprintf(w, "  due timers not firing: %s\n", note)
	}
	if rep.Relay.Rows.N > 0 || rep.Relay.Cursor > 0 || rep.Relay.CycleEnd > 0 {
		fmt.Fprintf(w, "  relay scan: cursor %d, cycle end %d\n", rep.Relay.Cursor, rep.Relay.CycleEnd)
	}
	for _, b := range rep.Relay.Blocked {
		fmt.Fprintf(w, "  blocked target: %s\n", b)
	}
	if rep.Relay.Hold > 0 {
		fmt.Fprintf(w, "  relay held by a corrupt row: last moved %s later\n", rep.Relay.Hold)
	}
	for _, t := range rep.Timers {
		paused := ""
		if t.Paused {
			paused = " (paused)"
		}
		fmt.Fprintf(w, "  timers %s: %s, %d due, next %s (%s)%s\n", t.Name, t.Count, t.Due, stamp(t.NextDue), rel(t.NextDue, now), paused)
	}
	if rep.DeadLetters.N > 0 {
		fmt.Fprintf(w, "  dead letters: %s (timers -dead -partition lists them)\n", rep.DeadLetters)
	}
	if rep.Outcomes.NextAttempt != nil {
		fmt.Fprintf(w, "  outcomes: %d rows, %d bytes; next attempt %s (%s), attempt %d\n", rep.Outcomes.Rows, rep.Outcomes.Bytes,
			stamp(*rep.Outcomes.NextAttempt), rel(*rep.Outcomes.NextAttempt, now), rep.Outcomes.Attempt)
	}
	for _, m := range rep.Members {
		fmt.Fprintf(w, "  scheduler %s\n", m.text(now))
	}
	for _, r := range rep.Corrupt {
		class := r.Class
		if class == "" {
			class = "unknown class"
		}
		fmt.Fprintf(w, "  corrupt %s %s (rev %s): %s\n", class, r.Key, r.Rev, r.Corrupt)
	}
	if rep.CorruptMore {
		fmt.Fprintf(w, "  more corrupt rows: run scan on the partition\n")
	}
	for _, r := range rep.Newer {
		fmt.Fprintf(w, "  newer %s %s (rev %s): %s\n", r.Class, r.Key, r.Rev, r.Newer)
	}
}

// pausedWakeText says what a paused wake time means.
func (rep PartitionReport) pausedWakeText(now time.Time) string {
	switch {
	case rep.WakeResumed:
		return "a scheduler left due timers here for a pause that a resume has ended since: the schedulers' next tick fires them"
	case rep.Wake == nil:
		return "a scheduler left due timers here for a pause: the partition waits for a resume (or a timer write)"
	}
	return fmt.Sprintf("a scheduler left due timers here for a pause: the partition waits for a resume, or for its next timer no pause holds, due %s (%s)", stamp(*rep.Wake), rel(*rep.Wake, now))
}
