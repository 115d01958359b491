package evolve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: migrations that resume.
//
// A migration rewrites stored rows a page at a time: each page is one
// guarded batch of one partition (or one engine transaction, for what
// spans partitions), and after each page the Runner writes the
// migration's checkpoint (its MigrationKey row in Partition) in a batch
// of its own. A batch is one partition's, so the page and its checkpoint
// cannot commit together: a page must therefore be idempotent, so that a
// crash between the two, which makes the page run again from the last
// checkpoint, finds its rows done and leaves them. Every page guards each
// row it rewrites on the value it read, so it never overwrites a value a
// concurrent writer changed: the page is read again instead.
//
// Two runners must not both advance one migration. Each checkpoint write
// is guarded on the row as this runner last wrote it, so of two runners
// only one advances it, and the other stops with a *LeaseError naming
// the runner that did and its lease. The lease (the checkpoint's Owner
// and LeaseUntilMs, renewed at each checkpoint) only keeps a second
// runner from starting while the first runs: a runner finding a lease of
// another owner that has not expired refuses at once, and one finding it
// expired (its runner died) takes the migration over where it stopped.
// A runner that ends (done, failed, cancelled) releases its lease.

// Migration rewrites stored rows, a page at a time, resumable: a Runner
// runs it from its checkpoint.
type Migration interface {
	// Name names the migration for ever: its checkpoint row's key, at
	// most 128 bytes ("orders.order-v2").
	Name() string
	// Step does one page from cursor (empty: the start) as one guarded
	// batch or engine transaction within the store's limits, and returns
	// the cursor after it (empty: the migration is done; at most
	// MaxCursorBytes) and what the page did. A page must be idempotent: it
	// may run again from the same cursor after a crash before its
	// checkpoint, and then finds its rows done. An error stops the run;
	// what the page wrote before it is kept.
	Step(ctx context.Context, cursor []byte) (next []byte, page Page, err error)
}

// Page is what one Step did.
type Page struct {
	// Rows is the rows the page read; Rewritten those it rewrote or
	// moved; Left those it left as they were because they do not decode
	// for this binary (of a newer version, or corrupt: each logged), and
	// regions of partitions no linked schema tells apart, which it cannot
	// reach (each logged).
	Rows, Rewritten, Left int
	// Conflicts is how often a concurrent writer made the page run again
	// (a guard that failed, a conflicting commit).
	Conflicts int
	// Partitions is how many partitions the page finished.
	Partitions int
	// Partition is the tuple identity of the partition the page was in
	// (nil: none).
	Partition []byte
}

func (p *Page) add(q Page) {
	p.Rows += q.Rows
	p.Rewritten += q.Rewritten
	p.Left += q.Left
	p.Conflicts += q.Conflicts
	p.Partitions += q.Partitions
	if q.Partition != nil {
		p.Partition = q.Partition
	}
}

// Bounds of a migration's checkpoint.
const (
	// MaxNameBytes bounds a migration's name.
	MaxNameBytes = gen.MaxMigrationKeyName
	// MaxCursorBytes bounds a migration's cursor: a partition identity and
	// a key fit.
	MaxCursorBytes = gen.MaxMigrationV1Cursor
	// MaxOwnerBytes bounds a runner's Owner.
	MaxOwnerBytes = gen.MaxMigrationV1Owner
)

// DefaultLease is how long a runner's claim on a migration lasts past
// each checkpoint, unless RunnerConfig.Lease says otherwise.
const DefaultLease = 30 * time.Second

// ErrLeased is wrapped by the error of a run that found its migration
// held by another runner, or lost it to one: a *LeaseError.
var ErrLeased = errors.New("migration held by another runner")

// LeaseError is the error of a run refused or stopped because another
// runner holds its migration: Owner, until Until (zero: released). It
// wraps ErrLeased.
type LeaseError struct {
	Name  string
	Owner string
	Until time.Time
	// Lost is true when this run had advanced the migration and another
	// runner took it over meanwhile (the run's lease had lapsed).
	Lost bool
}

func (e *LeaseError) Error() string {
	what := "is held"
	if e.Lost {
		what = "was taken over"
	}
	until := "its lease released"
	if !e.Until.IsZero() {
		until = "until " + e.Until.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("evolve: migration %q %s by %s, %s: %v", e.Name, what, e.Owner, until, ErrLeased)
}

// Unwrap returns ErrLeased.
func (e *LeaseError) Unwrap() error { return ErrLeased }

// Checkpoint is a migration's checkpoint row as stored: where its next
// page starts, what its pages did, and who holds it.
type Checkpoint struct {
	// Name is the migration's name.
	Name string
	// Cursor is where the next page starts (the migration's own bytes;
	// nil: at the start, or done).
	Cursor []byte
	// Partition is the tuple identity of the partition the last page was
	// in (nil: none yet).
	Partition []byte
	// The totals of the pages checkpointed since the migration started
	// (see Page). A page that ran again after a crash counts once, as its
	// run that was checkpointed; rows it found done then are not counted
	// as rewritten.
	Rows, Rewritten, Left, Conflicts, Pages, Partitions uint64
	// Started is when the migration started (or was run again from the
	// start), Updated when its last page was checkpointed, Done when it
	// finished (zero: not yet).
	Started, Updated, Done time.Time
	// Owner is the runner that holds (or last held) the migration, until
	// LeaseUntil (zero: released).
	Owner      string
	LeaseUntil time.Time
	// LastError is the error the last run stopped on ("" when none).
	LastError string
}

// IsDone reports whether the migration finished.
func (c Checkpoint) IsDone() bool { return !c.Done.IsZero() }

// Held reports whether a runner holds the migration at now.
func (c Checkpoint) Held(now time.Time) bool { return c.LeaseUntil.After(now) }

// migrationValues reads a checkpoint in every version this binary knows:
// one of a newer version fails with store.ErrNewerVersion, and is never
// overwritten.
var migrationValues = gen.NewMigrationKeyValues(struct{}{})

func decodeCheckpoint(name string, b []byte) (Checkpoint, error) {
	v, err := migrationValues.Decode(b)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("evolve: checkpoint of migration %q: %w", name, err)
	}
	if len(v.Cursor) == 0 {
		v.Cursor = nil
	}
	if len(v.Partition) == 0 {
		v.Partition = nil
	}
	return Checkpoint{
		Name: name, Cursor: v.Cursor, Partition: v.Partition,
		Rows: v.Rows, Rewritten: v.Rewritten, Left: v.Left, Conflicts: v.Conflicts, Pages: v.Pages, Partitions: v.Partitions,
		Started: store.DecodeTime(v.StartedAtMs), Updated: store.DecodeTime(v.UpdatedAtMs), Done: store.DecodeTime(v.DoneAtMs),
		Owner: v.Owner, LeaseUntil: store.DecodeTime(v.LeaseUntilMs), LastError: v.LastError,
	}, nil
}

func (c Checkpoint) encode() ([]byte, error) {
	ms := func(t time.Time) uint64 {
		u, _ := store.EncodeTime(t) // the runner's clock is after the epoch; a time before it encodes as 0
		return u
	}
	return gen.EncodeMigrationV1(gen.MigrationV1{
		Cursor: c.Cursor, Partition: c.Partition,
		Rows: c.Rows, Rewritten: c.Rewritten, Left: c.Left, Conflicts: c.Conflicts, Pages: c.Pages, Partitions: c.Partitions,
		StartedAtMs: ms(c.Started), UpdatedAtMs: ms(c.Updated), DoneAtMs: ms(c.Done),
		Owner: c.Owner, LeaseUntilMs: ms(c.LeaseUntil), LastError: c.LastError,
	})
}

// migrationKey is the key of the checkpoint of the migration name. It
// fails with store.ErrInvalid for an empty or over-long name.
func migrationKey(name string) (store.Key, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: evolve: a migration's name is empty", store.ErrInvalid)
	}
	k, err := gen.AppendMigrationKey(nil, name)
	if err != nil {
		return nil, fmt.Errorf("%w: evolve: migration name %q: %w", store.ErrInvalid, name, err)
	}
	return k, nil
}

// Progress reads the checkpoint of the migration name from s; ok is false
// when it has none (it never ran). It fails with store.ErrInvalid for a
// name that cannot be a migration's, store.ErrCorrupt for a checkpoint
// that does not decode, and as s.Get does. Safe for concurrent use.
func Progress(ctx context.Context, s store.Store, name string) (cp Checkpoint, ok bool, err error) {
	key, err := migrationKey(name)
	if err != nil {
		return Checkpoint{}, false, err
	}
	raw, ok, err := s.Get(ctx, Partition, key)
	if err != nil || !ok {
		return Checkpoint{}, false, err
	}
	cp, err = decodeCheckpoint(name, raw)
	return cp, err == nil, err
}

// Migrations reads the checkpoint of every migration s holds, by name. It
// fails with store.ErrCorrupt for a checkpoint or key that does not
// decode, naming it, and as s.Scan does. Safe for concurrent use.
func Migrations(ctx context.Context, s store.Store) ([]Checkpoint, error) {
	start, end := gen.ClassRange(gen.TagMigrationKey)
	var out []Checkpoint
	var after store.Cursor
	for {
		page, err := s.Scan(ctx, Partition, start, end, after, 256)
		if err != nil {
			return out, err
		}
		for _, r := range page.Entries {
			k, err := gen.ParseMigrationKey(r.Key)
			if err != nil {
				return out, fmt.Errorf("evolve: migration checkpoint key %x: %w", []byte(r.Key), err)
			}
			cp, err := decodeCheckpoint(k.Name, r.Value)
			if err != nil {
				return out, err
			}
			out = append(out, cp)
		}
		if page.Next == nil {
			return out, nil
		}
		after = page.Next
	}
}

// RunnerConfig configures a Runner (see NewRunner). A zero field takes its
// default.
type RunnerConfig struct {
	// Owner names the runner in the checkpoints it holds, at most
	// MaxOwnerBytes: default the host's name and the process id
	// ("build-7:4242"). A runner whose Owner is the lease's takes it over
	// at once (the same process, restarted): give each runner its own.
	Owner string
	// Lease is how long the runner's claim lasts past each checkpoint
	// (default DefaultLease): a runner that dies holds its migration
	// that long. A page that takes longer lets another runner take the
	// migration over; this one then stops at its next checkpoint.
	Lease time.Duration
	// Clock tells the time checkpoints record and leases are measured on
	// (default the real clock).
	Clock clock.Clock
	// Logger logs runs, pages (at debug) and runs that end with rows
	// left (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives the migration metrics of the telemetry catalogue
	// (default none).
	Metrics telemetry.Metrics
	// OnPage, when set, is called with the checkpoint after each page's
	// was written, on the run's goroutine (a command shows progress with
	// it). It must be quick and must not call the Runner.
	OnPage func(Checkpoint)
}

// Runner runs migrations on a store: each from its checkpoint, page by
// page, holding it by a lease (see Run). It is safe for concurrent use;
// two Runs of one migration by one Runner exclude each other as two
// runners' do.
type Runner struct {
	s       store.Store
	owner   string
	lease   time.Duration
	clock   clock.Clock
	log     *slog.Logger
	metrics telemetry.Metrics
	onPage  func(Checkpoint)
}

// NewRunner returns a Runner of the migrations of s configured by cfg. It
// fails with store.ErrInvalid, naming the field, for a nil store, an
// Owner over MaxOwnerBytes, or a Lease that is negative or under a
// millisecond; it does no I/O.
func NewRunner(s store.Store, cfg RunnerConfig) (*Runner, error) {
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: evolve: RunnerConfig: %s", store.ErrInvalid, fmt.Sprintf(format, a...))
	}
	switch {
	case s == nil:
		return nil, fmt.Errorf("%w: evolve: NewRunner: nil store", store.ErrInvalid)
	case len(cfg.Owner) > MaxOwnerBytes:
		return nil, invalid("Owner of %d bytes, limit %d", len(cfg.Owner), MaxOwnerBytes)
	case cfg.Lease < 0 || cfg.Lease > 0 && cfg.Lease < time.Millisecond:
		return nil, invalid("Lease %v, want a millisecond or more", cfg.Lease)
	}
	if cfg.Owner == "" {
		cfg.Owner = defaultOwner()
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runner{s: s, owner: cfg.Owner, lease: cfg.Lease, clock: cfg.Clock,
		log: cfg.Logger, metrics: telemetry.OrNoop(cfg.Metrics), onPage: cfg.OnPage}, nil
}

// defaultOwner is the host's name and the process id, or a random name
// when the host has none.
func defaultOwner() string {
	if host, err := os.Hostname(); err == nil && host != "" {
		o := host + ":" + strconv.Itoa(os.Getpid())
		if len(o) <= MaxOwnerBytes {
			return o
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "migration-" + hex.EncodeToString(b[:])
}

// now is the Runner's clock's time as a checkpoint stores it (to the
// millisecond), so that a Report's checkpoint is what Progress reads.
func (r *Runner) now() time.Time {
	u, _ := store.EncodeTime(r.clock.Now())
	return store.DecodeTime(u)
}

// Owner returns the name this Runner writes in the checkpoints it holds.
func (r *Runner) Owner() string { return r.owner }

// Report is what a Run did.
type Report struct {
	// Checkpoint is the migration's checkpoint after the run: the totals
	// since it started.
	Checkpoint Checkpoint
	// Run is what this run's checkpointed pages did, Pages how many there
	// were.
	Run   Page
	Pages int
}

// String says what the run left: "done: 1200 rows in 40 partitions,
// 800 rewritten", "done with 3 rows left as they were: ...", or where it
// stopped.
func (r Report) String() string {
	c := r.Checkpoint
	totals := fmt.Sprintf("%s in %s, %d rewritten", count(c.Rows, "row"), count(c.Partitions, "partition"), c.Rewritten)
	switch {
	case c.IsDone() && c.Left > 0:
		return fmt.Sprintf("migration %q done with %s left unchanged (newer or corrupt; logged): %s", c.Name, count(c.Left, "row"), totals)
	case c.IsDone():
		return fmt.Sprintf("migration %q done: %s", c.Name, totals)
	}
	return fmt.Sprintf("migration %q stopped after %s (this run: %d): %s, %d left so far", c.Name, count(c.Pages, "page"), r.Pages, totals, c.Left)
}

// count says n things: "1 row", "3 rows".
func count(n uint64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.FormatUint(n, 10) + " " + thing + "s"
}

// Run runs m from its checkpoint in the Runner's store until it is done,
// ctx ends or a page fails, writing the checkpoint after each page (see
// the design note above), and returns what it did. A migration already
// done is not run again (see Rerun): Run returns its checkpoint. A run
// that ends with rows left (Report.Checkpoint.Left) is done and logged as
// such; the rows left are logged by the pages that found them.
//
// It fails with an error wrapping ErrLeased (a *LeaseError) when another
// runner holds m, or took it over meanwhile; with store.ErrInvalid for a
// name or cursor out of bounds; with store.ErrCorrupt for a checkpoint
// that does not decode, and store.ErrNewerVersion for one a newer binary
// wrote (neither overwritten); with ctx's error when ctx
// ends (after the page in flight is checkpointed); and with a page's
// error, wrapped, naming m. A run that fails or is cancelled releases its
// lease and records the error in the checkpoint, where another run
// resumes. Safe for concurrent use.
func (r *Runner) Run(ctx context.Context, m Migration) (Report, error) {
	return r.run(ctx, m, false)
}

// Rerun runs m as Run does, from the start even when its checkpoint says
// it is done or where it stopped (its totals start again): after rows it
// left were repaired, say, or after older writers wrote rows of the old
// layout again. It fails as Run does.
func (r *Runner) Rerun(ctx context.Context, m Migration) (Report, error) {
	return r.run(ctx, m, true)
}

func (r *Runner) run(ctx context.Context, m Migration, again bool) (Report, error) {
	if m == nil {
		return Report{}, fmt.Errorf("%w: evolve: run of a nil migration", store.ErrInvalid)
	}
	name := m.Name()
	key, err := migrationKey(name)
	if err != nil {
		return Report{}, err
	}
	label := []telemetry.Label{{Name: telemetry.LabelMigration, Value: name}}
	cp, raw, claimed, err := r.claim(ctx, key, name, again)
	rep := Report{Checkpoint: cp}
	if err != nil {
		return rep, err
	}
	if !claimed {
		r.metrics.Gauge(telemetry.MetricMigrationDone, label, 1)
		return rep, nil
	}
	log := r.log.With("migration", name, "owner", r.owner)
	if cp.Pages > 0 {
		log.Info("evolve: migration resumes", "pages", cp.Pages, "rows", cp.Rows, "partition", formatIdentity(cp.Partition))
	} else {
		log.Info("evolve: migration starts")
	}
	r.metrics.Gauge(telemetry.MetricMigrationDone, label, 0)
	for {
		if err := ctx.Err(); err != nil {
			r.release(ctx, key, &cp, &raw, err, log)
			rep.Checkpoint = cp
			return rep, fmt.Errorf("evolve: migration %q: %w", name, err)
		}
		next, page, err := m.Step(ctx, cp.Cursor)
		if err == nil && len(next) > MaxCursorBytes {
			err = fmt.Errorf("%w: a cursor of %d bytes, limit %d", store.ErrInvalid, len(next), MaxCursorBytes)
		}
		if err != nil {
			err = fmt.Errorf("evolve: migration %q: page after %d: %w", name, cp.Pages, err)
			r.release(ctx, key, &cp, &raw, err, log)
			rep.Checkpoint = cp
			return rep, err
		}
		now := r.now()
		upd := cp
		upd.Cursor = next
		if page.Partition != nil {
			upd.Partition = page.Partition
		}
		upd.Rows += uint64(page.Rows)
		upd.Rewritten += uint64(page.Rewritten)
		upd.Left += uint64(page.Left)
		upd.Conflicts += uint64(page.Conflicts)
		upd.Partitions += uint64(page.Partitions)
		upd.Pages++
		upd.Updated = now
		upd.LeaseUntil = now.Add(r.lease)
		upd.LastError = ""
		if len(next) == 0 {
			upd.Cursor, upd.Done, upd.LeaseUntil = nil, now, time.Time{}
		}
		if err := r.write(ctx, key, name, upd, &raw); err != nil {
			var le *LeaseError
			if !errors.As(err, &le) {
				// The page stays done, its checkpoint not: the next run
				// runs it again.
				r.release(ctx, key, &cp, &raw, err, log)
			}
			rep.Checkpoint = cp
			return rep, err
		}
		cp = upd
		rep.Checkpoint = cp
		rep.Run.add(page)
		rep.Pages++
		r.metrics.Add(telemetry.MetricMigrationRows, label, uint64(page.Rows))
		r.metrics.Add(telemetry.MetricMigrationRowsRewritten, label, uint64(page.Rewritten))
		r.metrics.Add(telemetry.MetricMigrationRowsLeft, label, uint64(page.Left))
		r.metrics.Add(telemetry.MetricMigrationPages, label, 1)
		r.metrics.Add(telemetry.MetricMigrationConflicts, label, uint64(page.Conflicts))
		r.metrics.Add(telemetry.MetricMigrationPartitions, label, uint64(page.Partitions))
		if r.onPage != nil {
			r.onPage(cp)
		}
		log.Debug("evolve: migration page", "rows", page.Rows, "rewritten", page.Rewritten, "left", page.Left,
			"conflicts", page.Conflicts, "partition", formatIdentity(page.Partition))
		if len(next) == 0 {
			r.metrics.Gauge(telemetry.MetricMigrationDone, label, 1)
			if cp.Left > 0 {
				log.Warn("evolve: migration done with rows left as they were (newer or corrupt; each was logged)",
					"left", cp.Left, "rows", cp.Rows, "rewritten", cp.Rewritten, "partitions", cp.Partitions)
			} else {
				log.Info("evolve: migration done", "rows", cp.Rows, "rewritten", cp.Rewritten, "partitions", cp.Partitions)
			}
			return rep, nil
		}
	}
}

// claimAttempts bounds the reads and writes of a claim that other
// runners keep changing.
const claimAttempts = 5

// claim reads m's checkpoint and takes its lease: claimed false for a
// migration done (and not run again), with its checkpoint. raw is the
// checkpoint as written, which the next write is guarded on.
func (r *Runner) claim(ctx context.Context, key store.Key, name string, again bool) (cp Checkpoint, raw []byte, claimed bool, err error) {
	for attempt := 0; ; attempt++ {
		cur, ok, err := r.s.Get(ctx, Partition, key)
		if err != nil {
			return Checkpoint{}, nil, false, fmt.Errorf("evolve: migration %q: read its checkpoint: %w", name, err)
		}
		now := r.now()
		cp = Checkpoint{Name: name, Started: now}
		if ok {
			if cp, err = decodeCheckpoint(name, cur); err != nil {
				return Checkpoint{}, nil, false, err
			}
			if cp.Owner != r.owner && cp.Held(now) {
				return cp, nil, false, &LeaseError{Name: name, Owner: cp.Owner, Until: cp.LeaseUntil}
			}
			if cp.IsDone() && !again {
				return cp, cur, false, nil
			}
			if again {
				cp = Checkpoint{Name: name, Started: now}
			}
		}
		cp.Owner, cp.LeaseUntil = r.owner, now.Add(r.lease)
		enc, err := cp.encode()
		if err != nil {
			return Checkpoint{}, nil, false, fmt.Errorf("evolve: migration %q: %w", name, err)
		}
		b := store.NewBatch().Require(store.Guard(key, cur)).Put(key, enc)
		out, err := r.s.Apply(ctx, Partition, b)
		switch {
		case err == nil && out.Committed():
			return cp, enc, true, nil
		case err != nil && !errors.Is(err, store.ErrUnknownResult):
			return Checkpoint{}, nil, false, fmt.Errorf("evolve: migration %q: claim: %w", name, err)
		case attempt+1 == claimAttempts:
			return Checkpoint{}, nil, false, fmt.Errorf("evolve: migration %q: claim: %w: its checkpoint kept changing, or its commits' results stayed unknown", name, store.ErrUnavailable)
		}
		// Another runner wrote meanwhile, or the claim's result is
		// unknown: read again and decide on what is there (a claim that
		// landed is this runner's own lease).
	}
}

// write replaces the checkpoint *raw (as this runner last wrote it) with
// cp, guarded on *raw, and sets *raw. A checkpoint another runner changed
// is a *LeaseError naming it. An unknown commit result is settled by
// reading the checkpoint back.
func (r *Runner) write(ctx context.Context, key store.Key, name string, cp Checkpoint, raw *[]byte) error {
	enc, err := cp.encode()
	if err != nil {
		return fmt.Errorf("evolve: migration %q: checkpoint: %w", name, err)
	}
	for attempt := 0; ; attempt++ {
		b := store.NewBatch().Require(store.Equals(key, *raw)).Put(key, enc)
		out, err := r.s.Apply(ctx, Partition, b)
		if err == nil && out.Committed() {
			*raw = enc
			return nil
		}
		if err != nil && !errors.Is(err, store.ErrUnknownResult) {
			return fmt.Errorf("evolve: migration %q: checkpoint: %w", name, err)
		}
		cur, ok, rerr := r.s.Get(ctx, Partition, key)
		switch {
		case rerr != nil:
			return fmt.Errorf("evolve: migration %q: checkpoint: %w (reading it back: %w)", name, err, rerr)
		case ok && bytes.Equal(cur, enc):
			*raw = enc // the write whose result was unknown landed
			return nil
		case ok && bytes.Equal(cur, *raw) && attempt+1 < claimAttempts:
			continue // it did not land: write again
		case ok && bytes.Equal(cur, *raw):
			return fmt.Errorf("evolve: migration %q: checkpoint: %w", name, err)
		case !ok:
			return &LeaseError{Name: name, Owner: "(nobody: its checkpoint was deleted)", Lost: true}
		}
		other, derr := decodeCheckpoint(name, cur)
		if derr != nil {
			return derr
		}
		return &LeaseError{Name: name, Owner: other.Owner, Until: other.LeaseUntil, Lost: true}
	}
}

// releaseTimeout bounds the write that releases a lease after the run's
// context ended.
const releaseTimeout = 5 * time.Second

// release writes cp with the lease released and cause recorded, guarded
// on *raw as write is; a failure is logged, not returned (the lease then
// lapses on its own).
func (r *Runner) release(ctx context.Context, key store.Key, cp *Checkpoint, raw *[]byte, cause error, log *slog.Logger) {
	upd := *cp
	upd.LeaseUntil = time.Time{}
	upd.LastError = truncate(cause.Error(), gen.MaxMigrationV1LastError)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := r.write(ctx, key, cp.Name, upd, raw); err != nil {
		log.Warn("evolve: migration stopped; its lease lapses on its own", "cause", cause, "release_error", err)
		return
	}
	*cp = upd
	log.Warn("evolve: migration stopped", "cause", cause, "pages", cp.Pages, "rows", cp.Rows)
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
