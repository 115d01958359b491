package outcome_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
	"github.com/mkit-dev/mkitfdb/timers/timerstest"
)

// Design note: the randomized model test of outcome delivery.
//
// It extends the model of the timers issue (relay/model_test.go: the
// outbox writer, schedulers and a handler under faults, from one seed)
// with outcomes. One seed drives a few partitions of one store, of two
// schemas: producers make reservations terminal through the outbox (some
// synthetic, some aborted) in the reference domain's partitions, and a
// bank's withdrawals (kept once acknowledged) and transfers (deleted) in
// the bank's, three sources of one Delivery; two schedulers (each with its own Delivery
// and its own faulty view of the store: failed calls, commits whose
// result is lost) tick, the clock moves on, and a row's reservation is
// corrupted now and then and repaired later. The sink fails at random,
// with or without a retry-after hint, and during a call or just before a
// fire's apply another actor may run: a producer appending to the
// partition being delivered, or the other scheduler's tick after the
// lease ran out (two fires of one partition overlapping).
//
// After every step (a quiescent point) the world checks, per partition:
// the backlog's rows equal the pending index rows; no outcome left the
// index (was acknowledged) without a successful sink call or a synthetic
// id; an acknowledged outcome's record is gone with it when its source
// deletes records, and still holds its terminal value when it keeps them;
// rows queued
// have their delivery timer; and the due index invariant. At the end,
// faults off and corruptions repaired, the clock runs on until every
// partition is drained, and every terminal outcome has reached the sink
// at least once.

const (
	omodelParts    = 4 // the first omodelResParts the reference domain's, the rest the bank's
	omodelResParts = 2
	omodelLease    = 2 * time.Second
)

type omodel struct {
	seed   uint64
	engine testengine.Engine
	mutant mutant // a broken Delivery the model must catch

	t   testing.TB
	rng *rand.Rand
	// scanRng draws the faults of scans: a fire reads its page of pending
	// rows beside the backlog, on a goroutine of its own, so scans draw
	// from a stream of their own to keep the seed's choices its own.
	scanRng *rand.Rand
	// faultsMu guards seen.faults, counted by both streams.
	faultsMu sync.Mutex
	clock    *clock.Manual
	layer    *fdblayer.Layer
	parts    []store.Partition
	quiet    bool
	depth    int
	ids      int
	trace    []string
	queued   []map[string]queued // per partition: the outcomes that landed, by id
	taken    map[string]bool     // the ids the sink took (a successful call)
	broken   []corrupted
	work     []*oworker
	seen     omodelStats

	withdrawals *outcome.TypedSource[bankgen.WithdrawalKey, bankgen.WithdrawalV1]
	transfers   *outcome.TypedSource[bankgen.TransferKey, bankgen.TransferV1]
}

type omodelStats struct {
	faults, unknown, sinkFailed, interleaved, overlaps, raced, corrupt int
	// claimsOfMany and sharedCommits count the workers' claims of several
	// partitions in one transaction and commits of several partitions'
	// outcomes (claims in batches).
	claimsOfMany, sharedCommits int
}

// mutant names a broken Delivery.
type mutant int

const (
	sound          mutant = iota
	unguarded             // the backlog guard dropped from the Delivery's outcomes
	deletesAllKept        // acknowledgments delete records their source keeps
	dropsRelease          // a commit of several partitions drops its last batch's wake change
)

// queued is an outcome that landed: its record and what the
// acknowledgment does to it.
type queued struct {
	key       store.Key
	terminal  store.Value
	keep      bool
	synthetic bool
}

type corrupted struct {
	p        int
	key      store.Key
	original store.Value
}

type oworker struct {
	faults *storetest.Faults
	sched  *timers.Scheduler
}

func newOModel(t testing.TB, seed uint64, eng testengine.Engine, mutant mutant) *omodel {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	l, err := fdblayer.Open(eng.Open(t, "omodel.bbolt"), fdblayer.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	m := &omodel{seed: seed, engine: eng, mutant: mutant, t: t, rng: rand.New(rand.NewPCG(seed, 0x6f7574)), scanRng: rand.New(rand.NewPCG(seed, 0x7363616e)), clock: clk, layer: l, taken: map[string]bool{}}
	for i := range omodelParts {
		if i < omodelResParts {
			m.parts = append(m.parts, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("ns%d", i))})
		} else {
			m.parts = append(m.parts, bankgen.BranchPartition{Branch: uint16(i)})
		}
		m.queued = append(m.queued, map[string]queued{})
	}
	m.withdrawals = newWithdrawalSource(t, "bank.withdrawals", outcome.KeepRecord)
	m.transfers = newTransferSource(t)
	for range 2 {
		m.work = append(m.work, m.newWorker())
	}
	return m
}

// storedNow is the model's time as stored records hold it
// (store.EncodeTime).
func (m *omodel) storedNow() uint64 {
	u, err := store.EncodeTime(m.clock.Now())
	if err != nil {
		panic(err)
	}
	return u
}

func (m *omodel) note(format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf("%v: ", m.clock.Now().Sub(time.UnixMilli(1_000_000)))+fmt.Sprintf(format, args...))
}

func (m *omodel) newWorker() *oworker {
	f := storetest.NewFaults(m.layer)
	fault := func(rng *rand.Rand) func(storetest.Call) bool {
		return func(storetest.Call) bool {
			if !m.quiet && rng.IntN(30) == 0 {
				m.faultsMu.Lock()
				m.seen.faults++
				m.faultsMu.Unlock()
				return true
			}
			return false
		}
	}
	for _, meth := range []storetest.Method{storetest.MethodGet, storetest.MethodGetMany, storetest.MethodApply, storetest.MethodCommit} {
		f.FailWhen(meth, fault(m.rng), nil)
	}
	f.FailWhen(storetest.MethodTransactMany, func(c storetest.Call) bool {
		if len(c.Partitions) > 1 {
			m.seen.claimsOfMany++ // matched once its function returned
		}
		return false
	}, nil)
	f.FailWhen(storetest.MethodCommit, func(c storetest.Call) bool {
		if len(c.Batches) > 1 {
			m.seen.sharedCommits++
		}
		return false
	}, nil)
	f.FailWhen(storetest.MethodScan, fault(m.scanRng), nil)
	f.CommitThenFailWhen(func(storetest.Call) bool {
		if !m.quiet && m.rng.IntN(30) == 0 {
			m.seen.unknown++
			return true
		}
		return false
	})
	f.BeforeApply(func(_ context.Context, p store.Partition, _ *store.Batch) error {
		if !m.quiet && m.depth == 0 && m.rng.IntN(8) == 0 {
			m.interleave(p)
		}
		return nil
	})
	sink := outcome.SinkFunc(func(_ context.Context, env outcome.Envelope) error {
		if !m.quiet && m.depth == 0 && m.rng.IntN(6) == 0 {
			m.interleave(nil)
		}
		if !m.quiet && m.rng.IntN(4) == 0 {
			m.seen.sinkFailed++
			return &outcome.DeliveryError{Reason: "model sink down", RetryAfter: time.Duration(m.rng.IntN(3)) * time.Second}
		}
		m.taken[env.ID] = true
		return nil
	})
	d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{resSource, m.withdrawals, m.transfers},
		MaxRows: 3, Sleep: (&manualSleep{}).Sleep})
	if err != nil {
		panic(err)
	}
	var h timers.Handler = d
	switch m.mutant {
	case unguarded:
		h = unguardedBacklog{d}
	case deletesAllKept:
		h = deletesKept{d}
	}
	reg, err := timers.NewRegistry(h)
	if err != nil {
		panic(err)
	}
	var st store.Store = f
	if m.mutant == dropsRelease {
		st = droppingRelease{f}
	}
	s, err := timers.NewScheduler(timers.SchedulerConfig{Store: st, Registry: reg, Owner: fmt.Sprintf("w%d", len(m.work)),
		Workers: 1, LeaseDuration: omodelLease, Budget: timers.Budget{MaxDuration: time.Second}, Clock: m.clock,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return &oworker{faults: f, sched: s}
}

// droppingRelease is the dropsRelease mutant: its commits of several
// partitions' batches lose the last batch's wake change, as a scheduler
// that releases partitions claimed together and forgets one's parked
// wake time.
type droppingRelease struct{ *storetest.Faults }

func (d droppingRelease) Commit(ctx context.Context, batches []store.PartitionBatch) (store.CommitOutcome, error) {
	if len(batches) > 1 {
		batches = append([]store.PartitionBatch(nil), batches...)
		last := &batches[len(batches)-1]
		if b := last.Batch; b != nil && b.NeedsDueIndex() {
			stripped := &store.Batch{Writes: b.Writes, Deadline: b.Deadline}
			for _, c := range b.Preconditions {
				if c.Op != store.MustWakeAt {
					stripped.Preconditions = append(stripped.Preconditions, c)
				}
			}
			last.Batch = stripped
		}
	}
	return d.Faults.Commit(ctx, batches)
}

// unguardedBacklog is the mutant: a Delivery whose outcomes no longer
// guard the backlog.
type unguardedBacklog struct{ *outcome.Delivery }

func (u unguardedBacklog) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	f, err := u.Delivery.Fire(ctx, c, t)
	strip := func(b *store.Batch) {
		if b == nil {
			return
		}
		kept := b.Preconditions[:0]
		for _, p := range b.Preconditions {
			if string(p.Key) != string(outbox.BacklogKey()) {
				kept = append(kept, p)
			}
		}
		b.Preconditions = kept
	}
	switch v := f.(type) {
	case timers.Done:
		strip(v.Batch)
	case timers.Reschedule:
		strip(v.Batch)
	}
	return f, err
}

// deletesKept is the mutant: a Delivery whose acknowledgments delete the
// withdrawals their source keeps.
type deletesKept struct{ *outcome.Delivery }

func (u deletesKept) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	f, err := u.Delivery.Fire(ctx, c, t)
	del := func(b *store.Batch) {
		if b == nil {
			return
		}
		for _, p := range b.Preconditions {
			if _, err := bankgen.ParseWithdrawalKey(p.Key); err == nil {
				b.Delete(p.Key)
			}
		}
	}
	switch v := f.(type) {
	case timers.Done:
		del(v.Batch)
	case timers.Reschedule:
		del(v.Batch)
	}
	return f, err
}

func (m *omodel) run(steps int) error {
	for step := range steps {
		switch r := m.rng.IntN(100); {
		case r < 35:
			m.produce(m.rng.IntN(omodelParts))
		case r < 75:
			m.tick(m.rng.IntN(len(m.work)))
		case r < 88:
			m.advance(time.Duration(m.rng.IntN(3000)) * time.Millisecond)
		case r < 94:
			m.corrupt()
		default:
			m.repair()
		}
		if err := m.check(); err != nil {
			return m.fail(fmt.Errorf("after step %d: %w", step, err))
		}
	}
	return m.drain()
}

func (m *omodel) fail(err error) error {
	tail := m.trace
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	return fmt.Errorf("seed %d (%s): %w\nlast steps:\n\t%s", m.seed, m.engine.Name, err, strings.Join(tail, "\n\t"))
}

func (m *omodel) advance(d time.Duration) {
	m.clock.Advance(d)
	m.note("clock +%v", d)
}

func (m *omodel) tick(i int) {
	rep, err := m.work[i].sched.Tick(context.Background())
	m.seen.raced += rep.Timers.Raced
	m.note("tick w%d: fired %d raced %d failed %d held %d (%v)", i, rep.Timers.Fired, rep.Timers.Raced, rep.Timers.Failed, rep.Timers.Held, err)
}

// interleave runs another actor inside a fire of partition p (nil: any).
func (m *omodel) interleave(p store.Partition) {
	m.depth++
	defer func() { m.depth-- }()
	m.seen.interleaved++
	if m.rng.IntN(3) > 0 {
		i := m.rng.IntN(omodelParts)
		for j, q := range m.parts {
			if p != nil && store.PartitionName(q) == store.PartitionName(p) {
				i = j
			}
		}
		m.note("interleaved produce:")
		m.produce(i)
		return
	}
	m.advance(omodelLease + time.Millisecond) // the other worker may take over
	m.seen.overlaps++
	m.note("interleaved tick:")
	m.tick(m.rng.IntN(len(m.work)))
}

// produce makes one or two new records of partition i terminal:
// reservations in the reference domain's partitions, withdrawals or
// transfers in the bank's.
func (m *omodel) produce(i int) {
	p := m.parts[i]
	ctx := context.Background()
	type record struct {
		id    string
		key   store.Key
		prior store.Value
		add   func(b *outbox.Builder) (store.Value, bool, error) // appends; the terminal value, and whether it is kept
	}
	var recs []record
	put := store.NewBatch()
	for range 1 + m.rng.IntN(2) {
		m.ids++
		var r record
		switch {
		case i < omodelResParts:
			id := fmt.Sprintf("r%d", m.ids)
			if m.rng.IntN(5) == 0 {
				id = "s:" + id
			}
			rk := refdomain.ReservationKey{ID: refdomain.MustReservationID(id)}
			var terminal refdomain.ReservationV1 = &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: m.storedNow()}
			if m.rng.IntN(3) == 0 {
				terminal = &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), Reason: refdomain.AbortReasonExpired}
			}
			r = record{id: id, key: mustKey(m.t, rk), prior: encode(m.t, &refdomain.ReservationTicketed{TicketID: [32]byte{byte(m.ids)}})}
			r.add = func(b *outbox.Builder) (store.Value, bool, error) {
				_, err := resSource.Append(context.Background(), b, rk, r.prior, terminal)
				return encode(m.t, terminal), false, err
			}
		case m.rng.IntN(2) == 0:
			wk := wdKey("acct", uint64(m.ids))
			prior, err := bankgen.EncodeWithdrawalV1(bankgen.WithdrawalV1{State: bankgen.StatePending, AmountCents: uint64(m.ids)})
			if err != nil {
				panic(err)
			}
			terminal := bankgen.WithdrawalV1{State: bankgen.StateFailed, AmountCents: uint64(m.ids)}
			if m.rng.IntN(3) > 0 {
				terminal.State, terminal.SettledAtMs = bankgen.StateSettled, m.storedNow()
			}
			r = record{id: withdrawalID(wk, terminal), key: mustKey(m.t, wk), prior: prior}
			r.add = func(b *outbox.Builder) (store.Value, bool, error) {
				_, err := m.withdrawals.Append(context.Background(), b, wk, r.prior, terminal)
				v, _ := bankgen.EncodeWithdrawalV1(terminal)
				return v, true, err
			}
		default:
			tk := trKey("acct", uint64(m.ids))
			pending := bankgen.TransferV1{State: bankgen.StatePending, To: bankgen.MustAccountID("savings"), AmountCents: uint64(m.ids)}
			prior, err := bankgen.EncodeTransferV1(pending)
			if err != nil {
				panic(err)
			}
			terminal := pending
			terminal.State = bankgen.StateSettled
			r = record{id: fmt.Sprintf("tr_acct_%d", m.ids), key: mustKey(m.t, tk), prior: prior}
			r.add = func(b *outbox.Builder) (store.Value, bool, error) {
				_, err := m.transfers.Append(context.Background(), b, tk, r.prior, terminal)
				v, _ := bankgen.EncodeTransferV1(terminal)
				return v, false, err
			}
		}
		recs = append(recs, r)
		put.Put(r.key, r.prior)
	}
	if out, err := m.layer.Apply(ctx, p, put); err != nil || !out.Committed() {
		panic(fmt.Sprintf("produce: %v %v", out, err))
	}
	o, err := outbox.Read(ctx, store.ReaderOf(m.layer, p))
	if err != nil {
		panic(err)
	}
	b, err := outbox.NewBuilder(m.layer, m.clock.Now(), o)
	if err != nil {
		m.note("produce p%d: %v", i, err) // a corrupt backlog: never staged
		return
	}
	landed := map[string]queued{}
	var ids []string
	for _, r := range recs {
		terminal, keep, err := r.add(b)
		if err != nil {
			panic(err)
		}
		landed[r.id] = queued{key: r.key, terminal: terminal, keep: keep, synthetic: strings.HasPrefix(r.id, "s:")}
		ids = append(ids, r.id)
	}
	batch := store.NewBatch()
	if err := b.Finish(batch); err != nil {
		panic(err)
	}
	out, err := m.layer.Apply(ctx, p, batch)
	if err != nil {
		panic(err)
	}
	m.note("produce p%d %v: %v", i, ids, out)
	if out.Committed() {
		for id, q := range landed {
			m.queued[i][id] = q
		}
	}
}

// corrupt replaces a pending outcome's record with junk.
func (m *omodel) corrupt() {
	i := m.rng.IntN(omodelParts)
	pending := m.pending(i)
	if len(pending) == 0 {
		return
	}
	id := pending[m.rng.IntN(len(pending))]
	key := m.queued[i][id].key
	v, ok, err := m.layer.Get(context.Background(), m.parts[i], key)
	if err != nil || !ok || string(v) == "junk" {
		return
	}
	if out, err := m.layer.Apply(context.Background(), m.parts[i], store.NewBatch().Require(store.Equals(key, v)).Put(key, store.Value("junk"))); err != nil || !out.Committed() {
		panic(fmt.Sprintf("corrupt: %v %v", out, err))
	}
	m.broken = append(m.broken, corrupted{p: i, key: key, original: v})
	m.seen.corrupt++
	m.note("corrupt p%d %s", i, id)
}

func (m *omodel) repair() {
	if len(m.broken) == 0 {
		return
	}
	c := m.broken[0]
	m.broken = m.broken[1:]
	if out, err := m.layer.Apply(context.Background(), m.parts[c.p], store.NewBatch().Require(store.Equals(c.key, store.Value("junk"))).Put(c.key, c.original)); err != nil || !out.Committed() {
		panic(fmt.Sprintf("repair: %v %v", out, err))
	}
	m.note("repair p%d %x", c.p, []byte(c.key))
}

// pending lists partition i's pending outcome ids.
func (m *omodel) pending(i int) []string {
	start, end := gen.ClassRange(gen.TagOutcomePendingKey)
	page, err := m.layer.Scan(context.Background(), m.parts[i], start, end, nil, 100_000)
	if err != nil {
		panic(err)
	}
	var ids []string
	for _, kv := range page.Entries {
		k, err := gen.ParseOutcomePendingKey(kv.Key)
		if err != nil {
			panic(err)
		}
		ids = append(ids, k.ID.String())
	}
	return ids
}

func (m *omodel) check() error {
	ctx := context.Background()
	if err := timerstest.CheckDueIndex(ctx, m.layer, m.parts); err != nil {
		return err
	}
	ref, err := timers.RefKey(timers.KindOutcomeDelivery, "")
	if err != nil {
		return err
	}
	for i, p := range m.parts {
		pending := map[string]bool{}
		for _, id := range m.pending(i) {
			if _, ok := m.queued[i][id]; !ok {
				return fmt.Errorf("p%d: %s is pending but was never queued", i, id)
			}
			pending[id] = true
		}
		v, _, err := m.layer.Get(ctx, p, outbox.BacklogKey())
		if err != nil {
			return err
		}
		backlog, err := outbox.DecodeBacklog(v)
		if err != nil {
			return err
		}
		if backlog.Rows != uint64(len(pending)) {
			return fmt.Errorf("p%d: the backlog has %d rows, the index %d", i, backlog.Rows, len(pending))
		}
		if backlog.Rows > 0 {
			if _, ok, err := m.layer.Get(ctx, p, ref); err != nil || !ok {
				return fmt.Errorf("p%d: %d outcomes pending without a delivery timer (%v)", i, backlog.Rows, err)
			}
		}
		for id, q := range m.queued[i] {
			if pending[id] {
				continue
			}
			if !q.synthetic && !m.taken[id] {
				return fmt.Errorf("p%d: %s was acknowledged without a successful sink call", i, id)
			}
			v, ok, err := m.layer.Get(ctx, p, q.key)
			switch {
			case err != nil:
				return err
			case q.keep && (!ok || string(v) != string(q.terminal)):
				return fmt.Errorf("p%d: %s left the index, and its record, which its source keeps, does not hold its terminal value (%x)", i, id, v)
			case !q.keep && ok:
				return fmt.Errorf("p%d: %s left the index but its record stays", i, id)
			}
		}
	}
	return nil
}

func (m *omodel) drain() error {
	m.quiet = true
	m.note("drain")
	for len(m.broken) > 0 {
		m.repair()
	}
	for range 100 {
		if err := m.check(); err != nil {
			return m.fail(fmt.Errorf("draining: %w", err))
		}
		left := 0
		for i := range m.parts {
			left += len(m.pending(i))
		}
		if left == 0 {
			for i := range m.parts {
				for id, q := range m.queued[i] {
					if !q.synthetic && !m.taken[id] {
						return m.fail(fmt.Errorf("p%d: %s never reached the sink", i, id))
					}
				}
			}
			return nil
		}
		m.advance(15 * time.Minute)
		m.tick(0)
	}
	return m.fail(errors.New("not drained after 100 ticks, 15 min apart"))
}

// TestOutcomeModel plays the model (see the design note) from many seeds;
// a failing seed replays alone with -run 'TestOutcomeModel/<engine>/seed=<n>'.
func TestOutcomeModel(t *testing.T) {
	runs := map[string]int{testengine.Memory.Name: 150, testengine.Bolt.Name: 4, testengine.MVCC.Name: 15}
	if testing.Short() {
		runs = map[string]int{testengine.Memory.Name: 20, testengine.Bolt.Name: 1, testengine.MVCC.Name: 3}
	}
	var seen omodelStats
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) {
			for seed := range uint64(runs[eng.Name]) {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					m := newOModel(t, seed, eng, sound)
					err := m.run(60)
					s := m.seen
					seen.faults += s.faults
					seen.unknown += s.unknown
					seen.sinkFailed += s.sinkFailed
					seen.interleaved += s.interleaved
					seen.overlaps += s.overlaps
					seen.raced += s.raced
					seen.corrupt += s.corrupt
					seen.claimsOfMany += s.claimsOfMany
					seen.sharedCommits += s.sharedCommits
					if err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
	t.Logf("staged: %+v", seen)
	if !t.Failed() {
		for name, n := range map[string]int{
			"injected faults": seen.faults, "unknown results": seen.unknown, "sink failures": seen.sinkFailed,
			"interleaved actors": seen.interleaved, "overlapping fires": seen.overlaps, "raced outcomes": seen.raced,
			"corruptions": seen.corrupt, "claims of several partitions": seen.claimsOfMany,
			"commits of several partitions' outcomes": seen.sharedCommits,
		} {
			if n == 0 {
				t.Errorf("no seed staged any %s", name)
			}
		}
	}
}

// TestOutcomeModelCatchesAnUnguardedBacklog proves the model bites: with
// the backlog guard dropped from the Delivery's outcomes, an outcome
// queued during a fire is lost from the backlog's count (or its timer),
// and some seed must see it.
func TestOutcomeModelCatchesAnUnguardedBacklog(t *testing.T) {
	for seed := range uint64(100) {
		m := newOModel(t, seed, testengine.Memory, unguarded)
		if err := m.run(60); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			t.Logf("seed %d caught the mutant: %s", seed, first)
			return
		}
	}
	t.Fatal("no seed of 100 caught a Delivery without its backlog guard")
}

// TestOutcomeModelCatchesADroppedRelease proves the model bites on claims
// in batches: with a commit of several partitions' batches stripped of
// its last batch's wake change (a release that deletes the lease and
// leaves the wake time parked), some seed must see the due index
// invariant broken.
func TestOutcomeModelCatchesADroppedRelease(t *testing.T) {
	for seed := range uint64(100) {
		m := newOModel(t, seed, testengine.Memory, dropsRelease)
		if err := m.run(60); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			t.Logf("seed %d caught the dropped release: %s", seed, first)
			return
		}
	}
	t.Fatal("no seed of 100 caught a release dropped from a commit of several partitions")
}

// TestOutcomeModelCatchesAnAcknowledgmentThatDeletesAKeptRecord proves the
// checks of kept records bite: with acknowledgments that delete the
// withdrawals their source keeps, some seed must see a withdrawal gone.
func TestOutcomeModelCatchesAnAcknowledgmentThatDeletesAKeptRecord(t *testing.T) {
	for seed := range uint64(100) {
		m := newOModel(t, seed, testengine.Memory, deletesAllKept)
		if err := m.run(60); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			t.Logf("seed %d caught the mutant: %s", seed, first)
			return
		}
	}
	t.Fatal("no seed of 100 caught a Delivery that deletes the records its source keeps")
}
