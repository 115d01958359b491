package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// PauseReport is an operator's pause as the views show it: of a timer
// kind for the whole store (Kind set), or of one partition's queues (its
// relay and outcome delivery timers; Kind 0). No scheduler fires what it
// pauses until it is resumed; the paused timers keep their place.
type PauseReport struct {
	Kind uint16 `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// At, Who and Reason are what the pause recorded.
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Reason string    `json:"reason"`
	// Rev is a hash of the pause row (not a version number), which
	// resume's -expect takes.
	Rev string `json:"rev"`
	// Corrupt is the decoder's reason when the pause row does not decode:
	// it pauses all the same, and At, Who and Reason are zero.
	Corrupt string `json:"corrupt,omitempty"`
}

// pauseReport is p as the views show it.
func (v *viewer) pauseReport(p timers.Pause) *PauseReport {
	r := &PauseReport{Kind: uint16(p.Kind), At: p.At.UTC(), Who: p.Who, Reason: p.Reason, Rev: rev(p.Record())}
	if p.Kind != 0 {
		r.Name = v.kindName(p.Kind)
	}
	if p.Corrupt != nil {
		r.Corrupt = p.Corrupt.Error()
		r.At = time.Time{}
	}
	return r
}

// Text says what is paused, by whom, when and why.
func (p PauseReport) Text(now time.Time) string {
	what := "the partition's queues (relay, outcome delivery)"
	if p.Kind != 0 {
		what = "the kind " + p.Name + " (every partition)"
	}
	if p.Corrupt != "" {
		return fmt.Sprintf("%s paused; the pause row does not decode (%s), and pauses all the same (rev %s)", what, p.Corrupt, p.Rev)
	}
	return fmt.Sprintf("%s paused by %q at %s (%s): %q (rev %s)", what, p.Who, stamp(p.At), rel(p.At, now), p.Reason, p.Rev)
}

// resumeHint is the command that resumes p, for a note.
func (p PauseReport) resumeHint(partition string) string {
	if p.Kind != 0 {
		return "resume -kind " + p.Name
	}
	return "resume -partition '" + partition + "'"
}

// storePauses reads the pauses of the whole store once per viewer: the
// kind pauses and the pause generation (see timers.ReadPauses). It fails
// with the store's errors, and when the generation does not decode.
func (v *viewer) storePauses(ctx context.Context) (timers.Pauses, error) {
	if v.pauses != nil {
		return *v.pauses, nil
	}
	ps, err := timers.ReadPauses(ctx, store.ReaderOf(v.l, timers.MembersPartition))
	if err != nil {
		return timers.Pauses{}, err
	}
	v.pauses = &ps
	return ps, nil
}

// kindPauses are the store's kind pauses as the views show them.
func (v *viewer) kindPauses(ctx context.Context) ([]PauseReport, error) {
	ps, err := v.storePauses(ctx)
	if err != nil {
		return nil, err
	}
	out := []PauseReport{}
	for _, p := range ps.Kinds {
		out = append(out, *v.pauseReport(p))
	}
	return out, nil
}

// kindPause is kind k's pause as the viewer read it (nil: not paused, or
// the pauses not read yet).
func (v *viewer) kindPause(k timers.Kind) *PauseReport {
	if v.pauses == nil {
		return nil
	}
	if p, ok := v.pauses.Kind(k); ok {
		return v.pauseReport(p)
	}
	return nil
}

// partitionPause reads partition id's queue pause (nil: none).
func (v *viewer) partitionPause(ctx context.Context, id store.Identity) (*PauseReport, error) {
	p, ok, err := timers.ReadPartitionPause(ctx, store.ReaderOf(v.l, id))
	if err != nil || !ok {
		return nil, err
	}
	return v.pauseReport(p), nil
}

// pausedPartitions lists the due index's paused entries: the partitions
// a scheduler left due timers in for a pause (see timers.PausedWake).
func (v *viewer) pausedPartitions(ctx context.Context) ([]store.DueEntry, error) {
	from, until := timers.PausedWakeRange()
	var out []store.DueEntry
	q := store.DueQuery{From: from, Until: until, Limit: 256}
	for {
		page, err := v.l.ScanDue(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < q.Limit {
			return out, nil
		}
		q.After = &page[len(page)-1]
	}
}

var pauseCommand = subcommand{
	name: "pause", repair: true,
	short: "pause a timer kind (every partition) or one partition's queues",
	long: "pause -kind K stops every scheduler firing timers of kind K, in every partition,\n" +
		"from each scheduler's next tick; pause -partition P stops the relay and outcome\n" +
		"delivery of P (its other timers fire as before). The paused timers keep their\n" +
		"place, value and attempts: none fires, fails or moves until resume. The pause is a\n" +
		"row recording who (-who), when and why (-reason, required), written guarded on\n" +
		"there being none; the views show it.",
	flags: pauseFlags,
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.runRepair(ctx, st, o, &pauseRepair)
	},
}

var resumeCommand = subcommand{
	name: "resume", repair: true,
	short: "resume a paused timer kind or partition's queues",
	long: "resume -kind K or resume -partition P deletes the pause, guarded on it as read (and\n" +
		"on -expect, its rev as the views show it: a hash of the row, not a version\n" +
		"number). The paused timers then fire, each once, at the schedulers' next tick.",
	flags: pauseFlags,
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.runRepair(ctx, st, o, &resumeRepair)
	},
}

// pauseFlags are pause's and resume's flags.
func pauseFlags(fs *flag.FlagSet, o *options) {
	repairFlags()(fs, o)
	fs.StringVar(&o.kind, "kind", "", "the timer kind paused for the whole store: a number or a name")
	fs.StringVar(&o.expect, "expect", "", "resume: the pause's rev as a view showed it (a hash of the row): refuse if it changed")
}

var (
	pauseRepair  = repair{name: "pause", needReason: true, prepare: pauseTarget, plan: planPause}
	resumeRepair = repair{name: "resume", prepare: pauseTarget, plan: planResume}
)

// pauseTarget checks that a pause or resume names one thing, a kind or
// a partition, and makes a kind's the partition the kind pauses live in.
func pauseTarget(name string, req *repairRequest) error {
	switch {
	case req.kind != "" && req.partition != nil:
		return usagef("%s: -kind pauses a kind in every partition, -partition one partition's queues: give one", name)
	case req.kind == "" && req.partition == nil:
		return usagef("%s: -kind or -partition is required", name)
	case req.kind != "":
		req.partition = membersIdentity
	}
	return nil
}

// planPause pauses a kind with timers.PauseKind, or a partition's queues
// with timers.PausePartition.
func planPause(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	v := rc.v
	note := timers.PauseNote{At: rc.nowStored(), Who: req.who, Reason: req.reason}
	plan := &repairPlan{b: store.NewBatch()}
	var (
		p   timers.Pause
		err error
		k   timers.Kind
	)
	if req.kind != "" {
		if k, err = v.parseKind(req.kind); err != nil {
			return nil, err
		}
		p, err = timers.PauseKind(ctx, store.ReaderOf(v.l, timers.MembersPartition), plan.b, k, note)
	} else {
		p, err = timers.PausePartition(ctx, store.ReaderOf(v.l, req.partitionOf()), plan.b, note)
	}
	switch {
	case errors.Is(err, timers.ErrPaused):
		return &repairPlan{nothing: v.pauseReport(p).Text(v.now) + " already: nothing to do"}, nil
	case err != nil:
		return nil, refusal("pause", err)
	}
	if k != 0 {
		plan.say("pause the kind %s in every partition: from each scheduler's next tick none of its timers fires; they keep their place", v.kindName(k))
		plan.done = "the kind " + v.kindName(k) + " is paused (resume -kind " + v.kindName(k) + " fires its due timers, each once)"
		return plan, nil
	}
	plan.say("pause the queues of %s: its relay and outcome delivery timers do not fire; they keep their place; its other timers fire as before", formatTuple(req.partition))
	plan.done = "the queues of " + formatTuple(req.partition) + " are paused"
	return plan, nil
}

// planResume resumes a kind with timers.ResumeKind, or a partition's
// queues with timers.ResumePartition.
func planResume(ctx context.Context, rc *repairContext, req repairRequest) (*repairPlan, error) {
	v := rc.v
	plan := &repairPlan{b: store.NewBatch()}
	var (
		p   timers.Pause
		err error
		k   timers.Kind
	)
	what := "the queues of " + formatTuple(req.partition)
	if req.kind != "" {
		if k, err = v.parseKind(req.kind); err != nil {
			return nil, err
		}
		what = "the kind " + v.kindName(k)
		p, err = timers.ResumeKind(ctx, store.ReaderOf(v.l, timers.MembersPartition), plan.b, k)
	} else {
		p, err = timers.ResumePartition(ctx, store.ReaderOf(v.l, req.partitionOf()), plan.b, rc.nowStored())
	}
	switch {
	case errors.Is(err, timers.ErrNotPaused):
		return &repairPlan{nothing: what + " is not paused: nothing to do"}, nil
	case err != nil:
		return nil, refusal("resume", err)
	}
	pr := v.pauseReport(p)
	if req.expect != "" && pr.Rev != req.expect {
		return nil, refusedf("resume refused: the pause's rev (a hash of the row) is %s, not %s: it changed since it was shown; nothing written", pr.Rev, req.expect)
	}
	plan.say("end the pause: %s", pr.Text(v.now))
	plan.say("the paused timers fire at the schedulers' next tick, each once")
	plan.done = what + " is resumed"
	return plan, nil
}
