package admin

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/quarantine"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var quarantineCommand = subcommand{
	name: "quarantine", repair: true, args: "",
	short: "move a queue row aside, so that its queue resumes",
	long: "quarantine moves the row at -key of -partition (a relay row, a pending outcome, a\n" +
		"timer row or its reference entry) aside into the partition's quarantine range,\n" +
		"with who, when and why (-reason, required). No handler reads that range: the\n" +
		"source the row held resumes. The row is kept, listed by quarantined, and put back\n" +
		"by restore; the command never deletes it. In the same guarded batch: a relay row's\n" +
		"relay timer moves to now with its hold cleared; a pending outcome's backlog drops\n" +
		"by its row and bytes (and the delivery timer goes with the last row); a timer's\n" +
		"reference entry moves with it. The batch is guarded on the row as read (and on\n" +
		"-expect, the rev a view showed: a hash of the row's value, not a version\n" +
		"number): a row that changed is refused.",
	flags: func(fs *flag.FlagSet, o *options) {
		repairFlags()(fs, o)
		fs.StringVar(&o.key, "key", "", "the row's key, as a tuple (16, 5) or x:HEX")
		fs.StringVar(&o.expect, "expect", "", "the row's rev as a view showed it (a hash of its value): refuse if it changed")
	},
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.runRepair(ctx, st, o, &quarantineRepair)
	},
}

var quarantineRepair = repair{name: "quarantine", needKey: true, needReason: true, plan: planQuarantine}

// queueClass returns the library class of key, and whether it is one of
// the queues quarantine moves rows of.
func queueClass(sch registry.Schema, key []byte) (registry.KeyClass, bool) {
	kc, ks, ok := classOf(sch, key)
	if !ok || ks.Namespace != gen.SchemaNamespace {
		return kc, false
	}
	switch gen.Tag(kc.Tag) {
	case gen.TagRelayKey, gen.TagOutcomePendingKey, gen.TagTimerKey, gen.TagTimerRefKey:
		return kc, true
	}
	return kc, false
}

// planQuarantine moves a queue row aside through the operation of the
// package that owns the row's queue: relay.QuarantineRow,
// outbox.QuarantinePending or timers.Quarantine.
func planQuarantine(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	key := store.Key(req.key)
	sch, _, _ := schemaOf(req.partition)
	kc, ok := queueClass(sch, key)
	if !ok {
		class := kc.Name
		if class == "" {
			class = "of no known class"
		}
		return nil, usagef("quarantine: the key %s is %s: quarantine moves rows of the library's queues (RelayKey, OutcomePendingKey, TimerKey, TimerRefKey)", formatTuple(key), class)
	}
	l := rc.v.l
	r := store.ReaderOf(l, req.partitionOf())
	caps := l.Capabilities()
	plan := &repairPlan{b: store.NewBatch()}
	var (
		e quarantine.Entry
		// before and after say what the row's owner did besides moving
		// the row.
		before, after = func() {}, func() {}
		err           error
	)
	switch gen.Tag(kc.Tag) {
	case gen.TagRelayKey:
		var m timers.Moved
		e, m, err = relay.QuarantineRow(ctx, r, plan.b, caps, key, rc.note(req))
		after = func() {
			plan.say("%s, its hold cleared: the relay delivers the rows behind it", timerMove(timers.KindRelay, m))
		}
	case gen.TagOutcomePendingKey:
		var ch outbox.BacklogChange
		e, ch, err = outbox.QuarantinePending(ctx, r, plan.b, key, rc.note(req))
		after = func() { sayBacklogDrop(plan, e, ch) }
	default:
		var q timers.QuarantinedTimer
		q, err = timers.Quarantine(ctx, r, plan.b, key, rc.note(req))
		e = q.Entry
		before = func() {
			if !bytes.Equal(e.Key, key) {
				plan.say("the key names the reference entry of the timer row %s: the two move together, under the row's key", formatTuple(e.Key))
			}
			if q.KeptRef != nil {
				plan.say("the timer's reference entry %s does not name this row: it stays", formatTuple(q.KeptRef))
			}
		}
	}
	switch {
	case errors.Is(err, quarantine.ErrNoRow):
		return nil, refusedf("quarantine: no row at %s in %s", formatTuple(key), formatTuple(req.partition))
	case errors.Is(err, quarantine.ErrQuarantined):
		return nil, refusedf("quarantine: %s is quarantined already (restore it first); nothing written", formatTuple(key))
	case err != nil:
		return nil, refusal("quarantine", err)
	}
	named := e.Value
	if !bytes.Equal(e.Key, key) {
		named = e.CompanionValue
	}
	if req.expect != "" && rev(named) != req.expect {
		return nil, refusedf("quarantine refused: the row's rev (a hash of its value) is %s, not %s: it changed since it was shown; nothing written", rev(named), req.expect)
	}
	before()
	row := decodeRow(sch, e.Key, e.Value)
	plan.say("move %s %s (rev %s) aside", row.Class, row.Key, row.Rev)
	switch {
	case row.Corrupt != "":
		plan.say("it is corrupt: %s", row.Corrupt)
	case row.Newer != "":
		noteFormat(&row, l)
		plan.say("it is newer than this binary reads, not corrupt: %s (a binary that reads it would deliver it)", row.Newer)
	default:
		plan.say("it decodes: %s %s", row.Record, row.Short())
	}
	if e.Companion != nil {
		plan.say("with the timer's reference entry %s", formatTuple(e.Companion))
	}
	after()
	plan.done = fmt.Sprintf("%s moved aside; restore -partition '%s' -key '%s' puts it back", row.Key, formatTuple(req.partition), row.Key)
	return plan, nil
}

// sayBacklogDrop says what quarantining the pending outcome e did to the
// outcome backlog.
func sayBacklogDrop(plan *repairPlan, e quarantine.Entry, ch outbox.BacklogChange) {
	switch {
	case ch.After.Rows > 0:
		plan.say("the outcome backlog drops by %d row and %d bytes, to %d rows and %d bytes", e.BacklogRows, e.BacklogBytes, ch.After.Rows, ch.After.Bytes)
	case ch.TimerDeleted:
		plan.say("the outcome backlog empties: it and the delivery timer go")
	default:
		plan.say("the outcome backlog empties and goes (there is no delivery timer)")
	}
}
