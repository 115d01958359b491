package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// Design note: no timer is ever left without a wake time.
//
// The invariant RunDue and the Scheduler keep, whatever races, faults or
// crashes happen: every partition that holds a timer has a due index entry
// at or before its earliest timer's due time (or is parked under a lease,
// see the Scheduler). So every timer RunDue does not delete is accounted
// for in Report.NextDue: one it moved, at its new due time; one whose
// outcome raced or whose move failed, at its own due time (it is still
// due: the next run sees what changed); one of a kind without a handler,
// or whose handler found corrupt data, is moved HeldBackoff later, like a
// Retry, so that it stays due (a handler registered later or a repair
// fires it) without waking the partition at every poll; a row that cannot
// be moved (a key that does not parse, a reference entry missing or naming
// another row) is left in place and wakes the partition HeldBackoff later.
// A run that fails part-way reports, as NextDue, at most the due time of
// the first timer it did not finish. RunDue alone lowers the wake time
// with each move (store.Batch.WakeAt); under a Scheduler's claim it leaves
// that to the claim's release (see claimHold).

// RunDue fires the due timers of partition p (DueAt <= now, to the
// millisecond), oldest
// first, each through the handler registered for its kind, until none is
// left or the budget is spent. It scans the timer class in pages, never all
// of it at once, and stops at the first timer not yet due.
//
// Each outcome lands atomically with the timer's own change, guarded by
// the timer row still holding the value the handler saw and its reference
// entry still naming that row: Done deletes both (a periodic kind's moves
// the timer to its next period), Reschedule, Retry and Snooze move the
// timer (never to a due time at or before its own) and lower the
// partition's wake time to the new due time; a failure moves it as its
// kind's RetryPolicy says, or makes it a dead letter. The outcomes of a page of
// timers of one kind commit together, in as few batches as the store's
// limits allow, as if applied one after another (see Handler). A handler
// error or panic, an unknown kind, a corrupt key or value, or a failed
// guard affect that timer only (see Report). Each timer fires at most once
// per run.
//
// RunDue fails, returning the report so far, when ctx ends or the store
// fails (a scan, a read, the read of a dead letter's key among them, or
// an apply error other than ErrInvalid for a handler's outcome): a store
// failure is never recorded as a timer's failure and spends none of its
// attempts, so that the next run records the handler's outcome as the
// handler gave it. An apply that may have landed (store.ErrUnknownResult)
// is reported as such, and the guards make running again safe. A nil
// store, partition or registry, a now before the Unix epoch or a negative
// field of cfg fails it with store.ErrInvalid before any I/O. It is safe
// for concurrent use, but two runs of one partition race each other's
// guards: a scheduler's lease keeps them apart.
func RunDue(ctx context.Context, s store.Store, p store.Partition, reg *Registry, now time.Time, cfg RunConfig) (Report, error) {
	return runDue(ctx, s, p, reg, now, cfg, nil)
}

// runDue is RunDue, under the Scheduler's claim h when h is not nil (see
// claimHold).
func runDue(ctx context.Context, s store.Store, p store.Partition, reg *Registry, now time.Time, rc RunConfig, h *claimHold) (Report, error) {
	if err := rc.check(); err != nil {
		return Report{}, err
	}
	cfg := rc.config()
	cfg.claim = h
	if s == nil || p == nil || reg == nil {
		return Report{}, fmt.Errorf("timers: run due: nil store, partition or registry: %w", store.ErrInvalid)
	}
	nowMs, err := store.EncodeTime(now)
	if err != nil {
		return Report{}, fmt.Errorf("timers: run due: %w", err)
	}
	budget := rc.Budget.withDefaults()
	r := &run{
		s:       s,
		p:       p,
		reg:     reg,
		now:     nowMs,
		budget:  budget,
		cfg:     cfg,
		log:     cfg.logger.With("partition", store.PartitionName(p)),
		started: cfg.clock.Now(),
		format:  store.FormatOf(s, gen.SchemaNamespace),
		// Sized by what the run finds, not by the budget: a scheduler runs
		// this for every due partition, most of which hold a timer or two.
		handled: make(map[ident]struct{}),
	}
	r.c = Ctx{Store: s, Partition: p, Now: store.DecodeTime(nowMs), Clock: cfg.clock, Logger: r.log, Metrics: cfg.metrics}
	err = r.scan(ctx)
	r.report.NextDue = store.DecodeTime(r.nextDueMs)
	r.report.Elapsed = cfg.clock.Now().Sub(r.started)
	r.emit()
	return r.report, err
}

// ident is a timer's identity: at most one timer per (kind, reference).
type ident struct {
	kind      Kind
	reference string
}

// candidate is a due timer found by the scan.
type candidate struct {
	key    store.Key
	tk     gen.TimerKey
	refKey store.Key
	// entry is nil for a kind no handler is registered for: the timer is
	// moved HeldBackoff later.
	entry *kindEntry
	// value and refValue are the row's and its reference entry's values,
	// read in one snapshot (value nil: the row is gone).
	value, refValue store.Value
}

// tally counts one metric of one timer kind, emitted when the run ends.
type tally struct {
	metric *telemetry.Desc
	kind   Kind
	n      uint64
}

type run struct {
	s       store.Store
	p       store.Partition
	reg     *Registry
	now     uint64
	budget  Budget
	cfg     config
	log     *slog.Logger
	c       Ctx
	started time.Time

	fires   int
	lastDue uint64 // the due time of the last due row scanned
	handled map[ident]struct{}
	unknown []Kind
	tallies []tally
	report  Report
	// nextDueMs is Report.NextDue until the run ends (0: none).
	nextDueMs uint64

	// id is the partition's identity, for retry jitter (nil until needed).
	id []byte

	cands []candidate
	// items are the outcomes of the page's fires, not yet committed.
	items []item
	// written maps the keys a combined batch writes to their last write
	// (see group).
	written map[string]store.Write
	// single: commit one outcome a batch (the store rejected a combined
	// batch that passed Validate).
	single bool

	// format is the store's mkit format, which reference entries are
	// written at (see DowngradeTimerRefV2).
	format uint32
}

// errStop ends the scan without an error: the budget is spent, or the
// first timer not yet due was reached.
var errStop = errors.New("stop")

func (r *run) scan(ctx context.Context) error {
	var after store.Cursor
	first := r.cfg.claim != nil && r.cfg.claim.page != nil
	for {
		if err := ctx.Err(); err != nil {
			return r.failed(fmt.Errorf("timers: run %s: %w", store.PartitionName(r.p), err), r.frontier())
		}
		var pg timerPage
		if first {
			// The claim read the first page in its transaction.
			pg, first = *r.cfg.claim.page, false
		} else {
			// One row more than the page size or the budget's remaining
			// fires: the run knows whether its last fire is the
			// partition's last (see claimHold).
			limit := min(r.cfg.pageSize, r.budget.MaxTimers-r.fires) + 1
			var err error
			if _, ok := r.s.(store.Transactor); ok && r.cfg.claim != nil {
				// Under a claim, in one transaction: on a cluster one round
				// trip fewer.
				_, err = store.TransactOnce(ctx, r.s, r.p, func(ctx context.Context, rd store.Reader) (*store.Batch, error) {
					pg, _, err = readTimers(ctx, rd, true, after, limit, r.now)
					return nil, err
				})
			} else {
				// Run alone, in read transactions, which on the memory and
				// bbolt engines share the store with its writer.
				pg, _, err = readTimers(ctx, store.ReaderOf(r.s, r.p), false, after, limit, r.now)
			}
			if err != nil {
				return r.failed(err, r.frontier())
			}
		}
		// Buffers as large as the page, not the limit: a scheduler runs
		// RunDue for every due partition, most of which hold few timers.
		if n := len(pg.entries); cap(r.cands) < n {
			r.cands = make([]candidate, 0, n)
		}
		err := r.page(ctx, pg)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil || pg.next == nil {
			return err
		}
		after = pg.next
	}
}

// page classifies one page and fires its candidates.
func (r *run) page(ctx context.Context, pg timerPage) error {
	r.cands = r.cands[:0]
	stop := false
	for i, kv := range pg.entries {
		tk, err := gen.ParseTimerKey(kv.Key)
		if err != nil {
			r.corruptRow(kv.Key, 0, "corrupt timer key; left in place", "key", fmt.Sprintf("%x", []byte(kv.Key)), "error", err)
			continue
		}
		if tk.DueAtMs > r.now {
			r.noteNext(tk.DueAtMs)
			stop = true
			break
		}
		r.lastDue = tk.DueAtMs
		kind := Kind(tk.Kind)
		if _, done := r.handled[ident{kind, tk.Reference}]; done {
			r.noteNext(tk.DueAtMs)
			continue
		}
		if h := r.cfg.claim; h != nil && h.paused != nil && h.paused(kind) {
			// Left where it is for a pause: the release's paused wake time
			// keeps it (see pause.go).
			r.report.Paused++
			h.pausedFirstMs = earlierWake(h.pausedFirstMs, max(tk.DueAtMs, 1))
			continue
		}
		ref := pg.refs[i]
		if ref.key == nil { // readTimers reads every due row's: unreachable
			return fmt.Errorf("timers: %s: due timer at %d read without its reference entry", store.PartitionName(r.p), tk.DueAtMs)
		}
		e := r.reg.entry(kind)
		if e == nil {
			r.unknownKind(kind)
		}
		r.cands = append(r.cands, candidate{key: kv.Key, tk: tk, refKey: ref.key, entry: e, value: kv.Value, refValue: ref.value})
	}
	if len(r.cands) > 0 {
		if err := r.fireAll(ctx, stop || pg.next == nil); err != nil {
			return err
		}
	}
	if stop {
		return errStop
	}
	return nil
}

// failed notes that the run ends with err before it finished the timers
// due at or after dueMs, and returns err.
func (r *run) failed(err error, dueMs uint64) error {
	r.noteNext(dueMs)
	return err
}

// frontier is the earliest due time a timer the scan has not yet read can
// have: the due time of the last row it read, or 1 when it read none (a
// due time of 0 is valid, but the wake time 0 means none).
func (r *run) frontier() uint64 {
	return max(r.lastDue, 1)
}
