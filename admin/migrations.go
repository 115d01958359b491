package admin

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
)

// MigrationFunc builds a migration the command links (Config.Migrations)
// over the store it opened, l, logging the rows the migration leaves to
// log: for instance
//
//	func(l *fdblayer.Layer, log *slog.Logger) (evolve.Migration, error) {
//		start, end := ordersgen.ClassRange(ordersgen.TagOrderKey)
//		return evolve.KeyClassMigration(l, l, evolve.KeyClassConfig{Name: "orders.order-v2",
//			Namespace: ordersgen.SchemaNamespace, Start: start, End: end,
//			Rewrite: evolve.Upgrade(values.Decode, values.Encode), Requires: 2, Logger: log})
//	}
//
// It must do no I/O: the views build every linked migration to list it.
type MigrationFunc func(l *fdblayer.Layer, log *slog.Logger) (evolve.Migration, error)

// libraryMigrations are the library's own migrations, linked into every
// command.
var libraryMigrations = []MigrationFunc{
	func(l *fdblayer.Layer, _ *slog.Logger) (evolve.Migration, error) {
		return evolve.DueIndexMigration(l), nil
	},
}

// linkedMigrations builds the migrations the command links, the library's
// first, by name.
func (c *Command) linkedMigrations(l *fdblayer.Layer, log *slog.Logger) ([]evolve.Migration, error) {
	var out []evolve.Migration
	for _, f := range append(slices.Clone(libraryMigrations), c.cfg.Migrations...) {
		if f == nil {
			continue
		}
		m, err := f(l, log)
		if err != nil {
			return nil, fmt.Errorf("a migration of Config.Migrations does not build: %w", err)
		}
		for _, o := range out {
			if o.Name() == m.Name() {
				return nil, fmt.Errorf("two linked migrations are named %q", m.Name())
			}
		}
		out = append(out, m)
	}
	return out, nil
}

var migrationsCommand = subcommand{
	name:  "migrations",
	short: "every migration: state, partitions and rows done, where it is, who runs it",
	long: "migrations lists the migrations the store holds a checkpoint of, and those this\n" +
		"command links (which migrate runs) that never ran: each with its state (not\n" +
		"started, running, stopped, failed, done), the partitions and rows its pages went\n" +
		"through, rewrote and left as they were (newer or corrupt), the partition its last\n" +
		"page was in, the runner that holds it and until when, and when its last page was\n" +
		"checkpointed. A failed migration's error follows the table.",
	flags: func(*flag.FlagSet, *options) {},
	run:   (*Command).migrations,
}

// MigrationRow is one migration of the migrations view.
type MigrationRow struct {
	Name string `json:"name"`
	// Linked: this command links the migration (migrate runs it).
	Linked bool `json:"linked"`
	// State is "not started", "running" (a runner holds its lease),
	// "stopped" (it stopped, or its runner died, and resumes where it
	// stopped), "failed" (its last run stopped on LastError) or "done".
	State string `json:"state"`
	// The totals of its checkpointed pages.
	Pages      uint64 `json:"pages"`
	Partitions uint64 `json:"partitions"`
	Rows       uint64 `json:"rows"`
	Rewritten  uint64 `json:"rewritten"`
	Left       uint64 `json:"left"`
	Conflicts  uint64 `json:"conflicts"`
	// Partition is the partition its last page was in, as a tuple.
	Partition string `json:"partition,omitempty"`
	// Owner holds it until LeaseUntil, when that is after now; otherwise
	// Owner is the last runner.
	Owner      string     `json:"owner,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	// Started, Updated (its last page's checkpoint) and Done.
	Started   *time.Time `json:"started,omitempty"`
	Updated   *time.Time `json:"updated,omitempty"`
	Done      *time.Time `json:"done,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

// migrationRow is cp as the view shows it at now.
func migrationRow(cp evolve.Checkpoint, linked bool, now time.Time) MigrationRow {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	r := MigrationRow{
		Name: cp.Name, Linked: linked, Pages: cp.Pages, Partitions: cp.Partitions, Rows: cp.Rows,
		Rewritten: cp.Rewritten, Left: cp.Left, Conflicts: cp.Conflicts, Owner: cp.Owner,
		LeaseUntil: at(cp.LeaseUntil), Started: at(cp.Started), Updated: at(cp.Updated), Done: at(cp.Done),
		LastError: cp.LastError,
	}
	if cp.Partition != nil {
		r.Partition = formatTuple(cp.Partition)
	}
	switch {
	case cp.IsDone():
		r.State = "done"
	case cp.Held(now):
		r.State = "running"
	case cp.LastError != "":
		r.State = "failed"
	default:
		r.State = "stopped"
	}
	if !cp.Held(now) {
		r.LeaseUntil = nil
	}
	return r
}

func (c *Command) migrations(ctx context.Context, st *opened, o *options) error {
	linked, err := c.linkedMigrations(st.layer, slog.New(slog.DiscardHandler))
	if err != nil {
		return usagef("migrations: %v", err)
	}
	cps, err := evolve.Migrations(ctx, st.layer)
	if err != nil {
		return err
	}
	now := c.now()
	names := map[string]bool{}
	for _, m := range linked {
		names[m.Name()] = true
	}
	var rows []MigrationRow
	stored := map[string]bool{}
	for _, cp := range cps {
		stored[cp.Name] = true
		rows = append(rows, migrationRow(cp, names[cp.Name], now))
	}
	for _, m := range linked {
		if !stored[m.Name()] {
			rows = append(rows, MigrationRow{Name: m.Name(), Linked: true, State: "not started"})
		}
	}
	slices.SortFunc(rows, func(a, b MigrationRow) int { return strings.Compare(a.Name, b.Name) })
	if o.json {
		if rows == nil {
			rows = []MigrationRow{}
		}
		return json.NewEncoder(c.cfg.Stdout).Encode(map[string]any{"now": now.UTC(), "migrations": rows})
	}
	fmt.Fprintf(c.cfg.Stdout, "now %s\n", stamp(now))
	tw := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIGRATION\tLINKED\tSTATE\tPARTITIONS\tROWS\tREWRITTEN\tLEFT\tPARTITION\tOWNER\tLEASE\tLAST PAGE")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range rows {
		linked, lease, last := "no", "-", "-"
		if r.Linked {
			linked = "yes"
		}
		if r.LeaseUntil != nil {
			lease = "until " + stamp(*r.LeaseUntil) + " (" + rel(*r.LeaseUntil, now) + ")"
		}
		if r.Updated != nil {
			last = rel(*r.Updated, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Name, linked, r.State, r.Partitions, r.Rows,
			r.Rewritten, r.Left, dash(r.Partition), dash(r.Owner), lease, last)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.cfg.Stdout, "%d migrations, %d linked\n", len(rows), len(linked))
	for _, r := range rows {
		if r.LastError != "" {
			fmt.Fprintf(c.cfg.Stdout, "%s stopped on: %s\n", r.Name, r.LastError)
		}
		if r.Left > 0 {
			rows := "rows"
			if r.Left == 1 {
				rows = "row"
			}
			fmt.Fprintf(c.cfg.Stdout, "%s left %d %s unchanged (newer or corrupt): its runs logged each\n", r.Name, r.Left, rows)
		}
	}
	return nil
}
