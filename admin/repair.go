package admin

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Design note: repairs.
//
// A repair is one guarded batch, applied once: the command reads what it
// will change, shows it, asks for confirmation (-yes, or "yes" typed at a
// terminal), and applies a batch guarded by store.Equals (or Absent) on
// every row it read, so that a row that changed since it was read, by the
// service or another operator, makes the batch fail whole: nothing is
// written, and the command says which row changed. -expect pins the
// revision an earlier view showed, so a script refuses a row that changed
// since a human looked at it. Nothing is retried: the operator decides
// again on what is there now.

func repairFlags() func(fs *flag.FlagSet, o *options) {
	return func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.BoolVar(&o.yes, "yes", false, "write without asking (required where stdin is not a terminal)")
		fs.StringVar(&o.reason, "reason", "", "why: recorded with a quarantined row, printed by the others")
		fs.StringVar(&o.who, "who", "", "who repairs (default the OS user)")
	}
}

func init() {
	subcommands = append(subcommands,
		&subcommand{
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
				"-expect, the revision a view showed): a row that changed is refused.",
			flags: func(fs *flag.FlagSet, o *options) {
				repairFlags()(fs, o)
				fs.StringVar(&o.key, "key", "", "the row's key, as a tuple (16, 5) or x:HEX")
				fs.StringVar(&o.expect, "expect", "", "the row's revision as a view showed it (rev): refuse if it changed")
			},
			run: (*Command).quarantine,
		},
		&subcommand{
			name: "restore", repair: true,
			short: "put a quarantined row back",
			long: "restore puts the row quarantine moved aside from -key of -partition back, byte for\n" +
				"byte, with the row moved with it, and re-arms what its queue needs: the relay\n" +
				"timer, now; the outcome backlog's row and bytes, and the delivery timer if the\n" +
				"backlog was empty; a timer's wake time. It is guarded on the quarantine record as\n" +
				"read (and on -expect, its revision as quarantined showed it) and on the key being\n" +
				"free.",
			flags: func(fs *flag.FlagSet, o *options) {
				repairFlags()(fs, o)
				fs.StringVar(&o.key, "key", "", "the quarantined row's key, as a tuple (16, 5) or x:HEX")
				fs.StringVar(&o.expect, "expect", "", "the quarantine record's revision as quarantined showed it")
			},
			run: (*Command).restore,
		},
		&subcommand{
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
		},
		&subcommand{
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
		},
	)
}

// quarantineKeys returns the keys of the quarantine record and moved
// value of a row at key. It fails as bad input for a key too long to
// quarantine.
func quarantineKeys(key []byte) (store.Key, store.Key, error) {
	qk, err := gen.AppendQuarantineKey(nil, key)
	if err != nil {
		return nil, nil, usagef("the key is too long to quarantine: %v", err)
	}
	qvk, err := gen.AppendQuarantineValueKey(nil, key)
	if err != nil {
		return nil, nil, usagef("the key is too long to quarantine: %v", err)
	}
	return qk, qvk, nil
}

// repairPlan is a repair's batch and what it says.
type repairPlan struct {
	b     *store.Batch
	lines []string // what it does, shown before confirmation
	done  string   // said after it committed
}

func (p *repairPlan) say(format string, a ...any) {
	p.lines = append(p.lines, fmt.Sprintf(format, a...))
}

func whoami(o *options) string {
	if o.who != "" {
		return o.who
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// checkRepair refuses, before anything is opened, a repair that could
// not be confirmed or lacks what it needs.
func (c *Command) checkRepair(name string, o *options, needKey, needReason bool) error {
	switch {
	case o.partID == nil:
		return usagef("%s: -partition is required", name)
	case needKey && o.keyBytes == nil:
		return usagef("%s: -key is required", name)
	case needReason && strings.TrimSpace(o.reason) == "":
		return usagef("%s: -reason is required: say why; it is recorded beside the row", name)
	case len(o.reason) > gen.MaxQuarantineV1Reason:
		return usagef("%s: -reason has %d bytes, at most %d", name, len(o.reason), gen.MaxQuarantineV1Reason)
	case len(whoami(o)) > gen.MaxQuarantineV1Who:
		return usagef("%s: -who has %d bytes, at most %d", name, len(whoami(o)), gen.MaxQuarantineV1Who)
	case !o.yes && !c.forceTerminal && !isTerminal(c.cfg.Stdin):
		return usagef("%s: refusing to write without -yes: stdin is not a terminal to confirm at", name)
	}
	return nil
}

// apply shows the plan, asks for confirmation and applies its batch once.
func (c *Command) apply(ctx context.Context, st *opened, o *options, name string, plan *repairPlan) error {
	p := st.partition(o)
	fmt.Fprintf(c.cfg.Stdout, "%s in %s (%s):\n", name, formatTuple(o.partID), st.where)
	for _, l := range plan.lines {
		fmt.Fprintf(c.cfg.Stdout, "  %s\n", l)
	}
	if o.reason != "" {
		fmt.Fprintf(c.cfg.Stdout, "  reason: %q, by %s\n", o.reason, whoami(o))
	}
	if !o.yes {
		fmt.Fprint(c.cfg.Stdout, "type yes to write this: ")
		line, _ := bufio.NewReader(c.cfg.Stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return refusedf("%s: not confirmed; nothing written", name)
		}
	}
	if c.beforeApply != nil {
		c.beforeApply()
	}
	if err := plan.b.Validate(st.layer.Capabilities()); err != nil {
		return refusedf("%s: the repair does not fit one batch: %v; nothing written", name, err)
	}
	out, err := st.layer.Apply(ctx, p, plan.b)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !out.Committed() {
		what := "the partition's wake time"
		if out.Failed.Key != nil {
			sch, _, _ := schemaOf(o.partID)
			r := decodeRow(sch, out.Failed.Key, nil)
			what = r.Key
			if r.Class != "" {
				what = r.Class + " " + r.Key
			}
		}
		return refusedf("%s refused: %s changed since it was read; nothing written (run it again to see it as it is now)", name, what)
	}
	fmt.Fprintf(c.cfg.Stdout, "done: %s\n", plan.done)
	return nil
}

// rearm adds to b what moves the library timer of kind to now, guarded on
// its reference entry as read, with value (keep: its own value), or
// creates it with value when it is absent.
func rearm(ctx context.Context, st *opened, p store.Partition, b *store.Batch, kind timers.Kind, value store.Value, keep bool, now uint64) (string, error) {
	ref, due, err := timers.ReadRef(ctx, st.layer, p, kind, "")
	if err != nil {
		return "", err
	}
	if ref != nil && keep {
		tk, _ := timers.TimerKey(due, kind, "")
		v, ok, err := st.layer.Get(ctx, p, tk)
		if err != nil {
			return "", err
		}
		if ok {
			b.Require(store.Equals(tk, v))
			value = v
		}
	}
	if err := timers.Schedule(b, st.layer.Capabilities(), ref, timers.Timer{Kind: kind, DueAt: store.DecodeTime(max(now, 1)), Value: value}); err != nil {
		return "", err
	}
	if ref == nil {
		return fmt.Sprintf("the %s timer is created, due now", kind), nil
	}
	return fmt.Sprintf("the %s timer moves from %s to now", kind, stamp(msTime(storedMs(due)))), nil
}

func nowMs(c *Command) uint64 { return uint64(max(c.now().UnixMilli(), 1)) }

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

func (c *Command) quarantine(ctx context.Context, st *opened, o *options) error {
	if err := c.checkRepair("quarantine", o, true, true); err != nil {
		return err
	}
	key := store.Key(o.keyBytes)
	sch, _, _ := schemaOf(o.partID)
	kc, ok := queueClass(sch, key)
	if !ok {
		class := kc.Name
		if class == "" {
			class = "of no known class"
		}
		return usagef("quarantine: the key %s is %s: quarantine moves rows of the library's queues (RelayKey, OutcomePendingKey, TimerKey, TimerRefKey)", formatTuple(key), class)
	}
	p := st.partition(o)
	now := nowMs(c)
	plan := &repairPlan{b: store.NewBatch()}
	rec := gen.QuarantineV1{AtMs: now, Who: whoami(o), Reason: o.reason}

	v, ok, err := st.layer.Get(ctx, p, key)
	if err != nil {
		return err
	}
	if !ok {
		return refusedf("quarantine: no row at %s in %s", formatTuple(key), formatTuple(o.partID))
	}
	if o.expect != "" && rev(v) != o.expect {
		return refusedf("quarantine refused: the row's revision is %s, not %s: it changed since it was shown; nothing written", rev(v), o.expect)
	}
	var companion store.Key
	var companionValue store.Value
	switch gen.Tag(kc.Tag) {
	case gen.TagTimerRefKey:
		// The reference entry of a timer whose row exists moves with its
		// row, under the row's key: the pair is one timer.
		rk, kerr := gen.ParseTimerRefKey(key)
		due, derr := timers.DecodeRef(v)
		if kerr == nil && derr == nil {
			tk, _ := timers.TimerKey(due, timers.Kind(rk.Kind), rk.Reference)
			tv, ok, err := st.layer.Get(ctx, p, tk)
			if err != nil {
				return err
			}
			if ok {
				if err := refuseLibraryTimer(timers.Kind(rk.Kind)); err != nil {
					return err
				}
				plan.say("the key names the reference entry of the timer row %s: the two move together, under the row's key", formatTuple(tk))
				companion, companionValue = key, v
				key, v = tk, tv
			}
		}
	case gen.TagTimerKey:
		if tk, err := gen.ParseTimerKey(key); err == nil {
			if err := refuseLibraryTimer(timers.Kind(tk.Kind)); err != nil {
				return err
			}
			rk, _ := timers.RefKey(timers.Kind(tk.Kind), tk.Reference)
			rv, ok, err := st.layer.Get(ctx, p, rk)
			if err != nil {
				return err
			}
			if due, derr := timers.DecodeRef(rv); ok && derr == nil && storedMs(due) == tk.DueAtMs {
				companion, companionValue = rk, rv
			} else {
				plan.b.Require(store.Guard(rk, rv))
				plan.say("the timer's reference entry %s does not name this row: it stays", formatTuple(rk))
			}
		}
	}
	qk, qvk, err := quarantineKeys(key)
	if err != nil {
		return err
	}
	vs, err := st.layer.GetMany(ctx, p, []store.Key{qk, qvk})
	if err != nil {
		return err
	}
	if vs[0] != nil || vs[1] != nil {
		return refusedf("quarantine: %s is quarantined already (restore it first); nothing written", formatTuple(key))
	}
	row := decodeRow(sch, key, v)
	plan.say("move %s %s (rev %s) aside", row.Class, row.Key, row.Rev)
	if row.Corrupt != "" {
		plan.say("it is corrupt: %s", row.Corrupt)
	} else {
		plan.say("it decodes: %s %s", row.Record, row.Value)
	}
	b := plan.b
	b.Require(store.Equals(key, v), store.Absent(qk), store.Absent(qvk)).Delete(key)
	if companion != nil {
		b.Require(store.Equals(companion, companionValue)).Delete(companion)
		rec.Companion, rec.CompanionValue = companion, companionValue
		plan.say("with the timer's reference entry %s", formatTuple(companion))
	}
	switch gen.Tag(kc.Tag) {
	case gen.TagRelayKey:
		// The row's hold ends with it: the relay timer moves to now with
		// an empty value, and the relay delivers the rows behind it.
		msg, err := rearm(ctx, st, p, b, timers.KindRelay, nil, false, now)
		if err != nil {
			return err
		}
		plan.say("%s, its hold cleared: the relay delivers the rows behind it", msg)
	case gen.TagOutcomePendingKey:
		if err := c.dropFromBacklog(ctx, st, p, plan, &rec, v); err != nil {
			return err
		}
	}
	qv, err := gen.EncodeQuarantineV1(rec)
	if err != nil {
		return usagef("quarantine: %v", err)
	}
	b.Put(qk, qv).Put(qvk, v)
	plan.done = fmt.Sprintf("%s moved aside; restore -partition '%s' -key '%s' puts it back", row.Key, formatTuple(o.partID), row.Key)
	return c.apply(ctx, st, o, "quarantine", plan)
}

// refuseLibraryTimer refuses to quarantine the relay or delivery timer:
// their queues would be left without the timer that drains them.
func refuseLibraryTimer(k timers.Kind) error {
	if k == timers.KindRelay || k == timers.KindOutcomeDelivery {
		return usagef("quarantine: the %s timer drains its queue and is not quarantined: quarantine the row that holds it, or redrive it", k)
	}
	return nil
}

// dropFromBacklog adds to plan what takes a pending outcome row out of
// the partition's backlog: one row and its record's bytes, guarded on the
// backlog (and the record) as read; the backlog and the delivery timer go
// with the last row, as delivery does.
func (c *Command) dropFromBacklog(ctx context.Context, st *opened, p store.Partition, plan *repairPlan, rec *gen.QuarantineV1, pending store.Value) error {
	bk := store.Key(gen.AppendOutcomeBacklogKey(nil))
	bv, _, err := st.layer.Get(ctx, p, bk)
	if err != nil {
		return err
	}
	backlog, err := gen.DecodeBacklog(bv)
	if bv != nil && err != nil {
		return refusedf("quarantine: the outcome backlog does not decode (%v): nothing written", err)
	}
	var bytes uint64
	if pv, err := gen.DecodeOutcomePendingV1(pending); err == nil && len(pv.Key) > 0 {
		rv, ok, err := st.layer.Get(ctx, p, pv.Key)
		if err != nil {
			return err
		}
		plan.b.Require(store.Guard(pv.Key, rv))
		if ok {
			bytes = uint64(len(rv))
		}
	}
	plan.b.Require(store.Guard(bk, bv))
	if backlog.Rows > 0 {
		rec.BacklogRows = 1
	}
	rec.BacklogBytes = min(bytes, backlog.Bytes)
	left := gen.Backlog{Rows: backlog.Rows - rec.BacklogRows, Bytes: backlog.Bytes - rec.BacklogBytes}
	if left.Rows == 0 {
		plan.b.Delete(bk)
		ref, _, err := timers.ReadRef(ctx, st.layer, p, timers.KindOutcomeDelivery, "")
		if err != nil {
			return err
		}
		if err := timers.Cancel(plan.b, ref, timers.KindOutcomeDelivery, ""); err != nil {
			return err
		}
		plan.say("the outcome backlog empties: it and the delivery timer go, as delivery does")
		return nil
	}
	nb, err := gen.EncodeBacklog(left)
	if err != nil {
		return err
	}
	plan.b.Put(bk, nb)
	plan.say("the outcome backlog drops by %d row and %d bytes, to %d rows and %d bytes", rec.BacklogRows, rec.BacklogBytes, left.Rows, left.Bytes)
	return nil
}

func (c *Command) restore(ctx context.Context, st *opened, o *options) error {
	if err := c.checkRepair("restore", o, true, false); err != nil {
		return err
	}
	key := store.Key(o.keyBytes)
	qk, qvk, err := quarantineKeys(key)
	if err != nil {
		return err
	}
	p := st.partition(o)
	vs, err := st.layer.GetMany(ctx, p, []store.Key{qk, qvk, key})
	if err != nil {
		return err
	}
	q, qv, cur := vs[0], vs[1], vs[2]
	if q == nil {
		return refusedf("restore: nothing is quarantined at %s in %s", formatTuple(key), formatTuple(o.partID))
	}
	if o.expect != "" && rev(q) != o.expect {
		return refusedf("restore refused: the quarantine record's revision is %s, not %s: it changed since it was shown; nothing written", rev(q), o.expect)
	}
	rec, err := gen.DecodeQuarantineV1(q)
	if err != nil {
		return refusedf("restore: the quarantine record does not decode (%v); nothing written", err)
	}
	if qv == nil {
		return refusedf("restore: the moved row's value is missing beside its record; nothing written")
	}
	if cur != nil {
		return refusedf("restore: a row is at %s again (rev %s); nothing written", formatTuple(key), rev(cur))
	}
	sch, _, _ := schemaOf(o.partID)
	row := decodeRow(sch, key, qv)
	plan := &repairPlan{b: store.NewBatch()}
	b := plan.b
	b.Require(store.Equals(qk, q), store.Equals(qvk, qv), store.Absent(key)).Put(key, qv).Delete(qk).Delete(qvk)
	plan.say("put %s %s (rev %s) back, quarantined %s by %s: %q", row.Class, row.Key, row.Rev, stamp(msTime(rec.AtMs)), rec.Who, rec.Reason)
	if row.Corrupt != "" {
		plan.say("it is corrupt: %s: its queue is held again", row.Corrupt)
	}
	if rec.Companion != nil {
		b.Require(store.Absent(rec.Companion)).Put(rec.Companion, rec.CompanionValue)
		plan.say("with the timer's reference entry %s", formatTuple(rec.Companion))
	}
	now := nowMs(c)
	kc, _ := queueClass(sch, key)
	switch gen.Tag(kc.Tag) {
	case gen.TagRelayKey:
		msg, err := rearm(ctx, st, p, b, timers.KindRelay, nil, false, now)
		if err != nil {
			return err
		}
		plan.say("%s", msg)
	case gen.TagOutcomePendingKey:
		bk := store.Key(gen.AppendOutcomeBacklogKey(nil))
		bv, _, err := st.layer.Get(ctx, p, bk)
		if err != nil {
			return err
		}
		backlog, err := gen.DecodeBacklog(bv)
		if bv != nil && err != nil {
			return refusedf("restore: the outcome backlog does not decode (%v): nothing written", err)
		}
		b.Require(store.Guard(bk, bv))
		if rec.BacklogRows > 0 || rec.BacklogBytes > 0 {
			nb, err := gen.EncodeBacklog(gen.Backlog{Rows: backlog.Rows + rec.BacklogRows, Bytes: backlog.Bytes + rec.BacklogBytes})
			if err != nil {
				return err
			}
			b.Put(bk, nb)
			plan.say("the outcome backlog rises by %d row and %d bytes", rec.BacklogRows, rec.BacklogBytes)
		}
		if backlog.Rows == 0 && rec.BacklogRows > 0 {
			ov, _ := gen.EncodeOutcomeTimer(gen.OutcomeTimer{})
			msg, err := rearm(ctx, st, p, b, timers.KindOutcomeDelivery, ov, true, now)
			if err != nil {
				return err
			}
			plan.say("%s", msg)
		}
	case gen.TagTimerKey:
		if tk, err := gen.ParseTimerKey(key); err == nil {
			b.WakeAt(store.DecodeTime(max(tk.DueAtMs, 1)))
			plan.say("the partition wakes by the timer's due time, %s", stamp(msTime(tk.DueAtMs)))
		}
	}
	plan.done = row.Key + " restored"
	return c.apply(ctx, st, o, "restore", plan)
}

func (c *Command) unblock(ctx context.Context, st *opened, o *options) error {
	if err := c.checkRepair("unblock", o, false, false); err != nil {
		return err
	}
	if o.targetID == nil {
		return usagef("unblock: -target is required")
	}
	p := st.partition(o)
	sk := store.Key(gen.AppendRelayScanKey(nil))
	sv, ok, err := st.layer.Get(ctx, p, sk)
	if err != nil {
		return err
	}
	if !ok {
		return refusedf("unblock: %s has no relay scan state: no target is blocked", formatTuple(o.partID))
	}
	scan, err := gen.DecodeRelayScanV1(sv)
	if err != nil {
		return refusedf("unblock: the relay scan state does not decode (%v); nothing written", err)
	}
	kept := make([][]byte, 0, len(scan.Blocked))
	found := false
	for _, t := range scan.Blocked {
		if string(t) == string(o.targetID) {
			found = true
			continue
		}
		kept = append(kept, t)
	}
	if !found {
		var names []string
		for _, t := range scan.Blocked {
			names = append(names, formatTuple(t))
		}
		return refusedf("unblock: %s is not blocked in %s (blocked: %s)", formatTuple(o.targetID), formatTuple(o.partID), strings.Join(append(names, "")[:max(len(names), 1)], ", "))
	}
	scan.Blocked = kept
	nv, err := gen.EncodeRelayScanV1(scan)
	if err != nil {
		return err
	}
	plan := &repairPlan{b: store.NewBatch()}
	plan.b.Require(store.Equals(sk, sv)).Put(sk, nv)
	plan.say("unblock the target %s (cursor %d, cycle end %d; %d other targets stay blocked)", formatTuple(o.targetID), scan.Cursor, scan.CycleEnd, len(kept))
	msg, err := rearm(ctx, st, p, plan.b, timers.KindRelay, nil, true, nowMs(c))
	if err != nil {
		return err
	}
	plan.say("%s: the relay retries the target at its next fire", msg)
	plan.done = formatTuple(o.targetID) + " unblocked"
	return c.apply(ctx, st, o, "unblock", plan)
}

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
	p := st.partition(o)
	ref, due, err := timers.ReadRef(ctx, st.layer, p, kind, o.ref)
	if err != nil {
		return refusedf("redrive: %v: quarantine the reference entry instead", err)
	}
	if ref == nil {
		return refusedf("redrive: %s has no %s timer %q", formatTuple(o.partID), c.kindName(kind), o.ref)
	}
	tk, err := timers.TimerKey(due, kind, o.ref)
	if err != nil {
		return usagef("redrive: %v", err)
	}
	tv, ok, err := st.layer.Get(ctx, p, tk)
	if err != nil {
		return err
	}
	if !ok {
		return refusedf("redrive: the reference entry names a timer row %s that is missing: quarantine the reference entry", formatTuple(tk))
	}
	now := c.now()
	if !msTime(storedMs(due)).After(now) {
		fmt.Fprintf(c.cfg.Stdout, "the %s timer %q is due already (%s, %s): nothing to do\n", c.kindName(kind), o.ref, stamp(msTime(storedMs(due))), rel(msTime(storedMs(due)), now))
		return nil
	}
	plan := &repairPlan{b: store.NewBatch()}
	plan.b.Require(store.Equals(tk, tv))
	if err := timers.Schedule(plan.b, st.layer.Capabilities(), ref, timers.Timer{Kind: kind, Reference: o.ref, DueAt: store.DecodeTime(nowMs(c)), Value: tv}); err != nil {
		return usagef("redrive: %v", err)
	}
	plan.say("move the %s timer %q from %s (%s) to now, its value unchanged", c.kindName(kind), o.ref, stamp(msTime(storedMs(due))), rel(msTime(storedMs(due)), now))
	if kind != timers.KindRelay && kind != timers.KindOutcomeDelivery {
		plan.say("if the service registers no handler of kind %d, the scheduler holds it again %s later", uint16(kind), timers.DefaultHeldBackoff)
	}
	plan.done = fmt.Sprintf("the %s timer %q is due now", c.kindName(kind), o.ref)
	return c.apply(ctx, st, o, "redrive", plan)
}
