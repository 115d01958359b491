package admin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
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
// written, and the command says which row changed. -expect pins the rev
// (a hash of the row's value, not a version number) an earlier view
// showed, so a script refuses a row that changed since a human looked at
// it. Nothing is retried: the operator decides
// again on what is there now.
//
// The command encodes none of the rows it repairs and states none of
// their rules: each repair composes the operations of the packages that
// own the rows (relay, outbox, timers, quarantine; see docs/design.md),
// which add their reads' guards and their writes to the repair's batch,
// and says what they did. One file per repair; each is a repair value
// (its plan) that both the command (a subcommand) and the web view (a
// form) run, so the two apply the same batch behind the same guards.

func repairFlags() func(fs *flag.FlagSet, o *options) {
	return func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.partition, "partition", "", "the partition, as a tuple (\"orders\", 1, 7) or x:HEX")
		fs.BoolVar(&o.yes, "yes", false, "write without asking (required where stdin is not a terminal)")
		fs.StringVar(&o.reason, "reason", "", "why: recorded with a quarantined row, printed by the others")
		fs.StringVar(&o.who, "who", "", "who repairs (default the OS user)")
	}
}

// repairRequest is one repair as the command's flags or the web view's
// form name it: which, where, and who asks why.
type repairRequest struct {
	partition []byte
	key       []byte // quarantine, restore
	target    []byte // unblock
	kind, ref string // redrive, redrive-dead, delete-dead
	deadDue   string // the dead letter's due time, when the timer has several
	expect    string // the rev a view showed (quarantine, restore)
	who       string
	reason    string
}

// repairContext is what a repair reads and plans with: the store, and a
// viewer for its time and kind names.
type repairContext struct {
	v *viewer
}

func (rc *repairContext) now() time.Time { return rc.v.now }

// nowStored is the repair's time as stored times hold it (never 0).
func (rc *repairContext) nowStored() time.Time { return store.DecodeTime(max(rc.v.nowMs(), 1)) }

// note is what quarantine records of a row a repair moves aside.
func (rc *repairContext) note(req repairRequest) quarantine.Note {
	return quarantine.Note{At: rc.nowStored(), Who: req.who, Reason: req.reason}
}

// repair is one of the repairs the command and the web view offer: its
// name, what it needs, and its plan. A repair is added here once, with a
// subcommand that maps flags to a request and a web form that maps
// fields to one (see webRepairs).
type repair struct {
	name       string
	needKey    bool // -key
	needReason bool // -reason
	// prepare, when set, checks and completes a request before check
	// (pause and resume: a kind's pause lives in the schedulers'
	// partition).
	prepare func(name string, req *repairRequest) error
	// plan reads what the repair changes and returns its guarded batch
	// and what it says, or, when there is nothing to do, a plan without
	// a batch. It writes nothing.
	plan func(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error)
}

// repairs are the repairs, by name.
var repairs = map[string]*repair{}

func init() {
	for _, r := range []*repair{&quarantineRepair, &restoreRepair, &unblockRepair, &redriveRepair, &redriveDeadRepair, &deleteDeadRepair, &pauseRepair, &resumeRepair} {
		repairs[r.name] = r
	}
}

// check refuses a request that lacks what the repair needs, before
// anything is read.
func (r *repair) check(req repairRequest) error {
	if r.needReason && strings.TrimSpace(req.reason) == "" && req.partition != nil && (!r.needKey || req.key != nil) {
		return usagef("%s: -reason is required: say why; it is recorded beside the row", r.name)
	}
	return r.checkArgs(req)
}

// checkArgs is check but for a missing reason: what a form, which asks
// for the reason, checks.
func (r *repair) checkArgs(req repairRequest) error {
	switch {
	case req.partition == nil:
		return usagef("%s: -partition is required", r.name)
	case r.needKey && req.key == nil:
		return usagef("%s: -key is required", r.name)
	case len(req.reason) > quarantine.MaxReason:
		return usagef("%s: -reason has %d bytes, at most %d", r.name, len(req.reason), quarantine.MaxReason)
	case len(req.who) > quarantine.MaxWho:
		return usagef("%s: -who has %d bytes, at most %d", r.name, len(req.who), quarantine.MaxWho)
	}
	if _, err := store.ParseIdentity(req.partition); err != nil || req.partition[0] == 0xFF {
		return usagef("%s: %s is no partition identity (a tuple)", r.name, formatTuple(req.partition))
	}
	return nil
}

// partitionOf is the partition a checked request names.
func (req repairRequest) partitionOf() store.Identity {
	id, _ := store.ParseIdentity(req.partition)
	return id
}

// repairPlan is a repair's batch and what it says.
type repairPlan struct {
	b     *store.Batch
	lines []string // what it does, shown before confirmation
	done  string   // said after it committed
	// nothing, when set, says why the repair has nothing to do: b is nil.
	nothing string
}

func (p *repairPlan) say(format string, a ...any) {
	p.lines = append(p.lines, fmt.Sprintf(format, a...))
}

// revision is a hash of every guard of the plan's batch: of each row the
// repair read, as it read it. Two plans of one repair have the same
// revision exactly when every row they read is the same, so a repair
// confirmed on one plan is refused when the plan to write has another.
func (p *repairPlan) revision() string {
	h := sha256.New()
	if p.b == nil {
		h.Write([]byte("nothing\x00" + p.nothing))
	} else {
		for _, c := range p.b.Preconditions {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(c.Key)))
			h.Write([]byte{byte(c.Op)})
			h.Write(n[:])
			h.Write(c.Key)
			binary.BigEndian.PutUint64(n[:], uint64(len(c.Value)))
			h.Write(n[:])
			h.Write(c.Value)
			binary.BigEndian.PutUint64(n[:], uint64(c.Wake.UnixMilli()))
			h.Write(n[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// applyPlan applies plan's batch to partition id once: refused (nothing
// written) when a row it guards changed since it was read.
func applyPlan(ctx context.Context, l *fdblayer.Layer, id []byte, name string, plan *repairPlan) error {
	if err := plan.b.Validate(l.Capabilities()); err != nil {
		return refusedf("%s: the repair does not fit one batch: %v; nothing written", name, err)
	}
	p, _ := store.ParseIdentity(id)
	out, err := l.Apply(ctx, p, plan.b)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !out.Committed() {
		what := "the partition's wake time"
		if out.Failed.Key != nil {
			sch, _, _ := schemaOf(id)
			r := decodeRow(sch, out.Failed.Key, nil)
			what = r.Key
			if r.Class != "" {
				what = r.Class + " " + r.Key
			}
		}
		return refusedf("%s refused: %s changed since it was read; nothing written (run it again to see it as it is now)", name, what)
	}
	return nil
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

// request is the repair request the command's flags give.
func (o *options) request() repairRequest {
	return repairRequest{partition: o.partID, key: o.keyBytes, target: o.targetID, kind: o.kind, ref: o.ref,
		deadDue: o.deadDue, expect: o.expect, who: whoami(o), reason: o.reason}
}

// runRepair is a repair subcommand: it checks the request, plans the
// repair, shows the plan, asks for confirmation and applies it once.
func (c *Command) runRepair(ctx context.Context, st *opened, o *options, r *repair) error {
	req := o.request()
	if r.prepare != nil {
		if err := r.prepare(r.name, &req); err != nil {
			return err
		}
	}
	if err := r.check(req); err != nil {
		return err
	}
	if !o.yes && !c.forceTerminal && !isTerminal(c.cfg.Stdin) {
		return usagef("%s: refusing to write without -yes: stdin is not a terminal to confirm at", r.name)
	}
	plan, err := r.plan(ctx, &repairContext{v: c.viewer(st, o)}, req)
	if err != nil {
		return err
	}
	if plan.b == nil {
		fmt.Fprintln(c.cfg.Stdout, plan.nothing)
		return nil
	}
	fmt.Fprintf(c.cfg.Stdout, "%s in %s (%s):\n", r.name, formatTuple(req.partition), st.where)
	for _, l := range plan.lines {
		fmt.Fprintf(c.cfg.Stdout, "  %s\n", l)
	}
	if o.reason != "" {
		fmt.Fprintf(c.cfg.Stdout, "  reason: %q, by %s\n", o.reason, req.who)
	}
	if !o.yes {
		fmt.Fprint(c.cfg.Stdout, "type yes to write this: ")
		line, _ := bufio.NewReader(c.cfg.Stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return refusedf("%s: not confirmed; nothing written", r.name)
		}
	}
	if c.beforeApply != nil {
		c.beforeApply()
	}
	if err := applyPlan(ctx, st.layer, req.partition, r.name, plan); err != nil {
		return err
	}
	fmt.Fprintf(c.cfg.Stdout, "done: %s\n", plan.done)
	return nil
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
