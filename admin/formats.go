package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/store"
)

var formatsCommand = subcommand{
	name:  "formats",
	short: "each namespace's store format, its history, and the live processes",
	long: "formats shows, for each namespace the store keeps a format of or this command\n" +
		"links, the store's format (the newest its rows may be written in), the formats\n" +
		"this binary knows and the package that declares them, and how the store got to\n" +
		"its format (who raised it, when, why); then every process row: the formats its\n" +
		"binary knows and until when it is live. A format is raised with formats raise,\n" +
		"once every live process knows it.",
	flags: func(*flag.FlagSet, *options) {},
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		rep, err := c.viewer(st, o).formats(ctx)
		if err != nil {
			return err
		}
		if o.json {
			return json.NewEncoder(c.cfg.Stdout).Encode(rep)
		}
		c.printFormats(rep)
		return nil
	},
}

var formatsRaiseCommand = subcommand{
	name: "formats raise", repair: true,
	short: "raise a namespace's store format by one, once every live process knows it",
	long: "formats raise raises the store's format of -namespace to -to, one more than it\n" +
		"is, for good: from then on writers write the versions of that format, and a\n" +
		"binary that does not know it refuses to open the store. It is one guarded batch\n" +
		"(package evolve): the format still one below -to, every live process that links\n" +
		"the namespace knowing -to, each process row as read. It refuses, listing them,\n" +
		"while a live process does not know -to; -force goes past processes known to be\n" +
		"dead whose rows have not expired yet, and the history names them. The raise is\n" +
		"recorded with -by and -reason. Only a binary that knows -to raises it: a\n" +
		"service's own command for the service's namespaces.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.StringVar(&o.namespace, "namespace", "", "the namespace whose format to raise")
		fs.UintVar(&o.to, "to", 0, "the format to raise it to: one more than the store's")
		fs.StringVar(&o.who, "by", "", "who raises it, recorded in the history (default the OS user)")
		fs.StringVar(&o.reason, "reason", "", "why: recorded in the history (required)")
		fs.BoolVar(&o.force, "force", false, "raise past live processes that do not know the format (only for processes known to be dead)")
		fs.BoolVar(&o.yes, "yes", false, "write without asking (required where stdin is not a terminal)")
	},
	run: func(c *Command, ctx context.Context, st *opened, o *options) error {
		return c.raiseFormat(ctx, st, o)
	},
}

// FormatsReport is the formats view: each namespace's store format and
// history, and the store's process rows.
type FormatsReport struct {
	Now        time.Time         `json:"now"`
	Namespaces []NamespaceReport `json:"namespaces"`
	Processes  []ProcessReport   `json:"processes"`
}

// NamespaceReport is one namespace's store format, what this binary knows
// of it, and how the store got to its format.
type NamespaceReport struct {
	Namespace string `json:"namespace"`
	// Store is the store's format (1 when it keeps none).
	Store uint32 `json:"store"`
	// Known is the newest format this binary knows, 0 when it does not
	// link the namespace; Package is the package that declares it.
	Known   uint32 `json:"known"`
	Package string `json:"package,omitempty"`
	// Corrupt is why the format row does not decode.
	Corrupt string       `json:"corrupt,omitempty"`
	History []FormatStep `json:"history"`
}

// FormatStep is one step of a namespace's history: a raise, or a new
// store's start.
type FormatStep struct {
	Format uint32    `json:"format"`
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	// Forced names the live processes a forced raise went past.
	Forced  []string `json:"forced,omitempty"`
	Corrupt string   `json:"corrupt,omitempty"`
}

// ProcessReport is a process row: a process whose gate writes, with what
// its binary knows.
type ProcessReport struct {
	Process string    `json:"process"`
	Binary  string    `json:"binary"`
	Started time.Time `json:"started"`
	Expires time.Time `json:"expires"`
	// State is live, expired (the process ended without closing its gate;
	// its row no longer holds back raises) or fenced (live, but a
	// namespace it links is at a format above what it knows: its writes
	// are refused).
	State string            `json:"state"`
	Known map[string]uint32 `json:"known"`
	// Corrupt is why the row does not decode (a raise counts it as a live
	// process that knows nothing).
	Corrupt string `json:"corrupt,omitempty"`
}

// formats reads the formats view's facts.
func (v *viewer) formats(ctx context.Context) (FormatsReport, error) {
	st, err := evolve.ReadStatus(ctx, v.l)
	if err != nil {
		return FormatsReport{}, err
	}
	rep := FormatsReport{Now: v.now, Namespaces: []NamespaceReport{}, Processes: []ProcessReport{}}
	byName := map[string]NamespaceReport{}
	for _, s := range registry.All() {
		byName[s.Namespace] = NamespaceReport{Namespace: s.Namespace, Store: 1, Known: v.l.Gate().Known(s.Namespace), Package: s.ImportPath, History: []FormatStep{}}
	}
	store := map[string]uint32{}
	for _, n := range st.Namespaces {
		nr, ok := byName[n.Name]
		if !ok {
			nr = NamespaceReport{Namespace: n.Name, History: []FormatStep{}}
		}
		nr.Store = n.Format
		if n.Err != nil {
			nr.Corrupt = n.Err.Error()
		}
		for _, s := range n.Steps {
			fs := FormatStep{Format: s.Format, At: s.At, By: s.By, Reason: s.Reason, Forced: s.Forced}
			if s.Err != nil {
				fs.Corrupt = s.Err.Error()
			}
			nr.History = append(nr.History, fs)
		}
		byName[n.Name] = nr
		store[n.Name] = n.Format
	}
	for _, ns := range slices.Sorted(maps.Keys(byName)) {
		rep.Namespaces = append(rep.Namespaces, byName[ns])
	}
	for _, p := range st.Processes {
		pr := ProcessReport{Process: p.Name, Binary: p.Binary, Started: p.Started, Expires: p.Expires, Known: p.Known, State: "live"}
		switch {
		case p.Err != nil:
			pr.Corrupt, pr.State, pr.Known = p.Err.Error(), "corrupt", map[string]uint32{}
		case !p.Live(v.now):
			pr.State = "expired"
		default:
			for ns, f := range p.Known {
				if store[ns] > f {
					pr.State = "fenced"
				}
			}
		}
		rep.Processes = append(rep.Processes, pr)
	}
	return rep, nil
}

// knownText is the formats a binary that knows n knows: "format 1",
// "formats 1-n", or "no format" for none.
func knownText(n uint32) string {
	switch n {
	case 0:
		return "no format"
	case 1:
		return "format 1"
	}
	return fmt.Sprintf("formats 1-%d", n)
}

// knownColumn is knownText for a table: "1", "1-n", "-".
func knownColumn(n uint32) string {
	switch n {
	case 0:
		return "-"
	case 1:
		return "1"
	}
	return fmt.Sprintf("1-%d", n)
}

func (c *Command) printFormats(rep FormatsReport) {
	w := c.cfg.Stdout
	fmt.Fprintf(w, "now %s\n", stamp(rep.Now))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tSTORE FORMAT\tTHIS BINARY\tPACKAGE")
	for _, n := range rep.Namespaces {
		store := fmt.Sprint(n.Store)
		if n.Corrupt != "" {
			store = "CORRUPT: " + n.Corrupt
		}
		pkg := n.Package
		if pkg == "" {
			pkg = "not linked"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Namespace, store, knownColumn(n.Known), pkg)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "history:")
	steps := 0
	for _, n := range rep.Namespaces {
		for _, s := range n.History {
			steps++
			if s.Corrupt != "" {
				fmt.Fprintf(w, "  %s %d: CORRUPT: %s\n", n.Namespace, s.Format, s.Corrupt)
				continue
			}
			fmt.Fprintf(w, "  %s %d at %s by %s: %q", n.Namespace, s.Format, stamp(s.At), s.By, s.Reason)
			if len(s.Forced) > 0 {
				fmt.Fprintf(w, " (forced past %s)", strings.Join(s.Forced, ", "))
			}
			fmt.Fprintln(w)
		}
	}
	if steps == 0 {
		fmt.Fprintln(w, "  none: every namespace is at format 1, as in a store written before formats")
	}
	fmt.Fprintln(w)
	live := 0
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tSTATE\tEXPIRES\tKNOWS\tBINARY")
	for _, p := range rep.Processes {
		if p.State == "live" || p.State == "fenced" || p.State == "corrupt" {
			live++
		}
		if p.Corrupt != "" {
			fmt.Fprintf(tw, "%s\tcorrupt\t-\t-\tCORRUPT: %s\n", p.Process, p.Corrupt)
			continue
		}
		var knows []string
		for _, ns := range slices.Sorted(maps.Keys(p.Known)) {
			knows = append(knows, fmt.Sprintf("%s=%d", ns, p.Known[ns]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Process, p.State, rel(p.Expires, rep.Now), strings.Join(knows, " "), p.Binary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d processes, %d live\n", len(rep.Processes), live)
}

// raiseFormat is formats raise: it shows the raise, asks for confirmation
// and raises through the store's gate (evolve.Gate.Raise), once.
func (c *Command) raiseFormat(ctx context.Context, st *opened, o *options) error {
	const name = "formats raise"
	switch {
	case o.namespace == "":
		return usagef("%s: -namespace is required", name)
	case o.to < 2 || o.to > 1<<32-1:
		return usagef("%s: -to is required: a format from 2 (every namespace starts at 1)", name)
	case strings.TrimSpace(o.reason) == "":
		return usagef("%s: -reason is required: say why; it is recorded in the history", name)
	}
	if !o.yes && !c.forceTerminal && !isTerminal(c.cfg.Stdin) {
		return usagef("%s: refusing to write without -yes: stdin is not a terminal to confirm at", name)
	}
	to, by := uint32(o.to), whoami(o)
	g := st.layer.Gate()
	if known := g.Known(o.namespace); known < to {
		if known == 0 {
			return usagef("%s: this %s does not link namespace %q: raise it with the service's own command", name, c.name(), o.namespace)
		}
		return usagef("%s: this %s knows %s of namespace %q: raise it with a binary that knows %d", name, c.name(), knownText(known), o.namespace, to)
	}
	rep, err := c.viewer(st, o).formats(ctx)
	if err != nil {
		return err
	}
	cur := uint32(1)
	for _, n := range rep.Namespaces {
		if n.Namespace == o.namespace {
			cur = n.Store
		}
	}
	if to != cur+1 {
		return refusedf("%s: namespace %q is at format %d: a raise goes one format at a time, never down (to %d next); nothing written", name, o.namespace, cur, cur+1)
	}
	var knowing, unaware []string
	for _, p := range rep.Processes {
		f, links := p.Known[o.namespace]
		switch {
		case p.State == "expired":
		case p.Corrupt != "":
			unaware = append(unaware, p.Process+" (its row does not decode)")
		case links && f < to:
			unaware = append(unaware, fmt.Sprintf("%s (knows %d)", p.Process, f))
		case links:
			knowing = append(knowing, p.Process)
		}
	}
	if len(unaware) > 0 && !o.force {
		return refusedf("%s: namespace %q stays at format %d: live processes do not know format %d: %s; stop or replace them (or -force past processes known to be dead); nothing written",
			name, o.namespace, cur, to, strings.Join(unaware, ", "))
	}
	fmt.Fprintf(c.cfg.Stdout, "%s in %s:\n", name, st.where)
	fmt.Fprintf(c.cfg.Stdout, "  raise namespace %q from format %d to %d, for good (this %s knows %s)\n", o.namespace, cur, to, c.name(), knownText(g.Known(o.namespace)))
	fmt.Fprintf(c.cfg.Stdout, "  live processes that link it and know %d: %d\n", to, len(knowing))
	if len(unaware) > 0 {
		fmt.Fprintf(c.cfg.Stdout, "  forced past live processes that do not know %d: %s\n", to, strings.Join(unaware, ", "))
	}
	fmt.Fprintf(c.cfg.Stdout, "  a binary that does not know %d refuses to open the store from then on\n", to)
	fmt.Fprintf(c.cfg.Stdout, "  reason: %q, by %s\n", o.reason, by)
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
	err = g.Raise(ctx, o.namespace, to, evolve.RaiseConfig{By: by, Reason: o.reason, Force: o.force})
	var re *evolve.RaiseError
	switch {
	case errors.As(err, &re):
		return refusedf("%s refused: %v; nothing written", name, re)
	case errors.Is(err, store.ErrInvalid):
		return usagef("%s: %v", name, err)
	case err != nil:
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(c.cfg.Stdout, "done: namespace %q is at format %d, recorded in its history\n", o.namespace, to)
	return nil
}
