package timers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: the scheduler's lease and the parked wake time.
//
// A Scheduler finds due partitions in the store's due index (one entry per
// partition: its wake time) and fires each under a short lease, the
// partition's gen.SchedulerLeaseKey row. Claiming is one transaction
// (Scheduler.claim): it reads the wake time (no longer due: the entry is
// stale), the first page of due timers and the lease (absent, expired or
// already ours: the claim goes on), and replaces the lease by
// SchedulerLeaseV1{Owner, now+LeaseDuration} and the wake time it read by
// ParkedWake, guarded by both. Releasing is one guarded change too: the
// lease still ours is deleted and the wake time set to what the run left
// (its NextDue, which covers every timer the run did not delete), in the
// run's last batch of outcomes when there is one (see claimHold), else in
// a batch of its own.
//
// Parking is what makes the finishing batch's wake-time guard sound. Every
// timer write lowers the wake time to min(current, its due time), and only
// a write that changes it can fail the guard: had the wake time stayed at
// the due time the scheduler saw (at or before now), a timer written during
// the run with a later due time would leave it unchanged, and the finishing
// batch would replace it with the run's NextDue (or none), forgetting
// that timer. Parked at the largest time, the wake time is lowered by every
// timer write, so the guard fails, the scheduler re-reads the wake time and
// keeps the earlier of the two. The parked time has the lease's expiry as
// its ceiling (store.Batch.SetWakeCeiling): a write lowers it to at most
// the expiry, so that if the worker dies before it releases the
// partition, the timers it was firing are due again when its lease
// expires, however far ahead the written timer is.
//
// A worker that dies holding a lease leaves its partition parked. So a
// tick also lists the parked entries (every quarter of LeaseDuration, and
// at every tick while a partition this Scheduler failed waits) and claims
// those whose lease has expired, or is its own and not in flight: a claim
// whose result was unknown, or a finishing batch that failed.
//
// Leases compare times of the workers' clocks: they must agree to well
// within LeaseDuration minus the budget's MaxDuration. A lease only keeps
// two workers from firing one partition at once; each fire still lands
// at most once through RunDue's guards, whatever the clocks say.

// ParkedWake is the wake time of a partition a scheduler has claimed:
// store.MaxTime, the largest time, lowered by any timer write while the
// scheduler fires it. The index lists parked partitions after every
// other. It is a variable only because a time.Time cannot be a constant:
// never change it.
var ParkedWake = store.MaxTime

// parkedMs is ParkedWake as stored. A listing of the partitions due
// covers the wake times below pausedBaseMs, the first of the paused wake
// times (see pause.go), which lie below the latest a time.Time encodes
// short of ParkedWake (math.MaxInt64 - 1, see store.EncodeTime).
const parkedMs = math.MaxUint64

// Defaults of a SchedulerConfig.
const (
	DefaultSchedulerWorkers = 4
	DefaultLeaseDuration    = 10 * time.Second
	DefaultPollInterval     = time.Second
	// DefaultDuePageSize is the most due index entries one ScanDue of a
	// tick reads.
	DefaultDuePageSize = 256
)

// minListPage is the fewest entries one due listing of a tick asks for
// (see Scheduler.listPage).
const minListPage = 64

// maxWakeAttempts bounds the claims, and the finishing batches, that find
// the wake time changed by another writer; past it a finishing batch only
// lowers the wake time (store.Batch.WakeAt), which needs no guard.
const maxWakeAttempts = 4

// SchedulerConfig configures a Scheduler. Store and Registry are
// required; a zero value of any other field takes its default.
type SchedulerConfig struct {
	// Store holds the partitions and must implement store.DueIndex.
	Store store.Store
	// Registry holds the handlers the scheduler fires timers through.
	Registry *Registry
	// ParsePartition, optional, turns a due index entry's identity (the
	// bytes a partition's AppendTuple wrote) back into the partition, for
	// handlers that need its type and for names in logs and metrics. An
	// identity it does not know (nil: none) is addressed as a
	// store.Identity, which reaches the same rows: the scheduler fires
	// every partition of the store, whatever its schema; the library's
	// handlers (the relay among them) need no parse. [PartitionParser]
	// adapts a generated schema's parser. An identity that is not a tuple
	// names no partition: it is counted in Corrupt and logged once an hour.
	ParsePartition func(identity []byte) (store.Partition, error)
	// Owner names this Scheduler in the leases it writes, at most
	// gen.MaxSchedulerLeaseV1Owner bytes. It must be unique among the
	// Scheduler values sharing a store (default: random). A Scheduler
	// restarted with its former Owner takes back its leases at once.
	Owner string
	// Workers is how many partitions one Tick fires at once (default
	// DefaultSchedulerWorkers).
	Workers int
	// ClaimBatch is how many due partitions a worker claims in one
	// transaction, and fires with their commits shared, on a store that
	// commits several partitions at once (store.Committer); default
	// DefaultClaimBatch, 1 claims one at a time. A worker takes up to
	// ClaimBatch of a listed page's entries, never waiting for more: on a
	// store whose calls overlap (store.OverlapsCalls) no more than an
	// even share of the page, so that every worker has some.
	ClaimBatch int
	// LeaseDuration is how long a claim keeps other workers off a
	// partition (default DefaultLeaseDuration). It must exceed
	// Budget.MaxDuration, with room for the longest single fire: a fire
	// in progress is bounded by the lease (in real time), not the budget.
	LeaseDuration time.Duration
	// PollInterval is the longest Run sleeps when idle (default
	// DefaultPollInterval).
	PollInterval time.Duration
	// DuePageSize bounds the due index entries of one ScanDue (default
	// DefaultDuePageSize). A tick lists due partitions in pages of twice
	// Workers (at least 64) within this bound, so that an entry is listed
	// shortly before a worker takes it.
	DuePageSize int
	// Budget bounds each run (its RunConfig.Budget). Its zero MaxTimers
	// takes DefaultMaxTimers; its zero MaxDuration takes half of
	// LeaseDuration.
	Budget Budget
	// HeldBackoff is each run's RunConfig.HeldBackoff (default
	// DefaultHeldBackoff).
	HeldBackoff time.Duration
	// Clock is the clock of due times, leases and budgets, and each run's
	// RunConfig.Clock (default clock.Real).
	Clock clock.Clock
	// Waiter is how Run sleeps (default RealWaiter).
	Waiter Waiter
	// Logger logs the scheduler's work and, with the scheduler's Owner
	// added, each run's (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives the scheduler's metrics and each run's (default
	// telemetry.Noop).
	Metrics telemetry.Metrics
	// TracerProvider is each run's RunConfig.TracerProvider: each fire is
	// a span (nil: otel.GetTracerProvider(), recording nothing while no
	// SDK is installed there).
	TracerProvider trace.TracerProvider
}

// PartitionParser adapts a generated schema's partition parser (Parse and
// the name of the schema's partition union: refdomain.ParsePartition,
// ordersgen.ParseShard, ...), which returns the schema's own partition
// interface, to [SchedulerConfig].ParsePartition.
// A store holding the partitions of several schemas parses with a function
// of its own that tries each by namespace; the scheduler fires what none
// of them knows as a store.Identity anyway.
func PartitionParser[P store.Partition](parse func(identity []byte) (P, error)) func(identity []byte) (store.Partition, error) {
	return func(identity []byte) (store.Partition, error) {
		p, err := parse(identity)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// Scheduler fires the due timers of every partition of a store: each Tick
// lists the due partitions in the store's due index and fires each, under
// a lease, with RunDue. Several Scheduler values, in one process or on
// several machines sharing a FoundationDB cluster, share the work; while
// leases hold, no partition is fired by two of them at once.
//
// A Scheduler is safe for concurrent use: Tick may be called from several
// goroutines (a partition in flight in one call is skipped by the others),
// and Run is a loop of Ticks.
type Scheduler struct {
	store   store.Store
	due     store.DueIndex
	reg     *Registry
	parse   func([]byte) (store.Partition, error)
	owner   string
	workers int
	// claimBatch is SchedulerConfig.ClaimBatch.
	claimBatch int
	// overlaps: the store's calls overlap (store.OverlapsCalls).
	overlaps bool
	lease    time.Duration
	leaseMs  uint64
	poll     time.Duration
	pageSize int
	clock    clock.Clock
	waiter   Waiter
	log      *slog.Logger
	metrics  telemetry.Metrics
	run      RunConfig // each run's, but for its claim
	leaseKey store.Key
	full     store.Capabilities

	// listPage bounds the entries of one due listing: a few per worker,
	// so that entries are listed shortly before a worker takes them (a
	// page listed long before is staler; see list).
	listPage int
	// ticks counts the Tick calls, for startBucket.
	ticks atomic.Uint64
	// firstBucket, when set, is the bucket every listing starts at (tests).
	firstBucket func(n int) int

	mu       sync.Mutex
	inFlight map[string]struct{} // identities this Scheduler is firing
	// parkedAtMs is when the parked entries were last listed (see
	// listParked).
	parkedAtMs uint64
	corrupt    holdback // log lines of entries that name no partition
	// failing holds back, by identity, the partitions this Scheduler failed
	// to claim, run or release (see backingOff).
	failing holdback

	// pauses is the pauses of the whole store as this Scheduler's last
	// tick read them (nil: never read; see pause.go).
	pauses atomic.Pointer[pauseView]

	// fencedUntil is when this Scheduler claims again after a claim met a
	// fenced store, and fenceLog spaces the log of it (see fencedBy).
	fencedUntil atomic.Uint64
	fenceLog    holdback
}

// pauseView is what a Scheduler's runs need of the store-wide pauses: the
// paused kinds, and the generation.
type pauseView struct {
	kinds      map[Kind]bool
	generation uint64
}

// setPauses keeps ps as the Scheduler's view of the pauses.
func (s *Scheduler) setPauses(ps Pauses) {
	v := &pauseView{generation: ps.Generation}
	for _, p := range ps.Kinds {
		if v.kinds == nil {
			v.kinds = make(map[Kind]bool, len(ps.Kinds))
		}
		v.kinds[p.Kind] = true
	}
	s.pauses.Store(v)
}

// pauseView returns the Scheduler's view of the pauses: none before the
// first read (a tick reads them before it lists anything).
func (s *Scheduler) pauseView() *pauseView {
	if v := s.pauses.Load(); v != nil {
		return v
	}
	return &pauseView{}
}

// NewScheduler returns a Scheduler configured by cfg. It fails with an
// error wrapping store.ErrInvalid when Store is nil or keeps no due index,
// Registry is nil, Owner is over
// gen.MaxSchedulerLeaseV1Owner bytes, a count or duration is negative,
// LeaseDuration is under a millisecond or the budget's MaxDuration is not
// below it. It does no I/O.
func NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	invalid := func(format string, args ...any) (*Scheduler, error) {
		return nil, fmt.Errorf("timers: scheduler: "+format+": %w", append(args, store.ErrInvalid)...)
	}
	if cfg.Store == nil {
		return invalid("nil Store")
	}
	due, ok := cfg.Store.(store.DueIndex)
	if !ok {
		return invalid("store %T keeps no due index (store.DueIndex)", cfg.Store)
	}
	switch {
	case cfg.Registry == nil:
		return invalid("nil Registry")
	case len(cfg.Owner) > gen.MaxSchedulerLeaseV1Owner:
		return invalid("Owner of %d bytes, limit %d", len(cfg.Owner), gen.MaxSchedulerLeaseV1Owner)
	}
	for _, f := range []struct {
		name string
		neg  bool
	}{
		{"Workers", cfg.Workers < 0},
		{"ClaimBatch", cfg.ClaimBatch < 0},
		{"LeaseDuration", cfg.LeaseDuration < 0},
		{"PollInterval", cfg.PollInterval < 0},
		{"DuePageSize", cfg.DuePageSize < 0},
		{"Budget.MaxTimers", cfg.Budget.MaxTimers < 0},
		{"Budget.MaxDuration", cfg.Budget.MaxDuration < 0},
		{"HeldBackoff", cfg.HeldBackoff < 0},
	} {
		if f.neg {
			return invalid("negative %s", f.name)
		}
	}
	if cfg.Owner == "" {
		cfg.Owner = randomOwner()
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultSchedulerWorkers
	}
	if cfg.ClaimBatch == 0 {
		cfg.ClaimBatch = DefaultClaimBatch
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.LeaseDuration < time.Millisecond {
		return invalid("LeaseDuration %v under a millisecond", cfg.LeaseDuration)
	}
	if cfg.Budget.MaxDuration == 0 {
		cfg.Budget.MaxDuration = cfg.LeaseDuration / 2
	}
	if cfg.Budget.MaxDuration >= cfg.LeaseDuration {
		return invalid("Budget.MaxDuration %v does not leave the LeaseDuration (%v) room for the run's last fire",
			cfg.Budget.MaxDuration, cfg.LeaseDuration)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.DuePageSize == 0 {
		cfg.DuePageSize = DefaultDuePageSize
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Waiter == nil {
		cfg.Waiter = RealWaiter{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Metrics = telemetry.OrNoop(cfg.Metrics)
	log := cfg.Logger.With("scheduler", cfg.Owner)
	return &Scheduler{
		store:      cfg.Store,
		due:        due,
		reg:        cfg.Registry,
		parse:      cfg.ParsePartition,
		owner:      cfg.Owner,
		workers:    cfg.Workers,
		claimBatch: min(cfg.ClaimBatch, max(cfg.Store.Capabilities().MaxCommitBatches, 1)),
		overlaps:   store.OverlapsCalls(cfg.Store),
		lease:      cfg.LeaseDuration,
		leaseMs:    uint64(cfg.LeaseDuration.Milliseconds()),
		poll:       cfg.PollInterval,
		pageSize:   cfg.DuePageSize,
		listPage:   min(cfg.DuePageSize, max(2*cfg.Workers, minListPage)),
		clock:      cfg.Clock,
		waiter:     cfg.Waiter,
		log:        log,
		metrics:    cfg.Metrics,
		run:        RunConfig{Budget: cfg.Budget.withDefaults(), Clock: cfg.Clock, Logger: log, Metrics: cfg.Metrics, HeldBackoff: cfg.HeldBackoff, TracerProvider: cfg.TracerProvider},
		leaseKey:   gen.AppendSchedulerLeaseKey(nil),
		full:       cfg.Store.Capabilities().Full(),
		inFlight:   make(map[string]struct{}),
	}, nil
}

// nowMs is the scheduler's clock's time as stored (0 before the epoch).
func (s *Scheduler) nowMs() uint64 {
	u, _ := store.EncodeTime(s.clock.Now())
	return u
}

// randomOwner names a Scheduler that was given no Owner.
func randomOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "scheduler-" + hex.EncodeToString(b[:])
}

// Owner returns the name this Scheduler writes in its leases.
func (s *Scheduler) Owner() string { return s.owner }

// TickReport says what one Tick did. Every partition a tick looked at
// lands in at most one of Stale, Contended, Corrupt, BackedOff, Fenced and
// Claimed; a claimed
// partition may also count in Recovered, Requeued, LeaseLost and Errors.
type TickReport struct {
	// Now is the tick's time, to the millisecond: it listed the entries
	// due by then.
	Now time.Time
	// Due counts the due index entries listed, one per partition.
	Due int
	// Parked counts the parked entries listed: partitions in flight on
	// some worker, or left by one that died holding its lease.
	Parked int
	// Stale: the partition's wake time had moved past the tick's time
	// (another worker fired it) when looked at.
	Stale int
	// Contended: another worker held the lease, or won the claim.
	Contended int
	// Corrupt: the entry's identity is not a tuple (it names no
	// partition), or the lease did not decode; the partition was left
	// alone.
	Corrupt int
	// BackedOff: this Scheduler failed to claim, run or release the
	// partition less than RetryBackoff ago; it was left alone (still
	// due: another Scheduler may take it).
	BackedOff int
	// Claimed: the partition was claimed and RunDue ran.
	Claimed int
	// Recovered: the claim took over another owner's expired lease.
	Recovered int
	// Requeued: the budget cut the run; the partition stays due at its
	// earliest remaining due time, for the next tick.
	Requeued int
	// LeaseLost: the lease was no longer ours at the finishing batch.
	LeaseLost int
	// Errors: the claim, the run or the finishing batch failed (the
	// store's error); Tick's error names the first.
	Errors int
	// Fenced: the partition was not claimed because the store refuses
	// this binary's writes, its format raised past what the binary knows
	// (store.ErrNewerFormat): a Scheduler that meets it claims nothing
	// for ten seconds, then tries again, and the process must be replaced
	// by a binary that knows the format. Not an error of the tick.
	Fenced int
	// Timers sums the reports of the runs: counts add up, More is set if
	// any run's was, NextDue is the earliest, Elapsed the total.
	Timers Report
}

func (r *TickReport) add(o *TickReport) {
	r.Due += o.Due
	r.Parked += o.Parked
	r.Stale += o.Stale
	r.Contended += o.Contended
	r.Corrupt += o.Corrupt
	r.BackedOff += o.BackedOff
	r.Claimed += o.Claimed
	r.Recovered += o.Recovered
	r.Requeued += o.Requeued
	r.LeaseLost += o.LeaseLost
	r.Errors += o.Errors
	r.Fenced += o.Fenced
	r.Timers.add(o.Timers)
}

func (r *Report) add(o Report) {
	r.Fired += o.Fired
	r.Retried += o.Retried
	r.Raced += o.Raced
	r.Failed += o.Failed
	r.UnknownKind += o.UnknownKind
	r.Corrupt += o.Corrupt
	r.Newer += o.Newer
	r.Held += o.Held
	r.Paused += o.Paused
	r.DeadLettered += o.DeadLettered
	r.Snoozed += o.Snoozed
	r.More = r.More || o.More
	if !o.NextDue.IsZero() && (r.NextDue.IsZero() || o.NextDue.Before(r.NextDue)) {
		r.NextDue = o.NextDue
	}
	r.Elapsed += o.Elapsed
}

// Tick makes one pass over the due index: it lists the partitions due at
// the clock's time (in pages, bucket by bucket from the bucket this
// Scheduler starts at, oldest first within a bucket; see MembersPartition)
// and then, when due, the parked ones, and hands them to Workers
// goroutines, each of which claims a partition's
// lease, fires its due timers with RunDue within the budget and finishes
// in one batch that releases the lease and sets the partition's wake time
// (see the design note above). On a store.Committer a worker takes up to
// ClaimBatch listed partitions at a time, claims them in one transaction
// and commits their runs' batches together (see scheduler_batch.go's
// design note): each partition's claim, run and release keep their
// guards and outcomes, and a fire in progress is every partition of the
// worker's batch. A partition is looked at most once per tick.
//
// When ctx ends, Tick lists no more and claims no more; fires in progress
// finish (their context is ctx without its cancellation, bounded by the
// lease) and Tick returns the report with an error wrapping ctx's.
// Otherwise it fails when listing fails, and when partitions fail (their
// claim, run or finishing batch met a store error): then only after
// every listed partition was handled, naming the first failure, with
// TickReport.Errors counting them. Skipped partitions are not errors.
func (s *Scheduler) Tick(ctx context.Context) (TickReport, error) {
	s.metrics.Add(telemetry.MetricSchedulerTicks, nil, 1)
	nowMs := s.nowMs()
	rep := TickReport{Now: store.DecodeTime(nowMs)}
	// Each worker handles a chunk of listed entries at a time: one entry,
	// or, claiming in batches, up to ClaimBatch (see list).
	chunks := make(chan []store.DueEntry)
	locals := make([]TickReport, s.workers)
	firsts := make([]error, s.workers)
	var wg sync.WaitGroup
	for i := range s.workers {
		wg.Go(func() {
			for es := range chunks {
				var errs []error
				if len(es) == 1 {
					if err := s.handle(ctx, es[0], &locals[i]); err != nil {
						errs = append(errs, err)
					}
				} else {
					errs = s.handleMany(ctx, es, &locals[i])
				}
				for _, err := range errs {
					locals[i].Errors++
					if firsts[i] == nil {
						firsts[i] = err
					}
				}
			}
		})
	}
	listErr := s.list(ctx, nowMs, chunks, &rep)
	close(chunks)
	wg.Wait()
	var first error
	for i := range locals {
		rep.add(&locals[i])
		if first == nil {
			first = firsts[i]
		}
	}
	switch {
	case listErr != nil:
		return rep, listErr
	case first != nil:
		return rep, fmt.Errorf("timers: scheduler: %d partitions failed, the first: %w", rep.Errors, first)
	}
	return rep, nil
}

// list sends the due entries, then (see listParked) the parked ones, each
// partition once, to out, until ctx ends: in chunks of one entry, or,
// claiming in batches, each page's entries in chunks of up to ClaimBatch
// (see chunk). It starts at a bucket of its own each tick (see
// startBucket), so that schedulers sharing a store list the due
// partitions in different orders and meet each other's last; claiming in
// batches, it lists its share of the buckets before the others' (see
// listStart).
func (s *Scheduler) list(ctx context.Context, nowMs uint64, out chan<- []store.DueEntry, rep *TickReport) error {
	seen := make(map[string]struct{})
	batched := s.batched()
	send := func(page []store.DueEntry, count *int) bool {
		fresh := make([]store.DueEntry, 0, len(page))
		for _, e := range page {
			if _, dup := seen[string(e.Partition)]; dup {
				// Re-queued during this tick: it waits for the next one.
				continue
			}
			seen[string(e.Partition)] = struct{}{}
			fresh = append(fresh, e)
		}
		size := 1
		if batched {
			size = s.chunk(len(fresh))
		}
		for len(fresh) > 0 {
			n := min(size, len(fresh))
			select {
			case out <- fresh[:n:n]:
				*count += n
				fresh = fresh[n:]
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	// Decided before the workers get any entry, so that what this tick
	// lists does not depend on how far they got (a partition failed
	// during the tick is listed parked by the next one).
	parked := s.listParked(nowMs)
	n := s.due.DueBuckets()
	start, share, err := s.listStart(ctx, nowMs, n, s.ticks.Add(1))
	if err != nil {
		return err
	}
	if !batched || share < 1 {
		share = n
	}
	q := store.DueQuery{Until: store.DecodeTime(min(nowMs, pausedBaseMs-1)), Start: start, Buckets: share, Limit: s.listPage}
	if err := s.scan(ctx, q, func(page []store.DueEntry) bool { return send(page, &rep.Due) }); err != nil {
		return err
	}
	if share < n {
		// The others' shares, once this one's were handed out.
		q = store.DueQuery{Until: q.Until, Start: (start + share) % n, Buckets: n - share, Limit: s.listPage}
		if err := s.scan(ctx, q, func(page []store.DueEntry) bool { return send(page, &rep.Due) }); err != nil {
			return err
		}
	}
	// The paused entries due: of every generation before the current
	// one, and of the current one whose next timer is due (see pause.go);
	// with the parked entries, those of the generations after it, from
	// before the generation wrapped.
	lo := pausedBaseMs + s.pauseView().generation%pausedGens*pausedSpanMs
	q = store.DueQuery{From: store.DecodeTime(pausedBaseMs), Until: store.DecodeTime(lo + min(nowMs, pausedNone-1)), Start: start, Limit: s.listPage}
	if err := s.scan(ctx, q, func(page []store.DueEntry) bool { return send(page, &rep.Due) }); err != nil {
		return err
	}
	if !parked {
		return nil
	}
	if lo+pausedSpanMs < pausedEndMs {
		q = store.DueQuery{From: store.DecodeTime(lo + pausedSpanMs), Until: store.DecodeTime(pausedEndMs - 1), Start: start, Limit: s.pageSize}
		if err := s.scan(ctx, q, func(page []store.DueEntry) bool { return send(page, &rep.Due) }); err != nil {
			return err
		}
	}
	q = store.DueQuery{From: store.DecodeTime(parkedMs), Until: store.DecodeTime(parkedMs), Start: start, Limit: s.pageSize}
	return s.scan(ctx, q, func(page []store.DueEntry) bool { return send(page, &rep.Parked) })
}

// chunk is how many of n listed entries a worker claims together: up to
// ClaimBatch, and, on a store whose calls overlap (store.OverlapsCalls:
// FoundationDB), an even share of the workers' when that is less, but at
// least half ClaimBatch, so that few due partitions keep several workers
// busy and many still cost a commit per half a batch (the lister lists
// the next page while workers claim). On a store whose writes take turns
// (bbolt, memory) workers claiming at once only queue for its writer,
// each claim a commit: there a worker claims ClaimBatch.
func (s *Scheduler) chunk(n int) int {
	if !s.overlaps {
		return s.claimBatch
	}
	return min(s.claimBatch, max((n+s.workers-1)/s.workers, (s.claimBatch+1)/2))
}

// startBucket is the bucket of n a Scheduler's tick-th listing, at
// nowMs, starts at: r*n/m for the Scheduler of rank r among m live members
// (see the design note in members.go), or, when the memberships cannot be
// read, FNV-1a of its Owner and tick, so that schedulers sharing a store
// still start at buckets of their own most of the time.
func (s *Scheduler) startBucket(ctx context.Context, nowMs uint64, n int, tick uint64) int {
	start, _, _ := s.listStart(ctx, nowMs, n, tick)
	return start
}

// listStart is startBucket and how many buckets from there are this
// Scheduler's share: (r+1)*n/m - r*n/m for rank r among m live members,
// all n when the memberships cannot be read. A tick lists its share
// first, then the others' buckets, so that schedulers claiming in
// batches meet at the edges of their shares only once each has parked
// what it claimed there. The same read refreshes the Scheduler's view of
// the pauses (see members); it fails when that read fails and the
// Scheduler has no view yet: a Scheduler never fires without knowing the
// pauses (with an older view it goes on, and says so). A fenced store
// refuses that read's renewal: the tick then claims nothing.
func (s *Scheduler) listStart(ctx context.Context, nowMs uint64, n int, tick uint64) (start, share int, err error) {
	rank, count, err := s.members(ctx, nowMs)
	if err != nil && s.fencedBy(err, 0, &TickReport{}) {
		// A fenced store refuses the membership's renewal: this Scheduler
		// claims nothing (see fencedBy), and needs no pauses.
		return 0, n, nil
	}
	if err != nil && s.pauses.Load() == nil {
		return 0, 0, fmt.Errorf("timers: scheduler: read the schedulers' partition (memberships and pauses): %w", err)
	}
	if s.firstBucket != nil {
		return s.firstBucket(n), n, nil
	}
	if err == nil {
		return rank * n / count, (rank+1)*n/count - rank*n/count, nil
	}
	s.log.Warn("timers: scheduler: cannot read the schedulers' memberships and pauses; starting the listing at a bucket of its own, with the pauses read before", "error", err)
	h := uint64(14695981039346656037)
	for i := range len(s.owner) {
		h = (h ^ uint64(s.owner[i])) * 1099511628211
	}
	for i := range 8 {
		h = (h ^ (tick >> (8 * i) & 0xFF)) * 1099511628211
	}
	return int(h % uint64(n)), n, nil
}

// listParked reports whether this tick, at nowMs, lists the parked
// entries: partitions in flight elsewhere, or left parked by a worker that
// died holding its lease, or by a claim or release of this Scheduler that
// failed. A lease lives LeaseDuration, so they are listed every quarter
// of it, and at every tick while a partition this Scheduler failed has
// not been fired since.
func (s *Scheduler) listParked(nowMs uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parkedAtMs != 0 && nowMs >= s.parkedAtMs && nowMs-s.parkedAtMs < s.leaseMs/4 && !s.failing.any() {
		return false
	}
	s.parkedAtMs = nowMs
	return true
}

// scan pages through the due index entries q selects, calling fn on each
// page until it returns false (ctx ended).
func (s *Scheduler) scan(ctx context.Context, q store.DueQuery, fn func([]store.DueEntry) bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("timers: scheduler: tick: %w", err)
		}
		page, err := s.due.ScanDue(ctx, q)
		if err != nil {
			return fmt.Errorf("timers: scheduler: list due partitions: %w", err)
		}
		if !fn(page) {
			return fmt.Errorf("timers: scheduler: tick: %w", ctx.Err())
		}
		if len(page) < q.Limit {
			return nil
		}
		q.After = &page[len(page)-1]
	}
}

// enter marks partition id in flight on this Scheduler; false when it
// already is.
func (s *Scheduler) enter(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.inFlight[id]; busy {
		return false
	}
	s.inFlight[id] = struct{}{}
	return true
}

// backingOff reports whether this Scheduler failed partition id less than
// RetryBackoff ago. A failed partition stays due in the store (its wake
// time covers every timer it holds), so the backoff is kept here, in
// memory: it spaces one Scheduler's retries of a partition whose store
// calls keep failing, without ever delaying a timer in the store.
func (s *Scheduler) backingOff(id string) bool {
	return s.failing.held(id, s.nowMs())
}

// backOff notes that partition id failed (failed) or succeeded.
func (s *Scheduler) backOff(id string, failed bool) {
	if !failed {
		s.failing.release(id)
		return
	}
	s.failing.hold(id, s.nowMs(), RetryBackoff)
}

func (s *Scheduler) leave(id string) {
	s.mu.Lock()
	delete(s.inFlight, id)
	s.mu.Unlock()
}

// count adds one to a counter labelled with p's kind.
func (s *Scheduler) count(metric *telemetry.Desc, p store.Partition) {
	s.metrics.Add(metric, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: p.Kind()}}, 1)
}

// isCtxErr reports whether err is ctx's own ending.
func isCtxErr(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}
