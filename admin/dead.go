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
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.runRepair(ctx, st, o, &deleteDeadRepair)
	},
}

var (
	deleteDeadRepair  = repair{name: "delete-dead", plan: planDeleteDead}
	redriveDeadRepair = repair{name: "redrive-dead", plan: planRedriveDead}
)

// deadFlags are the flags naming a dead letter.
func deadFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.kind, "kind", "", "the timer's kind: a number or a name")
	fs.StringVar(&o.ref, "ref", "", "the timer's reference")
	fs.StringVar(&o.deadDue, "due", "", "the dead letter's due time as timers -dead shows it, when the timer has several")
}

// findDeadLetter reads the dead letter (kind, ref) of the request's
// partition, picked by its due time when there are several. name is the
// repair's.
func findDeadLetter(ctx context.Context, rc *repairContext, req repairRequest, name string) (timers.DeadLetter, error) {
	v := rc.v
	if req.kind == "" {
		return timers.DeadLetter{}, usagef("%s: -kind is required", name)
	}
	kind, err := v.parseKind(req.kind)
	if err != nil {
		return timers.DeadLetter{}, err
	}
	var due time.Time
	if req.deadDue != "" {
		if due, err = time.Parse(time.RFC3339Nano, req.deadDue); err != nil {
			return timers.DeadLetter{}, usagef("%s: -due %q is no time as timers -dead shows it (2026-03-01T11:00:00.000Z)", name, req.deadDue)
		}
	}
	p := req.partitionOf()
	var found []timers.DeadLetter
	var after store.Cursor
	for {
		dls, next, err := timers.DeadLetters(ctx, store.ReaderOf(v.l, p), after, 256)
		if err != nil {
			if errors.Is(err, store.ErrCorrupt) {
				return timers.DeadLetter{}, refusedf("%s: %v: quarantine the row instead", name, err)
			}
			return timers.DeadLetter{}, err
		}
		for _, d := range dls {
			if d.Kind == kind && d.Reference == req.ref && (due.IsZero() || d.DueAt.Equal(due)) {
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
		return timers.DeadLetter{}, refusedf("%s: %s has no dead letter of the %s timer %q%s", name, formatTuple(req.partition), v.kindName(kind), req.ref, dueText(due))
	case 1:
		return found[0], nil
	}
	dues := make([]string, len(found))
	for i, d := range found {
		dues[i] = stamp(d.DueAt)
	}
	return timers.DeadLetter{}, usagef("%s: the %s timer %q has %d dead letters: pick one with -due (%s)", name, v.kindName(kind), req.ref, len(found), strings.Join(dues, ", "))
}

func dueText(due time.Time) string {
	if due.IsZero() {
		return ""
	}
	return " due " + stamp(due)
}

// sayDeadLetter adds what dead letter d holds to plan.
func sayDeadLetter(v *viewer, plan *repairPlan, d timers.DeadLetter) {
	perm := ""
	if d.Permanent {
		perm = ", the last permanent"
	}
	plan.say("the dead letter of the %s timer %q, due %s, dead since %s (%s) after %d attempts%s", v.kindName(d.Kind), d.Reference,
		stamp(d.DueAt), stamp(d.At), rel(d.At, v.now), d.Attempts, perm)
	plan.say("last error: %q", d.LastError)
	plan.say("value: %s", timerValueText(d.Kind, d.Value, true))
}

// planRedriveDead is redrive -dead: timers.Redrive.
func planRedriveDead(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	d, err := findDeadLetter(ctx, rc, req, "redrive")
	if err != nil {
		return nil, err
	}
	v := rc.v
	plan := &repairPlan{b: store.NewBatch()}
	if err := timers.Redrive(plan.b, v.l.Capabilities(), d, rc.now()); err != nil {
		return nil, usagef("redrive: %v", err)
	}
	sayDeadLetter(v, plan, d)
	plan.say("make it a timer due now with its value and no failed attempts (refused if a %s timer %q exists)", v.kindName(d.Kind), d.Reference)
	plan.done = fmt.Sprintf("the %s timer %q is due now", v.kindName(d.Kind), d.Reference)
	return plan, nil
}

// planDeleteDead is delete-dead: timers.DeleteDeadLetter.
func planDeleteDead(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	d, err := findDeadLetter(ctx, rc, req, "delete-dead")
	if err != nil {
		return nil, err
	}
	plan := &repairPlan{b: store.NewBatch()}
	if err := timers.DeleteDeadLetter(plan.b, d); err != nil {
		return nil, usagef("delete-dead: %v", err)
	}
	sayDeadLetter(rc.v, plan, d)
	plan.say("delete it: the timer never fires again")
	plan.done = fmt.Sprintf("the dead letter of the %s timer %q is deleted", rc.v.kindName(d.Kind), d.Reference)
	return plan, nil
}
