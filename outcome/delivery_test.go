package outcome_test

// The reference's test module (timers_outcome_delivery.rs), test for
// test: each Go test names the Rust test it ports.

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// appendDuringAck is a sink during whose first call a second terminal
// outcome ("second", aborted) is queued.
type appendDuringAck struct{ e *env }

func (a appendDuringAck) Deliver(_ context.Context, env outcome.Envelope) error {
	o := reservationOf(env)
	e := a.e
	if o.ReservationID != "first" {
		return fmt.Errorf("appendDuringAck: delivered %q, want first", o.ReservationID)
	}
	prior := encode(e.t, &refdomain.ReservationTicketed{TicketID: [32]byte{8}})
	out, err := e.s.Apply(ctx, partition, store.NewBatch().Put(reservationKey(e.t, "second"), prior))
	if err != nil || !out.Committed() {
		return fmt.Errorf("appendDuringAck: %v %v", out, err)
	}
	e.appendOutcomes(prior, aborted(), "second")
	return nil
}

// append_during_ack_keeps_a_timer_and_delivers_on_the_next_fire
func TestAppendDuringAckKeepsATimerAndDeliversOnTheNextFire(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("first")
	rep := e.fire(appendDuringAck{e}, t0)
	require.Equal(t, 1, rep.Fired)
	assert.Equal(t, uint64(1), e.backlogRows())
	assert.Equal(t, 1, e.timerRows(), "one delivery timer remains")
	assert.Len(t, e.pending(), 1)
	due := e.timerDue()
	assert.False(t, due.After(t0.Add(time.Millisecond)), "the remaining outcome is due now")

	e.clock.Set(due)
	sink := &capture{}
	require.Equal(t, 1, e.fire(sink, due).Fired)
	require.Len(t, sink.outcomes(), 1)
	assert.Equal(t, "second", sink.outcomes()[0].ReservationID)
	assert.Equal(t, reservations.ResultAborted, sink.outcomes()[0].Result)
	assert.Equal(t, uint64(0), e.backlogRows())
	assert.Empty(t, e.pending())
}

// append_after_fresh_read_fails_the_guard_and_replans_delivery
func TestAppendAfterFreshReadFailsTheGuardAndReplansDelivery(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("first")
	sink := &capture{}
	priorBacklog, _, err := e.s.Get(ctx, partition, outbox.BacklogKey())
	require.NoError(t, err)
	key, value, fired := e.plan(sink)
	done, ok := fired.(timers.Done)
	require.True(t, ok, "the original row is acknowledged: %#v", fired)
	assert.Contains(t, done.Batch.Preconditions, store.Equals(outbox.BacklogKey(), priorBacklog))

	// An append after the handler's fresh read and before its Done lands.
	require.NoError(t, appendDuringAck{e}.Deliver(ctx, sink.envelopes()[0]))
	out, err := e.s.Apply(ctx, partition, e.completion(done.Batch, key, value))
	require.NoError(t, err)
	assert.Equal(t, store.PreconditionFailed, out.Outcome)
	assert.Equal(t, uint64(2), e.backlogRows())
	_, ok, err = e.s.Get(ctx, partition, key)
	require.NoError(t, err)
	assert.True(t, ok, "the timer stays")

	require.Equal(t, 1, e.fire(sink, t0).Fired)
	assert.Equal(t, uint64(0), e.backlogRows())
	_, ok, err = e.s.Get(ctx, partition, key)
	require.NoError(t, err)
	assert.False(t, ok, "the timer is done")
	count := map[string]int{}
	for _, id := range sink.ids() {
		count[id]++
	}
	assert.Equal(t, map[string]int{"first": 2, "second": 1}, count, "at least once: first is delivered again")
}

// no_acknowledgments_guard_the_initial_backlog
func TestNoAcknowledgmentsGuardTheInitialBacklog(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("first")
	prior, _, err := e.s.Get(ctx, partition, outbox.BacklogKey())
	require.NoError(t, err)
	_, _, fired := e.plan(&capture{fail: true})
	r, ok := fired.(timers.Reschedule)
	require.True(t, ok, "a failed sink retries: %#v", fired)
	assert.Contains(t, r.Batch.Preconditions, store.Equals(outbox.BacklogKey(), prior))
	assert.Empty(t, r.Batch.Writes)
}

// all_acknowledgments_return_done_with_an_empty_backlog
func TestAllAcknowledgmentsReturnDoneWithAnEmptyBacklog(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("first", "second")
	sink := &capture{}
	key, value, fired := e.plan(sink)
	done, ok := fired.(timers.Done)
	require.True(t, ok, "every row is acknowledged: %#v", fired)
	out, err := e.s.Apply(ctx, partition, e.completion(done.Batch, key, value))
	require.NoError(t, err)
	assert.True(t, out.Committed(), "%v", out)
	assert.Len(t, sink.outcomes(), 2)
	assert.Equal(t, uint64(0), e.backlogRows())
	_, ok, err = e.s.Get(ctx, partition, key)
	require.NoError(t, err)
	assert.False(t, ok)
}

// delivers_in_sequence_and_acks_synthetic_locally
func TestDeliversInSequenceAndAcksSyntheticLocally(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("one", "s:local", "three")
	sink := &capture{}
	require.Equal(t, 1, e.fire(sink, t0).Fired)
	assert.Equal(t, []string{"one", "three"}, sink.ids())
	for _, o := range sink.outcomes() {
		assert.Equal(t, reservations.ResultCommitted, o.Result)
	}
	v, ok, err := e.s.Get(ctx, partition, outbox.BacklogKey())
	require.NoError(t, err)
	assert.False(t, ok, "backlog deleted, not %x", v)
	for _, id := range []string{"one", "s:local", "three"} {
		_, ok, err := e.s.Get(ctx, partition, reservationKey(t, id))
		require.NoError(t, err)
		assert.False(t, ok, "reservation %s acknowledged", id)
	}
}

// sink_error_and_poison_row_retry_without_deletion
func TestSinkErrorAndPoisonRowRetryWithoutDeletion(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("poison", "behind")
	poison := reservationKey(t, "poison")
	out, err := e.s.Apply(ctx, partition, store.NewBatch().Put(poison, store.Value("bad")))
	require.NoError(t, err)
	require.True(t, out.Committed())
	sink := &capture{}
	require.Equal(t, 1, e.fire(sink, t0).Fired)
	assert.Equal(t, []string{"behind"}, sink.ids())
	assert.Equal(t, uint64(1), e.backlogRows())
	_, ok, err := e.s.Get(ctx, partition, poison)
	require.NoError(t, err)
	assert.True(t, ok, "the poison row is kept")
	assert.Contains(t, e.logs.String(), "undecodable terminal outcome; retaining")

	second := newEnv(t, t0)
	second.seed("retry")
	failing := &capture{fail: true}
	require.Equal(t, 1, second.fire(failing, t0).Fired)
	assert.Equal(t, uint64(1), second.backlogRows())
	due := second.timerDue()
	assert.False(t, due.Before(t0.Add(time.Second)), "backed off")
	second.clock.Set(due)
	require.Equal(t, 1, second.fire(failing, due).Fired)
	seen := failing.outcomes()
	require.Len(t, seen, 2)
	assert.Equal(t, seen[0], seen[1])
	assert.Equal(t, "retry", seen[0].ReservationID)
	assert.Equal(t, uint64(1), second.backlogRows())
	assert.NotContains(t, second.logs.String()+e.logs.String(), `"version"`, "no outcome body in the logs")
}

// hang is a sink that never answers (until its context ends). Its first
// call closes entered.
type hang struct {
	mu      sync.Mutex
	calls   int
	entered chan struct{}
}

func newHang() *hang { return &hang{entered: make(chan struct{})} }

func (h *hang) Deliver(ctx context.Context, _ outcome.Envelope) error {
	h.mu.Lock()
	h.calls++
	if h.calls == 1 {
		close(h.entered)
	}
	h.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (h *hang) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// slow is a sink that succeeds, but only after the clock advances by step.
type slow struct {
	clock *clock.Manual
	step  time.Duration
	capture
}

func (s *slow) Deliver(ctx context.Context, env outcome.Envelope) error {
	err := s.capture.Deliver(ctx, env)
	s.clock.Advance(s.step)
	return err
}

// a_slow_but_successful_sink_is_cut_at_the_fire_budget
func TestASlowButSuccessfulSinkIsCutAtTheFireBudget(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b", "c", "d")
	sink := &slow{clock: e.clock, step: 400 * time.Millisecond}
	// Budget 2 x 250 ms: two 400 ms calls spend it.
	e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) {
		c.SinkTimeout = 250 * time.Millisecond
		c.Clock = e.clock
	}), t0)
	assert.Equal(t, []string{"a", "b"}, sink.ids())
	assert.Equal(t, uint64(2), e.backlogRows())
	// Rescheduled now (not backed off), resuming at the untried rows.
	due := e.timerDue()
	assert.False(t, due.After(t0.Add(time.Millisecond)))
	e.clock.Set(due)
	e.fireWith(delivery(t, sink), due)
	assert.Equal(t, []string{"a", "b", "c", "d"}, sink.ids())
	assert.Equal(t, uint64(0), e.backlogRows())
}

// an_undeliverable_page_does_not_raise_the_backoff
func TestAnUndeliverablePageDoesNotRaiseTheBackoff(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("poison")
	out, err := e.s.Apply(ctx, partition, store.NewBatch().Put(reservationKey(t, "poison"), store.Value("bad")))
	require.NoError(t, err)
	require.True(t, out.Committed())
	sink := &capture{}
	now := t0
	var gaps []time.Duration
	for range 3 {
		e.clock.Set(now)
		e.fire(sink, now)
		due := e.timerDue()
		gaps = append(gaps, due.Sub(now))
		now = due
	}
	assert.Empty(t, sink.outcomes())
	// No sink call failed, so the delay stays at the first backoff step.
	for _, gap := range gaps {
		assert.LessOrEqual(t, gap, 1_200*time.Millisecond, "%v", gaps)
		assert.GreaterOrEqual(t, gap, time.Second, "%v", gaps)
	}
}

// a_hanging_sink_is_cut_at_the_timeout_and_stops_the_fire
func TestAHangingSinkIsCutAtTheTimeoutAndStopsTheFire(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b", "c")
	sink := newHang()
	// The timeout elapses once the sink hangs.
	sleeper := &manualSleep{elapse: sink.entered}
	e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) {
		c.SinkTimeout = 250 * time.Millisecond
		c.Sleep = sleeper.Sleep
	}), t0)
	// One call, cut by the 250 ms timer; the other rows are not tried.
	assert.Equal(t, 1, sink.count())
	assert.Equal(t, []time.Duration{250 * time.Millisecond}, sleeper.asked())
	assert.Equal(t, uint64(3), e.backlogRows())
	// Backed off: the retry is later than now.
	assert.False(t, e.timerDue().Before(t0.Add(time.Second)), "backed off")
	assert.Contains(t, e.logs.String(), "outcome delivery timed out")
}

// first_failure_stops_the_fire_and_no_row_is_lost
func TestFirstFailureStopsTheFireAndNoRowIsLost(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b", "c")
	failing := &capture{fail: true}
	e.fire(failing, t0)
	assert.Len(t, failing.outcomes(), 1)
	assert.Equal(t, uint64(3), e.backlogRows())
	// Backed off: the retry is later than now.
	due := e.timerDue()
	assert.False(t, due.Before(t0.Add(time.Second)), "backed off")

	// A healthy sink later delivers every row. The fire resumes after the
	// failed row a, so b and c go first; a follows once the cursor wraps.
	ok := &capture{}
	e.clock.Set(due)
	e.fire(ok, due)
	assert.Equal(t, []string{"b", "c"}, ok.ids())
	assert.Equal(t, uint64(1), e.backlogRows())
	due = e.timerDue()
	e.clock.Set(due)
	e.fire(ok, due)
	assert.Equal(t, []string{"b", "c", "a"}, ok.ids())
	assert.Equal(t, uint64(0), e.backlogRows())
}

// picky is a sink that refuses reservation b and takes the rest.
type picky struct{ capture }

func (p *picky) Deliver(ctx context.Context, env outcome.Envelope) error {
	o := reservationOf(env)
	if o.ReservationID == "b" {
		return &outcome.DeliveryError{Reason: "rejected"}
	}
	return p.capture.Deliver(ctx, env)
}

// a_refused_row_does_not_starve_the_rows_behind_it: the fire stops at the
// refused row, and the next fire resumes after it rather than trying it
// first again.
func TestARefusedRowDoesNotStarveTheRowsBehindIt(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b", "c", "d")
	sink := &picky{}
	now := t0
	for range 3 {
		e.fire(sink, now)
		now = now.Add(1_000 * time.Second)
		e.clock.Set(now)
	}
	assert.Equal(t, []string{"a", "c", "d"}, sink.ids())
	assert.Equal(t, uint64(1), e.backlogRows(), "only b remains")
}

// max_rows_bounds_one_fire_and_the_cursor_rotates
func TestMaxRowsBoundsOneFireAndTheCursorRotates(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b", "c", "d", "e")
	sink := &capture{}
	mk := func() *outcome.Delivery { return delivery(t, sink, func(c *outcome.DeliveryConfig) { c.MaxRows = 2 }) }
	e.fireWith(mk(), t0)
	assert.Len(t, sink.outcomes(), 2)
	assert.Equal(t, uint64(3), e.backlogRows())
	e.clock.Set(t0.Add(time.Millisecond))
	e.fireWith(mk(), t0.Add(time.Millisecond))
	e.clock.Set(t0.Add(2 * time.Millisecond))
	e.fireWith(mk(), t0.Add(2*time.Millisecond))
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, sink.ids())
	assert.Equal(t, uint64(0), e.backlogRows())
}

// limitedStore fails a test whose batch exceeds the store's operation cap
// (Apply would reject it with ErrInvalid, and RunDue count a failure).
type limitedStore struct {
	store.Store
	t       testing.TB
	maxOps  int
	largest int
}

func (l *limitedStore) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	l.largest = max(l.largest, b.Ops())
	if b.Ops() > l.maxOps {
		l.t.Errorf("a batch of %d operations exceeds %d", b.Ops(), l.maxOps)
	}
	return l.Store.Apply(ctx, p, b)
}

// configured_max_rows_24_or_25_drains_without_exceeding_atomic_batch_limit,
// and the bounds around this library's own ceiling (MaxRows).
func TestConfiguredMaxRowsDrainsWithoutExceedingTheAtomicBatchLimit(t *testing.T) {
	ceiling := outcome.MaxRows(newEnv(t, t0).s.Capabilities())
	require.Equal(t, 30, ceiling)
	for _, configured := range []int{24, 25, ceiling, ceiling + 1, 100} {
		t.Run(fmt.Sprint(configured), func(t *testing.T) {
			e := newEnv(t, t0)
			rows := max(25, ceiling+1)
			var ids []string
			for i := range rows {
				ids = append(ids, fmt.Sprintf("row-%02d", i))
			}
			// Two outbox batches: one would exceed the batch limit.
			e.seed(ids[:20]...)
			e.seedMore(ids[20:]...)
			limited := &limitedStore{Store: e.s, t: t, maxOps: e.s.Capabilities().MaxBatchOps}
			e.s = limited
			sink := &capture{}
			for tick := range 3 {
				now := t0.Add(time.Duration(tick) * 1_000 * time.Second)
				e.clock.Set(now)
				rep := e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) { c.MaxRows = configured }), now)
				assert.Zero(t, rep.Failed, "configured row bound %d", configured)
			}
			assert.Len(t, sink.outcomes(), rows, "configured row bound %d", configured)
			assert.Equal(t, uint64(0), e.backlogRows(), "configured row bound %d", configured)
			assert.LessOrEqual(t, limited.largest, e.s.Capabilities().MaxBatchOps)
		})
	}
}

// One fire examines exactly MaxRows rows when configured above it: the
// timer's own operations are reserved once, not twice.
func TestOneFireExaminesMaxRows(t *testing.T) {
	e := newEnv(t, t0)
	ceiling := outcome.MaxRows(e.s.Capabilities())
	var ids []string
	for i := range ceiling + 1 {
		ids = append(ids, fmt.Sprintf("row-%02d", i))
	}
	e.seed(ids[:20]...)
	e.seedMore(ids[20:]...)
	limited := &limitedStore{Store: e.s, t: t, maxOps: e.s.Capabilities().MaxBatchOps}
	e.s = limited
	sink := &capture{}
	rep := e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) { c.MaxRows = 1000 }), t0)
	require.Zero(t, rep.Failed)
	assert.Len(t, sink.outcomes(), ceiling, "one fire delivers MaxRows outcomes")
	assert.Equal(t, uint64(1), e.backlogRows())
	assert.LessOrEqual(t, limited.largest, e.s.Capabilities().MaxBatchOps)
}

// seedMore queues further outcomes on a backlog that has rows.
func (e *env) seedMore(ids ...string) {
	prior := encode(e.t, &refdomain.ReservationTicketed{TicketID: [32]byte{7}})
	b := store.NewBatch()
	for _, id := range ids {
		b.Put(reservationKey(e.t, id), prior)
	}
	out, err := e.s.Apply(ctx, partition, b)
	require.NoError(e.t, err)
	require.True(e.t, out.Committed())
	e.appendOutcomes(prior, committed(), ids...)
}

// ticking is a clock that moves a second at every reading.
type ticking struct {
	mu  sync.Mutex
	now time.Time
}

func (c *ticking) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

// A fire whose budget is spent before its first sink call starts at that
// row again next time. (The reference resumed after the page, leaving
// the page's rows for a whole rotation.)
func TestABudgetSpentBeforeTheFirstCallSkipsNoRow(t *testing.T) {
	e := newEnv(t, t0)
	e.seed("a", "b", "c")
	sink := &capture{}
	e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) {
		c.MaxRows = 1
		c.Clock = &ticking{}
		c.FireBudget = 500 * time.Millisecond
	}), t0)
	assert.Empty(t, sink.outcomes())
	due := e.timerDue()
	e.clock.Set(due)
	e.fireWith(delivery(t, sink, func(c *outcome.DeliveryConfig) { c.MaxRows = 1 }), due)
	assert.Equal(t, []string{"a"}, sink.ids())
}

// shortSecondPages is a store whose every second scan of the pending
// outcomes holds one row, however many its limit allows, as a store's
// byte budget may cut a page: the contract says only a nil Next ends a
// range.
type shortSecondPages struct {
	store.Store
	mu    sync.Mutex
	scans int
}

func (s *shortSecondPages) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	pendingStart, _ := gen.ClassRange(gen.TagOutcomePendingKey)
	s.mu.Lock()
	short := bytes.Equal(start, pendingStart) && s.scans%2 == 1
	if bytes.Equal(start, pendingStart) {
		s.scans++
	}
	s.mu.Unlock()
	if !short || limit == 1 {
		return s.Store.Scan(ctx, p, start, end, after, limit)
	}
	return s.Store.Scan(ctx, p, start, end, after, 1)
}

// A refused row is skipped by its position, whatever pages the store
// reads it in: the fire that refused c resumes after c even when the scan
// that finds the cursor after it returns short pages.
func TestARefusedRowIsSkippedWhateverThePages(t *testing.T) {
	e := newEnv(t, t0)
	e.s = &shortSecondPages{Store: e.s}
	e.seed("a", "b", "c", "d")
	sink := &refuses{id: "c"}
	now := t0
	for range 2 {
		e.fire(sink, now)
		now = now.Add(1_000 * time.Second)
		e.clock.Set(now)
	}
	assert.Equal(t, []string{"a", "b", "d"}, sink.ids(), "the second fire starts after the refused c")
}

// refuses is a sink that refuses one reservation and takes the rest.
type refuses struct {
	capture
	id string
}

func (r *refuses) Deliver(ctx context.Context, env outcome.Envelope) error {
	if reservationOf(env).ReservationID == r.id {
		return &outcome.DeliveryError{Reason: "rejected"}
	}
	return r.capture.Deliver(ctx, env)
}
