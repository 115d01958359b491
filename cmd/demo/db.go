package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// plan is the demo's own row in its database: what every run together has
// set out to do. The end check derives what must be there from it and from
// the outbox sequences, never from one run's counters, so it covers every
// run on the database.
type plan struct {
	sources, targets int
	goal             uint64 // relay rows per source, over all runs
	runs             int    // runs started on the database
	done             bool   // the last run passed its end check
}

// planVersion starts every plan value; a value without it is not the demo's.
const planVersion = "mkitfdb-demo/v1"

func (p plan) encode() store.Value {
	return fmt.Appendf(nil, "%s sources=%d targets=%d goal=%d runs=%d done=%t", planVersion, p.sources, p.targets, p.goal, p.runs, p.done)
}

// decodePlan parses a plan value strictly: it must re-encode to the same
// bytes and keep the flags' bounds.
func decodePlan(v store.Value) (plan, error) {
	var p plan
	_, err := fmt.Sscanf(string(v), planVersion+" sources=%d targets=%d goal=%d runs=%d done=%t", &p.sources, &p.targets, &p.goal, &p.runs, &p.done)
	if err != nil || string(p.encode()) != string(v) || p.sources < 1 || p.sources > 10_000 || p.targets < 1 || p.targets > 10_000 || p.runs < 1 {
		return plan{}, fmt.Errorf("the demo's plan row %q is %w", v, store.ErrCorrupt)
	}
	return p, nil
}

// planPartition holds the plan row.
var planPartition = refdomain.RefPartition{NS: refdomain.MustNamespaceKey("demo"), Repo: refdomain.MustRepoName("demo-plan"), ShardRef: refdomain.MustShardRef("refs/heads/main")}

var planKey = store.Key("plan")

// readPlan returns the stored plan and its bytes (for a guard), or ok false
// when there is none.
func readPlan(ctx context.Context, s store.Store) (p plan, raw store.Value, ok bool, err error) {
	raw, ok, err = s.Get(ctx, planPartition, planKey)
	if err != nil || !ok {
		return plan{}, nil, false, err
	}
	p, err = decodePlan(raw)
	return p, raw, err == nil, err
}

// writePlan replaces the plan row, guarded by the bytes it replaces (nil:
// by its absence), so two runs can never both think they own the plan.
func writePlan(ctx context.Context, s store.Store, prior store.Value, p plan) error {
	b := store.NewBatch()
	if prior == nil {
		b.Require(store.Absent(planKey))
	} else {
		b.Require(store.Equals(planKey, prior))
	}
	out, err := s.Apply(ctx, planPartition, b.Put(planKey, p.encode()))
	if err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	if !out.Committed() {
		return errors.New("the plan row changed under this run: is another demo running on the database?")
	}
	return nil
}

// database is the demo's open database.
type database struct {
	*fdblayer.Layer
	path    string // absolute
	created bool   // this run created the file
	plan    plan   // as this run found it (zero when created)
	raw     store.Value
}

// openDB opens the database at c.db: an earlier demo's is resumed, a
// missing one is created, and anything else is refused with an error that
// names it and leaves it as it was. With c.fresh an earlier demo's
// database is deleted first; nothing else ever is.
func openDB(ctx context.Context, c config, log *slog.Logger) (*database, error) {
	path, err := filepath.Abs(c.db)
	if err != nil {
		return nil, fmt.Errorf("-db %s: %w", c.db, err)
	}
	_, statErr := os.Stat(path)
	exists := statErr == nil || !errors.Is(statErr, fs.ErrNotExist)
	if exists && c.fresh {
		old, err := openExisting(ctx, path, c, log)
		if err != nil {
			return nil, err
		}
		if err := old.Close(); err != nil {
			return nil, fmt.Errorf("close %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("-fresh: %w", err)
		}
		exists = false
	}
	if exists {
		return openExisting(ctx, path, c, log)
	}
	engine, err := boltengine.Open(path, boltConfig(c, false))
	if err != nil {
		return nil, pathError(path, err)
	}
	l, err := fdblayer.Open(engine, fdblayer.Config{Logger: log})
	if err != nil {
		engine.Close()
		os.Remove(path) // ours: created just now, nothing in it
		return nil, err
	}
	return &database{Layer: l, path: path, created: true}, nil
}

// openExisting opens a database an earlier demo wrote, refusing anything
// else at path without writing to it: it reads the plan through a Layer
// whose gate writes nothing (a gate that writes registers the process),
// and opens the Layer the demo runs on once the plan is found.
func openExisting(ctx context.Context, path string, c config, log *slog.Logger) (*database, error) {
	open := func(gate evolve.GateConfig) (*fdblayer.Layer, error) {
		engine, err := boltengine.Open(path, boltConfig(c, true))
		if err != nil {
			return nil, pathError(path, err)
		}
		l, err := fdblayer.Open(engine, fdblayer.Config{Logger: log, Gate: gate})
		if err != nil {
			engine.Close()
			return nil, err
		}
		return l, nil
	}
	l, err := open(evolve.GateConfig{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	_, _, ok, err := readPlan(ctx, l)
	if err == nil && !ok {
		err = fmt.Errorf("%s holds an mkitfdb database the demo did not write (no plan row: another program's, or a demo's of an older mkitfdb whose partitions were named differently); nothing was changed: delete it yourself or pass another -db", path)
	}
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", path, cerr)
	}
	if err != nil {
		return nil, err
	}
	if l, err = open(evolve.GateConfig{}); err != nil {
		return nil, err
	}
	p, raw, ok, err := readPlan(ctx, l)
	if err == nil && !ok {
		err = fmt.Errorf("%s: the plan row is gone", path)
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return &database{Layer: l, path: path, plan: p, raw: raw}, nil
}

// boltConfig is the demo's: no wait for another demo's lock, and pages
// filled to the brim, since its keys arrive in order (every source's
// relay rows, and every target's rows from each source, in sequence):
// with bbolt's default, pages split half full stay half full and the file
// is twice the size.
func boltConfig(c config, mustExist bool) boltengine.Config {
	return boltengine.Config{NoSync: c.noSync, LockTimeout: boltengine.NoLockWait, MustExist: mustExist, FillPercent: 1}
}

// pathError adds to an error of opening path what the user can do about
// it. A file bbolt cannot read (boltengine's store.ErrCorrupt) is said to be
// no database of this demo, with bbolt's reason, rather than "corrupt
// data": the file at -db is most likely something else of the user's.
func pathError(path string, err error) error {
	switch {
	case errors.Is(err, boltengine.ErrLocked):
		return fmt.Errorf("%w; is another demo running on it?", err)
	case !errors.Is(err, store.ErrCorrupt):
		return fmt.Errorf("%w; nothing was changed", err)
	}
	why := "a bbolt database of another program"
	switch {
	case errors.Is(err, berrors.ErrInvalid):
		why = "not a bbolt database at all"
	case errors.Is(err, berrors.ErrVersionMismatch):
		why = "a bbolt database of a format version this demo cannot read"
	case errors.Is(err, berrors.ErrChecksum):
		why = "a file whose bbolt header fails its checksum: a damaged database, or another program's file"
	}
	return notDemoDB{msg: fmt.Sprintf("%s is not a database of this demo (%s); nothing was changed: pass another -db", path, why), err: err}
}

// notDemoDB is an open error (store.ErrCorrupt) said in the demo's words.
type notDemoDB struct {
	msg string
	err error
}

func (e notDemoDB) Error() string { return e.msg }
func (e notDemoDB) Unwrap() error { return e.err }

// start records this run in the plan: a new database gets the flags' plan,
// a finished one -rows more per source, an interrupted one is resumed as it
// was planned. -sources or -targets given against a resumed database's own
// are an error: its rows were queued for those.
func (d *database) start(ctx context.Context, c config) (plan, error) {
	p := d.plan
	switch {
	case d.created:
		p = plan{sources: c.sources, targets: c.targets, goal: uint64(c.rows)}
	case c.set["sources"] && c.sources != p.sources, c.set["targets"] && c.targets != p.targets:
		return p, fmt.Errorf("%s was made with -sources %d -targets %d; run it with those, or pass -fresh to start over", d.path, p.sources, p.targets)
	case p.done:
		p.goal += uint64(c.rows)
	}
	p.runs++
	p.done = false
	if err := writePlan(ctx, d, d.raw, p); err != nil {
		return p, err
	}
	d.raw = p.encode()
	return p, nil
}

// finish marks the plan done after an end check passed.
func (d *database) finish(ctx context.Context, p plan) error {
	p.done = true
	if err := writePlan(ctx, d, d.raw, p); err != nil {
		return err
	}
	d.raw = p.encode()
	return nil
}
