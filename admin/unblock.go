package admin

import (
	"context"
	"errors"
	"flag"
	"strings"

	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var unblockCommand = subcommand{
	name: "unblock", repair: true,
	short: "unblock a relay target blocked for the rest of the cycle",
	long: "unblock removes -target from the relay's blocked targets of -partition (the\n" +
		"source), guarded on the scan state as read, and moves the relay timer to now, so\n" +
		"that the relay retries the target at once instead of at the next cycle.",
	flags: func(fs *flag.FlagSet, o *options) {
		repairFlags()(fs, o)
		fs.StringVar(&o.target, "target", "", "the blocked target partition, as partitions shows it")
	},
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.runRepair(ctx, st, o, &unblockRepair)
	},
}

var unblockRepair = repair{name: "unblock", plan: planUnblock}

// planUnblock unblocks a relay target with relay.Unblock.
func planUnblock(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	if req.target == nil {
		return nil, usagef("unblock: -target is required")
	}
	l := rc.v.l
	r := store.ReaderOf(l, req.partitionOf())
	plan := &repairPlan{b: store.NewBatch()}
	u, err := relay.Unblock(ctx, r, plan.b, l.Capabilities(), req.target, rc.nowStored())
	switch {
	case errors.Is(err, relay.ErrNotBlocked) && len(u.Blocked) == 0:
		return nil, refusedf("unblock: %s is not blocked in %s: no target is", formatTuple(req.target), formatTuple(req.partition))
	case errors.Is(err, relay.ErrNotBlocked):
		names := make([]string, len(u.Blocked))
		for i, t := range u.Blocked {
			names[i] = formatTuple(t)
		}
		return nil, refusedf("unblock: %s is not blocked in %s (blocked: %s)", formatTuple(req.target), formatTuple(req.partition), strings.Join(names, ", "))
	case err != nil:
		return nil, refusal("unblock", err)
	}
	plan.say("unblock the target %s (cursor %d, cycle end %d; %d other targets stay blocked)", formatTuple(req.target), u.Cursor, u.CycleEnd, len(u.Blocked)-1)
	plan.say("%s: the relay retries the target at its next fire", timerMove(timers.KindRelay, u.Timer))
	plan.done = formatTuple(req.target) + " unblocked"
	return plan, nil
}
