package admin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/mkit-dev/mkitfdb/quarantine"
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
//
// The command encodes none of the rows it repairs and states none of
// their rules: each repair composes the operations of the packages that
// own the rows (relay, outbox, timers, quarantine; see docs/design.md),
// which add their reads' guards and their writes to the repair's batch,
// and says what they did. One file per repair.

func repairFlags() func(fs *flag.FlagSet, o *options) {
	return func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.BoolVar(&o.yes, "yes", false, "write without asking (required where stdin is not a terminal)")
		fs.StringVar(&o.reason, "reason", "", "why: recorded with a quarantined row, printed by the others")
		fs.StringVar(&o.who, "who", "", "who repairs (default the OS user)")
	}
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
	case len(o.reason) > quarantine.MaxReason:
		return usagef("%s: -reason has %d bytes, at most %d", name, len(o.reason), quarantine.MaxReason)
	case len(whoami(o)) > quarantine.MaxWho:
		return usagef("%s: -who has %d bytes, at most %d", name, len(whoami(o)), quarantine.MaxWho)
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

func nowMs(c *Command) uint64 { return uint64(max(c.now().UnixMilli(), 1)) }

// note is what quarantine records of a row the command moves aside.
func (c *Command) note(o *options) quarantine.Note {
	return quarantine.Note{At: store.DecodeTime(nowMs(c)), Who: whoami(o), Reason: o.reason}
}

// timerMove says how a repair moved the library timer of kind to now.
func timerMove(kind timers.Kind, m timers.Moved) string {
	if m.From.IsZero() {
		return fmt.Sprintf("the %s timer is created, due now", kind)
	}
	return fmt.Sprintf("the %s timer moves from %s to now", kind, stamp(m.From))
}

// refusal is what a repair says when an operation of a row's owner
// failed with none of the errors the repair names itself: bad input
// (store.ErrInvalid) is a usage error; corrupt stored data
// (store.ErrCorrupt) refuses the repair; anything else is the store's.
func refusal(name string, err error) error {
	switch {
	case errors.Is(err, store.ErrInvalid):
		return usagef("%s: %v", name, err)
	case errors.Is(err, store.ErrCorrupt):
		return refusedf("%s: %v; nothing written", name, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}
