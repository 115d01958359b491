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
	run: (*Command).unblock,
}

// unblock unblocks a relay target with relay.Unblock.
func (c *Command) unblock(ctx context.Context, st *opened, o *options) error {
	if err := c.checkRepair("unblock", o, false, false); err != nil {
		return err
	}
	if o.targetID == nil {
		return usagef("unblock: -target is required")
	}
	r := store.ReaderOf(st.layer, st.partition(o))
	plan := &repairPlan{b: store.NewBatch()}
	u, err := relay.Unblock(ctx, r, plan.b, st.layer.Capabilities(), o.targetID, store.DecodeTime(nowMs(c)))
	switch {
	case errors.Is(err, relay.ErrNotBlocked) && len(u.Blocked) == 0:
		return refusedf("unblock: %s is not blocked in %s: no target is", formatTuple(o.targetID), formatTuple(o.partID))
	case errors.Is(err, relay.ErrNotBlocked):
		names := make([]string, len(u.Blocked))
		for i, t := range u.Blocked {
			names[i] = formatTuple(t)
		}
		return refusedf("unblock: %s is not blocked in %s (blocked: %s)", formatTuple(o.targetID), formatTuple(o.partID), strings.Join(names, ", "))
	case err != nil:
		return refusal("unblock", err)
	}
	plan.say("unblock the target %s (cursor %d, cycle end %d; %d other targets stay blocked)", formatTuple(o.targetID), u.Cursor, u.CycleEnd, len(u.Blocked)-1)
	plan.say("%s: the relay retries the target at its next fire", timerMove(timers.KindRelay, u.Timer))
	plan.done = formatTuple(o.targetID) + " unblocked"
	return c.apply(ctx, st, o, "unblock", plan)
}
