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
	run: (*Command).redrive,
}

// redrive moves a timer to now with timers.RedriveTimer, or re-drives a
// dead letter (redriveDead).
func (c *Command) redrive(ctx context.Context, st *opened, o *options) error {
	if err := c.checkRepair("redrive", o, false, false); err != nil {
		return err
	}
	if o.dead {
		return c.redriveDead(ctx, st, o)
	}
	if o.deadDue != "" {
		return usagef("redrive: -due names a dead letter: give -dead too")
	}
	if o.kind == "" {
		return usagef("redrive: -kind is required")
	}
	kind, err := c.parseKind(o.kind)
	if err != nil {
		return err
	}
	r := store.ReaderOf(st.layer, st.partition(o))
	plan := &repairPlan{b: store.NewBatch()}
	now := c.now()
	m, err := timers.RedriveTimer(ctx, r, plan.b, st.layer.Capabilities(), kind, o.ref, store.DecodeTime(nowMs(c)))
	switch {
	case errors.Is(err, timers.ErrNoTimer):
		return refusedf("redrive: %s has no %s timer %q", formatTuple(o.partID), c.kindName(kind), o.ref)
	case errors.Is(err, store.ErrCorrupt):
		return refusedf("redrive: %v: quarantine the reference entry instead", err)
	case err != nil:
		return refusal("redrive", err)
	}
	if !m.From.After(now) {
		fmt.Fprintf(c.cfg.Stdout, "the %s timer %q is due already (%s, %s): nothing to do\n", c.kindName(kind), o.ref, stamp(m.From), rel(m.From, now))
		return nil
	}
	plan.say("move the %s timer %q from %s (%s) to now, its value unchanged", c.kindName(kind), o.ref, stamp(m.From), rel(m.From, now))
	if kind != timers.KindRelay && kind != timers.KindOutcomeDelivery {
		plan.say("if the service registers no handler of kind %d, the scheduler holds it again %s later", uint16(kind), timers.DefaultHeldBackoff)
	}
	plan.done = fmt.Sprintf("the %s timer %q is due now", c.kindName(kind), o.ref)
	return c.apply(ctx, st, o, "redrive", plan)
}
