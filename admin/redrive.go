package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var redriveCommand = subcommand{
	name: "redrive", repair: true,
	short: "move a held or waiting timer, or a dead letter (-dead), to now",
	long: "redrive moves the timer (-kind, -ref) of -partition to now, its value unchanged\n" +
		"and its failed attempts cleared, guarded on its reference entry and row as read,\n" +
		"so that the scheduler fires it at its next tick. A timer of a kind the service\n" +
		"registers no handler for is held again (HeldBackoff later) when it fires. With\n" +
		"-dead it re-drives the dead letter (-kind, -ref) instead, as timers -dead lists\n" +
		"it (-due picks one of several): it becomes a timer due now with its value and no\n" +
		"failed attempts, guarded on the dead letter's rows as read and on there being no\n" +
		"timer of (-kind, -ref).",
	flags: func(fs *flag.FlagSet, o *options) {
		repairFlags()(fs, o)
		fs.StringVar(&o.kind, "kind", "", "the timer's kind: a number or a name (relay, outcome-delivery)")
		fs.StringVar(&o.ref, "ref", "", "the timer's reference (\"\" for the relay and delivery timers)")
		fs.BoolVar(&o.dead, "dead", false, "re-drive the timer's dead letter")
		fs.StringVar(&o.deadDue, "due", "", "with -dead: the dead letter's due time as timers -dead shows it, when the timer has several")
	},
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		if o.dead {
			return c.runRepair(ctx, st, o, &redriveDeadRepair)
		}
		if o.deadDue != "" {
			return usagef("redrive: -due names a dead letter: give -dead too")
		}
		return c.runRepair(ctx, st, o, &redriveRepair)
	},
}

var redriveRepair = repair{name: "redrive", plan: planRedrive}

// planRedrive moves a timer to now with timers.RedriveTimer.
func planRedrive(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	if req.kind == "" {
		return nil, usagef("redrive: -kind is required")
	}
	v := rc.v
	kind, err := v.parseKind(req.kind)
	if err != nil {
		return nil, err
	}
	r := store.ReaderOf(v.l, req.partitionOf())
	plan := &repairPlan{b: store.NewBatch()}
	now := rc.now()
	m, err := timers.RedriveTimer(ctx, r, plan.b, v.l.Capabilities(), kind, req.ref, rc.nowStored())
	switch {
	case errors.Is(err, timers.ErrNoTimer):
		return nil, refusedf("redrive: %s has no %s timer %q", formatTuple(req.partition), v.kindName(kind), req.ref)
	case errors.Is(err, store.ErrCorrupt):
		return nil, refusedf("redrive: %v: quarantine the reference entry instead", err)
	case err != nil:
		return nil, refusal("redrive", err)
	}
	if !m.From.After(now) {
		return &repairPlan{nothing: fmt.Sprintf("the %s timer %q is due already (%s, %s): nothing to do", v.kindName(kind), req.ref, stamp(m.From), rel(m.From, now))}, nil
	}
	plan.say("move the %s timer %q from %s (%s) to now, its value unchanged", v.kindName(kind), req.ref, stamp(m.From), rel(m.From, now))
	if !library(kind) {
		plan.say("if the service registers no handler of kind %d, the scheduler holds it again %s later", uint16(kind), timers.DefaultHeldBackoff)
	}
	plan.done = fmt.Sprintf("the %s timer %q is due now", v.kindName(kind), req.ref)
	return plan, nil
}
