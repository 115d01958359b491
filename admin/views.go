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
		"its timers by kind with the next due time, its outcome backlog and next attempt,\n" +
		"its quarantined rows and every corrupt row of the library's classes, with the\n" +
		"decoder's reason. It reads at most -max-rows rows of each queue of a partition\n" +
		"(counts past it say \"more than N\") and streams: a large store prints as it goes.",
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

func (c *Command) partitions(ctx context.Context, st *opened, o *options) error {
	now := c.now()
	var unlinked []Unlinked
	onUnlinked := func(u Unlinked) error { unlinked = append(unlinked, u); return nil }
	if o.json {
		js := startJSON(c.cfg.Stdout, now, "partitions")
		err := walk(ctx, st.layer, func(id store.Identity) error {
			rep, err := c.inspect(ctx, st.layer, id, o.maxRows)
			if err != nil {
				return err
			}
			return js.add(rep)
		}, onUnlinked)
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
	header := "PARTITION\tKIND\tSEQ\tRELAY\tBYTES\tOLDEST\tBLOCKED\tTIMERS\tNEXT DUE\tOUTCOMES\tNEXT ATTEMPT\tQUARANTINED\tCORRUPT"
	fmt.Fprintln(tw, header)
	var details []PartitionReport
	n := 0
	err := walk(ctx, st.layer, func(id store.Identity) error {
		rep, err := c.inspect(ctx, st.layer, id, o.maxRows)
		if err != nil {
			return err
		}
		c.partitionLine(tw, rep, now)
		if n++; n%flushEvery == 0 {
			_ = tw.Flush()
		}
		if len(rep.Relay.Blocked) > 0 || rep.Relay.Hold > 0 || len(rep.Corrupt) > 0 || len(rep.Timers) > 0 || rep.Outcomes.Attempt > 0 {
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
		c.partitionDetails(rep, now)
	}
	for _, u := range unlinked {
		fmt.Fprintf(c.cfg.Stdout, "\nnot linked: %s (first key %s): no linked schema tells its partitions apart; those with a wake time are listed above, others are not (build an admin command that links the schema's generated package)\n", u.Prefix, u.FirstKey)
	}
	return nil
}

func (c *Command) partitionLine(w io.Writer, rep PartitionReport, now time.Time) {
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
	fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
		rep.Partition, kind, rep.OutboxSequence, rep.Relay.Rows, rep.Relay.Bytes, oldest,
		len(rep.Relay.Blocked), timersCol, nextCol, outcomes, attempt, rep.Quarantined, corrupt)
}

func (c *Command) partitionDetails(rep PartitionReport, now time.Time) {
	w := c.cfg.Stdout
	fmt.Fprintf(w, "\n%s\n", rep.Partition)
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
		fmt.Fprintf(w, "  timers %s: %s, %d due, next %s (%s)\n", t.Name, t.Count, t.Due, stamp(t.NextDue), rel(t.NextDue, now))
	}
	if rep.Outcomes.NextAttempt != nil {
		fmt.Fprintf(w, "  outcomes: %d rows, %d bytes; next attempt %s (%s), attempt %d\n", rep.Outcomes.Rows, rep.Outcomes.Bytes,
			stamp(*rep.Outcomes.NextAttempt), rel(*rep.Outcomes.NextAttempt, now), rep.Outcomes.Attempt)
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
}
