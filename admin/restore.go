package admin

import (
	"context"
	"errors"
	"flag"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var restoreCommand = subcommand{
	name: "restore", repair: true,
	short: "put a quarantined row back",
	long: "restore puts the row quarantine moved aside from -key of -partition back, byte for\n" +
		"byte, with the row moved with it, and re-arms what its queue needs: the relay\n" +
		"timer, now; the outcome backlog's row and bytes, and the delivery timer if the\n" +
		"backlog was empty; a timer's wake time. It is guarded on the quarantine record as\n" +
		"read (and on -expect, its rev as quarantined showed it: a hash of the record, not\n" +
		"a version number) and on the key being free.",
	flags: func(fs *flag.FlagSet, o *options) {
		repairFlags()(fs, o)
		fs.StringVar(&o.key, "key", "", "the quarantined row's key, as a tuple (16, 5) or x:HEX")
		fs.StringVar(&o.expect, "expect", "", "the quarantine record's rev as quarantined showed it (a hash of the record)")
	},
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.runRepair(ctx, st, o, &restoreRepair)
	},
}

var restoreRepair = repair{name: "restore", needKey: true, plan: planRestore}

// planRestore puts a quarantined row back through the operation of the
// package that owns the row's queue (relay.RestoreRow,
// outbox.RestorePending, timers.Restore), or quarantine.Restore for a row
// of no queue.
func planRestore(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	key := store.Key(req.key)
	l := rc.v.l
	r := store.ReaderOf(l, req.partitionOf())
	e, err := quarantine.Read(ctx, r, key)
	switch {
	case errors.Is(err, quarantine.ErrNotQuarantined):
		return nil, refusedf("restore: nothing is quarantined at %s in %s", formatTuple(key), formatTuple(req.partition))
	case err != nil:
		return nil, refusal("restore", err)
	}
	if req.expect != "" && rev(e.Record()) != req.expect {
		return nil, refusedf("restore refused: the quarantine record's rev (a hash of it) is %s, not %s: it changed since it was shown; nothing written", rev(e.Record()), req.expect)
	}
	sch, _, _ := schemaOf(req.partition)
	row := decodeRow(sch, key, e.Value)
	plan := &repairPlan{b: store.NewBatch()}
	plan.say("put %s %s (rev %s) back, quarantined %s by %s: %q", row.Class, row.Key, row.Rev, stamp(e.At), e.Who, e.Reason)
	if row.Corrupt != "" {
		plan.say("it is corrupt: %s: its queue is held again", row.Corrupt)
	}
	if row.Newer != "" {
		noteFormat(&row, l)
		plan.say("it is newer than this binary reads: %s: its queue is held again until a binary that reads it runs", row.Newer)
	}
	if e.Companion != nil {
		plan.say("with the timer's reference entry %s", formatTuple(e.Companion))
	}
	if err := restoreInQueue(ctx, rc, r, l.Capabilities(), plan, e, sch); err != nil {
		var occupied *quarantine.OccupiedError
		if errors.As(err, &occupied) {
			return nil, refusedf("restore: a row is at %s again (rev %s); nothing written", formatTuple(occupied.Key), rev(occupied.Value))
		}
		return nil, refusal("restore", err)
	}
	plan.done = row.Key + " restored"
	return plan, nil
}

// restoreInQueue adds to plan what puts e back, by its key's class, and
// says what the row's queue re-arms.
func restoreInQueue(ctx context.Context, rc *repairContext, r store.Reader, caps store.Capabilities, plan *repairPlan, e quarantine.Entry, sch registry.Schema) error {
	now := rc.nowStored()
	tag := gen.Tag(0) // a row of no queue
	if kc, ok := queueClass(sch, e.Key); ok {
		tag = gen.Tag(kc.Tag)
	}
	switch tag {
	case gen.TagRelayKey:
		m, err := relay.RestoreRow(ctx, r, plan.b, caps, e, now)
		if err != nil {
			return err
		}
		plan.say("%s", timerMove(timers.KindRelay, m))
	case gen.TagOutcomePendingKey:
		ch, err := outbox.RestorePending(ctx, r, plan.b, caps, e, now)
		if err != nil {
			return err
		}
		if e.BacklogRows > 0 || e.BacklogBytes > 0 {
			plan.say("the outcome backlog rises by %d row and %d bytes", e.BacklogRows, e.BacklogBytes)
		}
		if ch.Timer != nil {
			plan.say("%s", timerMove(timers.KindOutcomeDelivery, *ch.Timer))
		}
	case gen.TagTimerKey, gen.TagTimerRefKey:
		wake, err := timers.Restore(ctx, r, plan.b, e)
		if err != nil {
			return err
		}
		if !wake.IsZero() {
			plan.say("the partition wakes by the timer's due time, %s", stamp(wake))
		}
	default:
		return quarantine.Restore(ctx, r, plan.b, e)
	}
	return nil
}
