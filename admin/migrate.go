package admin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mkit-dev/mkitfdb/evolve"
)

var migrateCommand = subcommand{
	name: "migrate", repair: true, args: " NAME", arg: true,
	short: "run a linked migration from where it stopped",
	long: "migrate runs the migration NAME, one this command links (migrations lists them),\n" +
		"from its checkpoint: page by page, each page one guarded batch (or engine\n" +
		"transaction) that never overwrites a row a writer changed meanwhile, the\n" +
		"checkpoint written after each. It holds the migration by a lease while it runs:\n" +
		"another runner is refused, naming this one. Ctrl-C stops it after the page in\n" +
		"flight; the same command resumes it. Rows it cannot rewrite (newer or corrupt)\n" +
		"are left as they were, logged on stderr and counted. A migration that is done\n" +
		"is not run again unless -again says so.",
	flags: func(fs *flag.FlagSet, o *options) {
		fs.BoolVar(&o.yes, "yes", false, "run without asking (required where stdin is not a terminal)")
		fs.StringVar(&o.who, "who", "", "who runs it, recorded as its runner with the host and pid (default the OS user)")
		fs.BoolVar(&o.again, "again", false, "run it again from the start, even when it is done")
	},
	run: (*Command).migrate,
}

// progressEvery is how often migrate prints a line while it runs.
const progressEvery = 2 * time.Second

func (c *Command) migrate(ctx context.Context, st *opened, o *options) error {
	switch {
	case !o.yes && !c.forceTerminal && !isTerminal(c.cfg.Stdin):
		return usagef("migrate: refusing to write without -yes: stdin is not a terminal to confirm at")
	case len(c.owner(o)) > evolve.MaxOwnerBytes:
		return usagef("migrate: -who has %d bytes, at most %d with the host and pid", len(whoami(o)), evolve.MaxOwnerBytes)
	}
	log := slog.New(slog.NewTextHandler(c.cfg.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	linked, err := c.linkedMigrations(st.layer, log)
	if err != nil {
		return usagef("migrate: %v", err)
	}
	var m evolve.Migration
	names := make([]string, len(linked))
	for i, l := range linked {
		names[i] = l.Name()
		if l.Name() == o.arg {
			m = l
		}
	}
	if m == nil {
		return usagef("migrate: no migration %q is linked into %s (it links %s); a service's own command links its migrations (admin.Config.Migrations)",
			o.arg, c.name(), strings.Join(names, ", "))
	}
	cp, ok, err := evolve.Progress(ctx, st.layer, o.arg)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	now := c.now()
	fmt.Fprintf(c.cfg.Stdout, "migrate %s (%s):\n", o.arg, st.where)
	switch {
	case ok && cp.Held(now):
		return refusedf("migrate: %s is running: %s holds it until %s (%s); nothing written", o.arg, cp.Owner, stamp(cp.LeaseUntil), rel(cp.LeaseUntil, now))
	case ok && cp.IsDone() && !o.again:
		fmt.Fprintf(c.cfg.Stdout, "  done at %s: %d rows in %d partitions, %d rewritten, %d left as they were\n",
			stamp(cp.Done), cp.Rows, cp.Partitions, cp.Rewritten, cp.Left)
		fmt.Fprintf(c.cfg.Stdout, "nothing to do (-again runs it from the start)\n")
		return nil
	case !ok:
		fmt.Fprintf(c.cfg.Stdout, "  starts from the beginning\n")
	case o.again:
		fmt.Fprintf(c.cfg.Stdout, "  runs again from the start (%d pages before)\n", cp.Pages)
	default:
		fmt.Fprintf(c.cfg.Stdout, "  resumes after %d pages: %d rows in %d partitions, %d rewritten, %d left; its last page in %s, %s\n",
			cp.Pages, cp.Rows, cp.Partitions, cp.Rewritten, cp.Left, tupleOrDash(cp.Partition), rel(cp.Updated, now))
		if cp.LastError != "" {
			fmt.Fprintf(c.cfg.Stdout, "  its last run stopped on: %s\n", cp.LastError)
		}
	}
	fmt.Fprintf(c.cfg.Stdout, "  each page one guarded batch, its checkpoint written after it; Ctrl-C stops after the page in flight\n")
	if !o.yes {
		fmt.Fprint(c.cfg.Stdout, "type yes to run it: ")
		line, _ := bufio.NewReader(c.cfg.Stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return refusedf("migrate: not confirmed; nothing written")
		}
	}
	last := now
	r, err := evolve.NewRunner(st.layer, evolve.RunnerConfig{Owner: c.owner(o), Clock: c.cfg.Clock, Logger: log,
		OnPage: func(cp evolve.Checkpoint) {
			if t := c.now(); t.Sub(last) >= progressEvery {
				last = t
				fmt.Fprintf(c.cfg.Stdout, "  %d pages, %d rows in %d partitions, %d rewritten, %d left; in %s\n",
					cp.Pages, cp.Rows, cp.Partitions, cp.Rewritten, cp.Left, tupleOrDash(cp.Partition))
			}
		}})
	if err != nil {
		return usagef("migrate: %v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := r.Run
	if o.again {
		run = r.Rerun
	}
	rep, err := run(ctx, m)
	var le *evolve.LeaseError
	switch {
	case errors.As(err, &le):
		return refusedf("migrate: %v", err)
	case err != nil && ctx.Err() != nil:
		return refusedf("migrate: stopped after %d pages of this run (%d in all); the same command resumes it", rep.Pages, rep.Checkpoint.Pages)
	case err != nil:
		return fmt.Errorf("migrate: %w (the same command resumes it)", err)
	}
	fmt.Fprintf(c.cfg.Stdout, "done: %s\n", rep)
	return nil
}

// owner is the runner's name migrate records: who, on which host, in
// which process.
func (c *Command) owner(o *options) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return whoami(o) + "@" + host + ":" + strconv.Itoa(os.Getpid())
}

// tupleOrDash is formatTuple(b), or "-" for none.
func tupleOrDash(b []byte) string {
	if b == nil {
		return "-"
	}
	return formatTuple(b)
}
