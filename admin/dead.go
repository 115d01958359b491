package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var deleteDeadCommand = subcommand{
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
}

// deadFlags are the flags naming a dead letter.
func deadFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.kind, "kind", "", "the timer's kind: a number or a name")
	fs.StringVar(&o.ref, "ref", "", "the timer's reference")
	fs.StringVar(&o.deadDue, "due", "", "the dead letter's due time as timers -dead shows it, when the timer has several")
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
