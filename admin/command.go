package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Exit statuses of Command.Run.
const (
	// ExitOK: the view was shown or the repair was written.
	ExitOK = 0
	// ExitFailed: the store failed while the command ran, or a repair was
	// refused because what it guards changed since it was read; nothing
	// was written.
	ExitFailed = 1
	// ExitUsage: bad input (an unknown subcommand or flag, a partition or
	// key that does not parse, a missing, locked or foreign database, a
	// repair without -yes in a script); one line says which, and nothing
	// was written.
	ExitUsage = 2
)

// Config configures a Command (see NewCommand). A zero field takes its
// default.
type Config struct {
	// Name is the command's name in usage and messages (default
	// "mkitfdb"; Main's default is the program's name).
	Name string
	// KindNames names the service's timer kinds in the views (the
	// library's kinds are named already).
	KindNames map[timers.Kind]string
	// Stdin, Stdout and Stderr default to the process's. A repair asks for
	// confirmation on Stdin only when it is a terminal.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Clock tells the time the views measure ages against and repairs
	// record (default: the real clock).
	Clock clock.Clock
	// Migrations are the migrations migrate runs and migrations lists as
	// linked, besides the library's own (evolve.DueIndexMigration): each
	// builds its migration over the store the command opened, logging the
	// rows it leaves to log (see MigrationFunc).
	Migrations []MigrationFunc
	// OpenCluster opens the FoundationDB cluster a -cluster-file names,
	// as fdbengine.Open does (package fdblayer/fdbengine, a module of its
	// own: cgo and libfdb_c). Nil means the command opens no cluster, and
	// -cluster-file is refused in one line that says where the command
	// that does is.
	OpenCluster func(clusterFile string) (kv.Engine, error)
}

// Command is the operator's command: mkitfdb, or a service's own admin
// command built with the service's generated packages linked in (see the
// package doc), configured by a Config. The zero Command is
// NewCommand(Config{}). A Command is not safe for concurrent use.
type Command struct {
	cfg Config

	// onOpen and beforeApply, for tests, run when the store is open and
	// between a repair's read and its batch.
	onOpen        func(*opened)
	beforeApply   func()
	forceTerminal bool // Stdin is taken for a terminal
}

// NewCommand returns the command c configures; it keeps a copy of
// KindNames. It does no I/O.
func NewCommand(c Config) *Command {
	c.KindNames = maps.Clone(c.KindNames)
	return &Command{cfg: c}
}

// Main runs the command c configures, its Name defaulting to the
// program's (os.Args[0]), with the command line os.Args[1:], and returns
// its exit status: a service's admin command is
//
//	func main() { os.Exit(admin.Main(admin.Config{KindNames: names})) }
//
// in a package that imports its generated schema packages (for their
// registration) and this one.
func Main(c Config) int {
	if c.Name == "" {
		c.Name = filepath.Base(os.Args[0])
	}
	return NewCommand(c).Run(context.Background(), os.Args[1:])
}

// usageError is bad input: exit status 2, one line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// refusedError is a repair refused by its guard or by the state it found:
// exit status 1, nothing written.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refusedf(format string, a ...any) error { return &refusedError{fmt.Sprintf(format, a...)} }

// subcommand is one of the command's subcommands.
type subcommand struct {
	name    string
	args    string // the synopsis after the flags
	arg     bool   // takes one argument after the flags (options.arg)
	short   string
	long    string
	repair  bool
	flags   func(fs *flag.FlagSet, o *options)
	run     func(c *Command, ctx context.Context, st *opened, o *options) error
	noStore bool
}

// subcommands are the command's subcommands, in the order help lists
// them (views, then repairs): each is declared beside what it runs.
var subcommands = []*subcommand{
	&partitionsCommand, &timersCommand, &lagCommand, &schedulersCommand, &getCommand, &scanCommand, &quarantinedCommand, &formatsCommand, &migrationsCommand,
	&quarantineCommand, &restoreCommand, &unblockCommand, &redriveCommand, &deleteDeadCommand, &pauseCommand, &resumeCommand, &formatsRaiseCommand, &migrateCommand,
}

// lookupArgs returns the subcommand args name (its name's one word, or
// two: formats raise) and the arguments after the name.
func lookupArgs(args []string) (*subcommand, []string) {
	if len(args) > 1 {
		if sub := lookup(args[0] + " " + args[1]); sub != nil {
			return sub, args[2:]
		}
	}
	return lookup(args[0]), args[1:]
}

func lookup(name string) *subcommand {
	for _, s := range subcommands {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (c *Command) name() string {
	if c.cfg.Name == "" {
		return "mkitfdb"
	}
	return c.cfg.Name
}

func (c *Command) now() time.Time {
	if c.cfg.Clock == nil {
		return time.Now()
	}
	return c.cfg.Clock.Now()
}

// Run runs the command line args (without the program's name) and returns
// the exit status: ExitOK, ExitFailed or ExitUsage.
func (c *Command) Run(ctx context.Context, args []string) int {
	if c.cfg.Stdin == nil {
		c.cfg.Stdin = os.Stdin
	}
	if c.cfg.Stdout == nil {
		c.cfg.Stdout = os.Stdout
	}
	if c.cfg.Stderr == nil {
		c.cfg.Stderr = os.Stderr
	}
	err := c.run(ctx, args)
	var ue *usageError
	var re *refusedError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.cfg.Stderr, "%s: %s\n", c.name(), oneLine(ue.msg))
		return ExitUsage
	case errors.As(err, &re):
		fmt.Fprintf(c.cfg.Stderr, "%s: %s\n", c.name(), oneLine(re.msg))
		return ExitFailed
	default:
		fmt.Fprintf(c.cfg.Stderr, "%s: %s\n", c.name(), oneLine(err.Error()))
		return ExitFailed
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

func (c *Command) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no command given: run %s help", c.name())
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			c.usage(c.cfg.Stdout)
			return nil
		}
		sub, _ := lookupArgs(rest)
		if sub == nil {
			return usagef("unknown command %q: run %s help", rest[0], c.name())
		}
		fs, _ := c.flagSet(sub)
		c.printUsage(fs, sub)
		return nil
	}
	sub, rest := lookupArgs(args)
	if sub == nil {
		return usagef("unknown command %q: run %s help", name, c.name())
	}
	fs, o := c.flagSet(sub)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(fs, sub)
			return err
		}
		return usagef("%s: %v", sub.name, err)
	}
	switch {
	case sub.arg && fs.NArg() != 1:
		return usagef("%s: name one%s after the flags (run %s help %s)", sub.name, sub.args, c.name(), sub.name)
	case sub.arg:
		o.arg = fs.Arg(0)
	case fs.NArg() > 0:
		return usagef("%s: unexpected argument %q (flags go before it; run %s help %s)", sub.name, fs.Arg(0), c.name(), sub.name)
	}
	if err := o.check(sub); err != nil {
		return err
	}
	st, err := c.open(o, sub.repair)
	if err != nil {
		return err
	}
	defer st.close()
	if c.onOpen != nil {
		c.onOpen(st)
	}
	return sub.run(c, ctx, st, o)
}

// flagSet returns sub's flags, with the store flags every subcommand takes.
func (c *Command) flagSet(sub *subcommand) (*flag.FlagSet, *options) {
	o := &options{}
	fs := flag.NewFlagSet(c.name()+" "+sub.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.db, "db", "", "the bbolt `file` to open (read-only for views)")
	fs.StringVar(&o.clusterFile, "cluster-file", "", "the FoundationDB cluster `file` to open (by a command that opens clusters, such as the mkitfdb of module fdblayer/fdbengine)")
	fs.StringVar(&o.root, "root", "", "the store's root prefix as a tuple or x:HEX (default (\"mkit\"), fdblayer's)")
	if !sub.repair {
		fs.BoolVar(&o.json, "json", false, "print one JSON object instead of text")
	}
	sub.flags(fs, o)
	// The flag package calls Usage for -h and for every error: it prints
	// nothing, so that an error is one line; -h prints usage below.
	fs.Usage = func() {}
	return fs, o
}

// printUsage prints sub's usage and flags on stdout.
func (c *Command) printUsage(fs *flag.FlagSet, sub *subcommand) {
	fmt.Fprintf(c.cfg.Stdout, "usage: %s %s [flags]%s\n\n%s\n\nflags:\n", c.name(), sub.name, sub.args, sub.long)
	fs.SetOutput(c.cfg.Stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func (c *Command) usage(w io.Writer) {
	fmt.Fprintf(w, "%s reads and repairs a store of github.com/mkit-dev/mkitfdb.\n\nusage: %s <command> [flags]\n\nviews (read-only):\n", c.name(), c.name())
	for _, s := range subcommands {
		if !s.repair {
			fmt.Fprintf(w, "  %-13s %s\n", s.name, s.short)
		}
	}
	fmt.Fprintf(w, "\nrepairs (guarded, confirmed, recorded):\n")
	for _, s := range subcommands {
		if s.repair {
			fmt.Fprintf(w, "  %-13s %s\n", s.name, s.short)
		}
	}
	fmt.Fprintf(w, "\nEvery command takes -db FILE (bbolt) or -cluster-file FILE (FoundationDB).\nRun %s help <command> for its flags.\n", c.name())
}

// viewer is the reader of the views' facts for the open store st, at
// the command's time.
func (c *Command) viewer(st *opened, o *options) *viewer {
	maxRows := o.maxRows
	if maxRows <= 0 {
		maxRows = DefaultMaxRows
	}
	return &viewer{l: st.layer, now: c.now(), kindNames: c.cfg.KindNames, maxRows: maxRows}
}

// kindName names a timer kind: the service's name, then the library's.
func (c *Command) kindName(k timers.Kind) string {
	return (&viewer{kindNames: c.cfg.KindNames}).kindName(k)
}

// parseKind parses a kind by number or name.
func (c *Command) parseKind(s string) (timers.Kind, error) {
	return (&viewer{kindNames: c.cfg.KindNames}).parseKind(s)
}
