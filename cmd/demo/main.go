// Command demo is the library's main job, end to end on the embedded bbolt
// store: writers queue relay rows in source partitions through the outbox
// writer while a Scheduler finds the due partitions through the due index
// and fires the relay, which delivers every row to its target partition
// exactly once in effect; then demo checks that every target holds every
// row ever queued for it.
//
// The database outlives the run. Run demo again on the same -db and it
// resumes: an interrupted run (Ctrl-C, a crash, a power cut) is finished,
// a finished one gets -rows more rows per source, and the end check covers
// every run. demo treats a path it did not create as the user's: it opens
// only a database an earlier demo wrote, refuses anything else at the path
// in one line naming it, and deletes nothing but its own database, and that
// only when asked to (-fresh).
//
// Usage:
//
//	go run ./cmd/demo [-db path] [-fresh] [-sources 4] [-targets 10] [-rows 2000] [-workers 4] [-nosync] [-timeout 5m]
//
// Exit status: 0 when the end check passed, 1 on an error (the path could
// not be used, the check failed), 2 on bad flags, 130 when interrupted by
// SIGINT or SIGTERM (the database is closed cleanly and resumes next time).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/timers"
)

// config is what the flags set.
type config struct {
	db      string
	fresh   bool
	sources int
	targets int
	rows    int
	workers int
	noSync  bool
	timeout time.Duration

	// set names the flags given on the command line: a resumed database
	// keeps its own -sources and -targets unless these ask otherwise.
	set map[string]bool
	// progress is how often progress is shown; zero means the default for
	// the output (a bar on a terminal, periodic lines otherwise).
	progress time.Duration

	// clock and waiter are the writers' and the scheduler's time (nil:
	// real time); tests set a manual clock and a waiter that advances it.
	clock  clock.Clock
	waiter timers.Waiter
}

// defaultDB is where the database goes without -db.
func defaultDB() string { return filepath.Join(os.TempDir(), "mkitfdb-demo.db") }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := demo(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes of demo.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// demo runs the command with args (without the program name), writing the
// report to stdout and errors to stderr as one line each, and returns the
// exit code. ctx ending (SIGINT, SIGTERM) interrupts the run.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "demo:", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	out := newOutput(stdout, c.progress)
	err = run(ctx, c, log, out)
	switch {
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case err != nil:
		fmt.Fprintln(stderr, "demo:", err)
		return exitFailed
	}
	return exitOK
}

// parseFlags parses args into a config; a bad flag, an out-of-range value
// or a positional argument is an error naming it.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.db, "db", defaultDB(), "the bbolt database: created when missing, resumed when an earlier demo wrote it, refused otherwise")
	fs.BoolVar(&c.fresh, "fresh", false, "start over: delete the database at -db first (only one an earlier demo wrote)")
	fs.IntVar(&c.sources, "sources", 4, "source partitions queuing relay rows (a resumed database keeps its own)")
	fs.IntVar(&c.targets, "targets", 10, "target partitions the rows go to (a resumed database keeps its own)")
	fs.IntVar(&c.rows, "rows", 2000, "relay rows this run queues per source")
	fs.IntVar(&c.workers, "workers", 4, "scheduler workers, and writers")
	fs.BoolVar(&c.noSync, "nosync", false, "skip fsync on commit (bbolt NoSync): faster; a machine crash may lose the database")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up after this long")
	fs.DurationVar(&c.progress, "progress", 0, "show progress this often (default: 200ms as a bar on a terminal, 5s as lines otherwise)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: demo takes only flags (see -h)", fs.Arg(0))
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.db == "":
		return errors.New("-db is empty")
	case c.sources < 1 || c.sources > 10_000:
		return fmt.Errorf("-sources %d out of 1..10000", c.sources)
	case c.targets < 1 || c.targets > 10_000:
		return fmt.Errorf("-targets %d out of 1..10000", c.targets)
	case c.rows < 1 || c.rows > 1_000_000:
		return fmt.Errorf("-rows %d out of 1..1000000", c.rows)
	case c.workers < 1 || c.workers > 256:
		return fmt.Errorf("-workers %d out of 1..256", c.workers)
	case c.timeout <= 0:
		return fmt.Errorf("-timeout %v is not positive", c.timeout)
	case c.progress < 0:
		return fmt.Errorf("-progress %v is negative", c.progress)
	}
	return nil
}
