package riverbench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // registers database/sql driver "sqlite"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// Both sides are durable the same way: every commit is on disk when it
// returns. bbolt fsyncs each commit (boltengine.Open's default);
// SQLite runs in WAL mode, River's recommended mode, with synchronous=FULL,
// which syncs the WAL at each commit. (WAL with synchronous=NORMAL syncs
// only at checkpoints: a commit may roll back after a power loss, which
// bbolt's may not, so it would compare less durability against more.)
const sqliteDSN = "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"

// counter counts each of n items' firings, from several goroutines, and
// closes done when every item has fired at least once.
type counter struct {
	seen  []atomic.Int32
	fired atomic.Int64
	dups  atomic.Int64
	done  chan struct{}
}

func newCounter(n int) *counter {
	return &counter{seen: make([]atomic.Int32, n), done: make(chan struct{})}
}

// fire counts item i's firing.
func (c *counter) fire(i int) error {
	if i < 0 || i >= len(c.seen) {
		return fmt.Errorf("item %d out of range", i)
	}
	if c.seen[i].Add(1) > 1 {
		c.dups.Add(1)
		return nil
	}
	if c.fired.Add(1) == int64(len(c.seen)) {
		close(c.done)
	}
	return nil
}

// check fails tb unless every item fired exactly once.
func (c *counter) check(tb testing.TB, side string) {
	tb.Helper()
	if d := c.dups.Load(); d > 0 {
		tb.Fatalf("%s: %d items fired more than once", side, d)
	}
	for i := range c.seen {
		if n := c.seen[i].Load(); n != 1 {
			tb.Fatalf("%s: item %d fired %d times", side, i, n)
		}
	}
}

// wait waits for every item to fire, at most ten minutes (River works
// 10,000 jobs with one worker in about a minute on a loaded machine).
func (c *counter) wait(tb testing.TB, side string) {
	tb.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Minute):
		tb.Fatalf("%s: %d of %d items fired within ten minutes", side, c.fired.Load(), len(c.seen))
	}
}

// timerKind is the counting timers' kind (a service's).
const timerKind timers.Kind = 1000

// countingHandler completes every timer, counting it by its reference.
type countingHandler struct{ c *counter }

func (countingHandler) Kind() timers.Kind { return timerKind }

func (h countingHandler) Fire(_ context.Context, _ *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	i, err := strconv.Atoi(t.Reference)
	if err != nil {
		return nil, err
	}
	return timers.Done{}, h.c.fire(i)
}

// oursOp is one op of our side: n timers due in parts partitions of a
// fresh bbolt file, fired by one timers.Scheduler.
type oursOp struct {
	s     *fdblayer.Layer
	parts []store.Partition
	n     int
}

func partition(i int) store.Partition {
	return refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("part-%05d", i))}
}

// insertBatch is how many timers one insert commits, ours and River's: a
// producer's batch.
const insertBatch = 100

// openOurs opens a fresh bbolt file in dir (fsync on) for n timers in
// parts partitions, none inserted yet.
func openOurs(tb testing.TB, dir string, n, parts int) *oursOp {
	tb.Helper()
	e, err := boltengine.Open(filepath.Join(dir, "timers.bbolt"), boltengine.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := fdblayer.Open(e, fdblayer.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	op := &oursOp{s: s, n: n}
	for p := range parts {
		op.parts = append(op.parts, partition(p))
	}
	return op
}

// newOursOp opens a fresh bbolt file in dir (fsync on) and schedules n
// timers due now in parts partitions (see insert).
func newOursOp(tb testing.TB, dir string, n, parts int) *oursOp {
	tb.Helper()
	op := openOurs(tb, dir, n, parts)
	op.insert(tb)
	return op
}

// insert schedules the op's n timers due now and returns the time it
// took. The timers of a partition are consecutive (timer i is in
// partition i*parts/n), and a commit holds insertBatch of them, as a
// producer writes a batch of timers: one store.Commit of the batches of
// the partitions they fall in, each batch at most the timers one batch
// may hold (a third of MaxBatchOps: a new timer is a guard and two puts),
// a partition's timers going on in the next commit when its batch is
// full. With a partition per timer, a commit is the batches of
// insertBatch partitions, one timer each; with 100 timers a partition,
// of four partitions (33, 33, 33 and 1 timers).
func (op *oursOp) insert(tb testing.TB) time.Duration {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	caps := op.s.Capabilities()
	perBatch := caps.MaxBatchOps / 3
	// The timers of each partition, in order.
	of := make([][]int, len(op.parts))
	for i := range op.n {
		p := i * len(op.parts) / op.n
		of[p] = append(of[p], i)
	}
	queue := make([]int, 0, len(of))
	for p := range of {
		if len(of[p]) > 0 {
			queue = append(queue, p)
		}
	}
	start := time.Now()
	for len(queue) > 0 {
		var (
			batches []store.PartitionBatch
			carry   []int // partitions of this commit with timers left
		)
		for count := 0; count < insertBatch && len(queue) > 0; {
			p := queue[0]
			queue = queue[1:]
			k := min(len(of[p]), perBatch, insertBatch-count)
			b := store.NewBatch()
			for _, i := range of[p][:k] {
				if err := timers.Schedule(b, caps, nil, timers.Timer{Kind: timerKind, Reference: strconv.Itoa(i), DueAt: now}); err != nil {
					tb.Fatal(err)
				}
			}
			batches = append(batches, store.PartitionBatch{Partition: op.parts[p], Batch: b})
			count += k
			if of[p] = of[p][k:]; len(of[p]) > 0 {
				carry = append(carry, p)
			}
		}
		queue = append(carry, queue...)
		out, err := op.s.Commit(ctx, batches)
		if err != nil || !out.Committed() {
			tb.Fatalf("schedule timers: %v %v", out, err)
		}
	}
	return time.Since(start)
}

// run fires every timer with a Scheduler of the given workers and returns
// the time until the last timer fired; then it stops the scheduler and
// checks that every timer fired once and none is left.
func (op *oursOp) run(tb testing.TB, workers int) time.Duration {
	tb.Helper()
	c := newCounter(op.n)
	reg, err := timers.NewRegistry(countingHandler{c})
	if err != nil {
		tb.Fatal(err)
	}
	sched, err := timers.NewScheduler(timers.SchedulerConfig{
		Store: op.s, Registry: reg, ParsePartition: timers.PartitionParser(refdomain.ParsePartition),
		Owner: "bench", Workers: workers, PollInterval: time.Millisecond,
		Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- sched.Run(ctx) }()
	c.wait(tb, "ours")
	elapsed := time.Since(start)
	cancel()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		tb.Fatal(err)
	}
	c.check(tb, "ours")
	op.checkEmpty(tb)
	if err := op.s.Close(); err != nil {
		tb.Fatal(err)
	}
	return elapsed
}

// checkInserted fails tb unless every timer the op inserted is in the
// store, one timer row and one reference entry each, and every partition
// it wrote is due.
func (op *oursOp) checkInserted(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	rows := 0
	for _, p := range op.parts {
		page, err := op.s.Scan(ctx, p, nil, nil, nil, 10_000)
		if err != nil {
			tb.Fatal(err)
		}
		rows += len(page.Entries)
	}
	if rows != 2*op.n {
		tb.Fatalf("ours: %d rows for %d timers, want a timer row and a reference entry each", rows, op.n)
	}
	due, err := op.s.ScanDue(ctx, store.DueQuery{Until: time.Now(), Limit: len(op.parts) + 1})
	if err != nil {
		tb.Fatal(err)
	}
	if len(due) != min(op.n, len(op.parts)) {
		tb.Fatalf("ours: %d partitions due, want %d", len(due), min(op.n, len(op.parts)))
	}
}

// close closes the op's store without firing its timers.
func (op *oursOp) close(tb testing.TB) {
	tb.Helper()
	if err := op.s.Close(); err != nil {
		tb.Fatal(err)
	}
}

// checkEmpty fails tb when a timer row is left in a partition or the due
// index holds an entry: every Done landed.
func (op *oursOp) checkEmpty(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	for _, p := range op.parts {
		page, err := op.s.Scan(ctx, p, nil, nil, nil, 1)
		if err != nil {
			tb.Fatal(err)
		}
		if len(page.Entries) > 0 {
			tb.Fatalf("ours: %s still holds rows", store.PartitionName(p))
		}
	}
	due, err := op.s.ScanDue(ctx, store.DueQuery{Until: store.MaxTime, Limit: 1})
	if err != nil {
		tb.Fatal(err)
	}
	if len(due) > 0 {
		tb.Fatal("ours: the due index is not empty")
	}
}

// countArgs is River's counting job: N names it.
type countArgs struct {
	N int `json:"n"`
}

func (countArgs) Kind() string { return "count" }

type countWorker struct {
	river.WorkerDefaults[countArgs]
	c *counter
}

func (w *countWorker) Work(_ context.Context, job *river.Job[countArgs]) error {
	return w.c.fire(job.Args.N)
}

// riverOp is one op of River's side: n jobs scheduled due now in a fresh
// SQLite file, worked by a River client of the given workers.
type riverOp struct {
	db      *sql.DB
	client  *river.Client[*sql.Tx]
	c       *counter
	n       int
	workers int
}

// newRiverOp opens a fresh SQLite file in dir, migrates River's schema and
// inserts n jobs scheduled at the current time (see insert), with a
// client of workers workers (not started).
func newRiverOp(tb testing.TB, dir string, n, workers int) *riverOp {
	tb.Helper()
	op := openRiver(tb, dir, n, workers)
	op.insert(tb)
	return op
}

// openRiver opens a fresh SQLite file in dir and migrates River's schema,
// with a client of workers workers (not started) for n jobs, none
// inserted yet.
func openRiver(tb testing.TB, dir string, n, workers int) *riverOp {
	tb.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.sqlite3")+sqliteDSN)
	if err != nil {
		tb.Fatal(err)
	}
	// River's advice for SQLite, which runs one writer at a time.
	db.SetMaxOpenConns(1)
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		tb.Fatal(err)
	}
	op := &riverOp{db: db, c: newCounter(n), n: n, workers: workers}
	ws := river.NewWorkers()
	river.AddWorker(ws, &countWorker{c: op.c})
	op.client, err = river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: ws,
		// River's fastest polling, as our scheduler's 1 ms poll interval:
		// SQLite has no LISTEN/NOTIFY, so new work is found by polling.
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: river.FetchPollIntervalMin,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return op
}

// insert inserts the op's n jobs scheduled at the current time,
// insertBatch to an InsertMany (one transaction each), and returns the
// time it took.
func (op *riverOp) insert(tb testing.TB) time.Duration {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	params := make([]river.InsertManyParams, op.n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: countArgs{N: i}, InsertOpts: &river.InsertOpts{ScheduledAt: now}}
	}
	start := time.Now()
	for len(params) > 0 {
		k := min(len(params), insertBatch)
		if _, err := op.client.InsertMany(ctx, params[:k]); err != nil {
			tb.Fatal(err)
		}
		params = params[k:]
	}
	return time.Since(start)
}

// checkInserted fails tb unless the op's n jobs are in the database,
// waiting to be worked (available, or scheduled for the moment of their
// insert).
func (op *riverOp) checkInserted(tb testing.TB) {
	tb.Helper()
	var n int
	if err := op.db.QueryRowContext(context.Background(), "SELECT count(*) FROM river_job WHERE state IN ('available', 'scheduled')").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	if n != op.n {
		tb.Fatalf("river: %d of %d jobs inserted", n, op.n)
	}
}

// close closes the op's database without working its jobs.
func (op *riverOp) close(tb testing.TB) {
	tb.Helper()
	if err := op.db.Close(); err != nil {
		tb.Fatal(err)
	}
}

// run works every job and returns the time until the last one was
// worked; then it stops the client and checks that every job was worked
// once and completed.
func (op *riverOp) run(tb testing.TB) time.Duration {
	tb.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := op.client.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	op.c.wait(tb, "river")
	elapsed := time.Since(start)
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := op.client.Stop(stopCtx); err != nil {
		tb.Fatal(err)
	}
	op.c.check(tb, "river")
	var completed int
	if err := op.db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		tb.Fatal(err)
	}
	if completed != op.n {
		tb.Fatalf("river: %d of %d jobs completed", completed, op.n)
	}
	if err := op.db.Close(); err != nil {
		tb.Fatal(err)
	}
	return elapsed
}
