package admin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

func init() {
	subcommands = append(subcommands, &subcommand{
		name: "delete-dead", repair: true,
		short: "delete a dead letter (a timer that used its attempts)",
		long: "delete-dead deletes the dead letter (-kind, -ref) of -partition, as timers -dead\n" +
			"lists it: a timer that used its retry policy's attempts or failed permanently. It\n" +
			"prints what the dead letter held (value, attempts, last error) first. When the\n" +
			"timer has several dead letters, -due picks one by the due time the view shows.\n" +
			"The batch is guarded on the dead letter's rows as read: one that changed (re-driven\n" +
			"or deleted meanwhile) is refused.",
		flags: func(fs *flag.FlagSet, o *options) {
			repairFlags()(fs, o)
			deadFlags(fs, o)
		},
		run: (*Command).deleteDead,
	})
	helpOrder = append(helpOrder, "delete-dead")
}

// deadFlags are the flags naming a dead letter.
func deadFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.kind, "kind", "", "the timer's kind: a number or a name")
	fs.StringVar(&o.ref, "ref", "", "the timer's reference")
	fs.StringVar(&o.deadDue, "due", "", "the dead letter's due time as timers -dead shows it, when the timer has several")
}

// DeadLetterRow is one dead letter as the timers -dead view shows it.
type DeadLetterRow struct {
	Partition string    `json:"partition"`
	Kind      uint16    `json:"kind"`
	Name      string    `json:"name"`
	Reference string    `json:"reference"`
	Due       time.Time `json:"due"`
	Dead      time.Time `json:"dead"`
	Attempts  int       `json:"attempts"`
	Permanent bool      `json:"permanent"`
	LastError string    `json:"last_error"`
	Value     string    `json:"value"`
}

// deadLetterRows lists up to maxRows dead letters of p.
func (c *Command) deadLetterRows(ctx context.Context, s store.Store, id store.Identity, maxRows int) ([]DeadLetterRow, bool, error) {
	idb, _ := id.AppendTuple(nil)
	var out []DeadLetterRow
	var after store.Cursor
	for len(out) < maxRows {
		dls, next, err := timers.DeadLetters(ctx, store.ReaderOf(s, id), after, min(maxRows-len(out), 256))
		if err != nil {
			return out, false, err
		}
		for _, d := range dls {
			out = append(out, DeadLetterRow{
				Partition: formatTuple(idb), Kind: uint16(d.Kind), Name: c.kindName(d.Kind), Reference: d.Reference,
				Due: d.DueAt.UTC(), Dead: d.At.UTC(), Attempts: d.Attempts, Permanent: d.Permanent, LastError: d.LastError,
				Value: timerValueText(d.Kind, d.Value),
			})
		}
		if next == nil {
			return out, false, nil
		}
		after = next
	}
	return out, true, nil
}

// timerValueText formats a timer's value as the timers view does: the
// library's kinds decoded, a service's as a tuple or x:HEX.
func timerValueText(kind timers.Kind, v store.Value) string {
	if len(v) == 0 {
		return `""`
	}
	if name, decode := timerValueDecoder(uint16(kind)); decode != nil {
		if rec, err := decode(v); err == nil {
			_ = name
			return formatValue(reflect.ValueOf(rec))
		}
	}
	return formatTuple(v)
}

// deadView is timers -dead.
func (c *Command) deadView(ctx context.Context, st *opened, o *options) error {
	now := c.now()
	var all []DeadLetterRow
	more := false
	each := func(id store.Identity) error {
		rows, m, err := c.deadLetterRows(ctx, st.layer, id, o.maxRows)
		all = append(all, rows...)
		more = more || m
		return err
	}
	if err := eachPartition(ctx, st, o, each); err != nil {
		return err
	}
	if o.json {
		if all == nil {
			all = []DeadLetterRow{}
		}
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"now": now.UTC(), "dead_letters": all, "more": more})
	}
	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKIND\tREFERENCE\tDUE\tDEAD\tATTEMPTS\tLAST ERROR\tVALUE")
	for _, d := range all {
		attempts := fmt.Sprint(d.Attempts)
		if d.Permanent {
			attempts += ", permanent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%q\t%s\t%s (%s)\t%s\t%q\t%s\n", d.Partition, d.Name, d.Reference, stamp(d.Due),
			stamp(d.Dead), rel(d.Dead, now), attempts, d.LastError, d.Value)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d dead letters\n", len(all))
	if more {
		fmt.Fprintf(c.cfg.Stdout, "more dead letters follow in some partitions: raise -max-rows\n")
	}
	return nil
}

// findDeadLetter reads the dead letter of (-kind, -ref) of -partition,
// picked by -due when there are several. name is the repair's.
func (c *Command) findDeadLetter(ctx context.Context, st *opened, o *options, name string) (timers.DeadLetter, error) {
	if o.kind == "" {
		return timers.DeadLetter{}, usagef("%s: -kind is required", name)
	}
	kind, err := c.parseKind(o.kind)
	if err != nil {
		return timers.DeadLetter{}, err
	}
	var due time.Time
	if o.deadDue != "" {
		if due, err = time.Parse(time.RFC3339Nano, o.deadDue); err != nil {
			return timers.DeadLetter{}, usagef("%s: -due %q is no time as timers -dead shows it (2026-03-01T11:00:00.000Z)", name, o.deadDue)
		}
	}
	p := st.partition(o)
	var found []timers.DeadLetter
	var after store.Cursor
	for {
		dls, next, err := timers.DeadLetters(ctx, store.ReaderOf(st.layer, p), after, 256)
		if err != nil {
			if errors.Is(err, store.ErrCorrupt) {
				return timers.DeadLetter{}, refusedf("%s: %v: quarantine the row instead", name, err)
			}
			return timers.DeadLetter{}, err
		}
		for _, d := range dls {
			if d.Kind == kind && d.Reference == o.ref && (due.IsZero() || d.DueAt.Equal(due)) {
				found = append(found, d)
			}
		}
		if next == nil {
			break
		}
		after = next
	}
	switch len(found) {
	case 0:
		return timers.DeadLetter{}, refusedf("%s: %s has no dead letter of the %s timer %q%s", name, formatTuple(o.partID), c.kindName(kind), o.ref, dueText(due))
	case 1:
		return found[0], nil
	}
	dues := make([]string, len(found))
	for i, d := range found {
		dues[i] = stamp(d.DueAt)
	}
	return timers.DeadLetter{}, usagef("%s: the %s timer %q has %d dead letters: pick one with -due (%s)", name, c.kindName(kind), o.ref, len(found), strings.Join(dues, ", "))
}

func dueText(due time.Time) string {
	if due.IsZero() {
		return ""
	}
	return " due " + stamp(due)
}

// sayDeadLetter adds what dead letter d holds to plan.
func (c *Command) sayDeadLetter(plan *repairPlan, d timers.DeadLetter, now time.Time) {
	perm := ""
	if d.Permanent {
		perm = ", the last permanent"
	}
	plan.say("the dead letter of the %s timer %q, due %s, dead since %s (%s) after %d attempts%s", c.kindName(d.Kind), d.Reference,
		stamp(d.DueAt), stamp(d.At), rel(d.At, now), d.Attempts, perm)
	plan.say("last error: %q", d.LastError)
	plan.say("value: %s", timerValueText(d.Kind, d.Value))
}

// redriveDead is redrive -dead.
func (c *Command) redriveDead(ctx context.Context, st *opened, o *options) error {
	d, err := c.findDeadLetter(ctx, st, o, "redrive")
	if err != nil {
		return err
	}
	now := c.now()
	plan := &repairPlan{b: store.NewBatch()}
	if err := timers.Redrive(plan.b, st.layer.Capabilities(), d, now); err != nil {
		return usagef("redrive: %v", err)
	}
	c.sayDeadLetter(plan, d, now)
	plan.say("make it a timer due now with its value and no failed attempts (refused if a %s timer %q exists)", c.kindName(d.Kind), d.Reference)
	plan.done = fmt.Sprintf("the %s timer %q is due now", c.kindName(d.Kind), d.Reference)
	return c.apply(ctx, st, o, "redrive", plan)
}

func (c *Command) deleteDead(ctx context.Context, st *opened, o *options) error {
	if err := c.checkRepair("delete-dead", o, false, false); err != nil {
		return err
	}
	d, err := c.findDeadLetter(ctx, st, o, "delete-dead")
	if err != nil {
		return err
	}
	plan := &repairPlan{b: store.NewBatch()}
	if err := timers.DeleteDeadLetter(plan.b, d); err != nil {
		return usagef("delete-dead: %v", err)
	}
	c.sayDeadLetter(plan, d, c.now())
	plan.say("delete it: the timer never fires again")
	plan.done = fmt.Sprintf("the dead letter of the %s timer %q is deleted", c.kindName(d.Kind), d.Reference)
	return c.apply(ctx, st, o, "delete-dead", plan)
}
