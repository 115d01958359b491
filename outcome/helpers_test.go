package outcome_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testlog"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// audience is the tests' delivering service.
const audience = "https://example.test"

// partition is the tests' partition, as the reference's deployment
// default namespace.
var partition store.Partition = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("default")}

var ctx = context.Background()

// env is one test's store, clock and logs.
type env struct {
	t     testing.TB
	s     store.Store
	p     store.Partition // the partition the helpers use
	clock *clock.Manual
	logs  *testlog.Buffer
	log   *slog.Logger
}

// t0 is the time most tests start at; bankT0 the bank tests'.
var t0, bankT0 = time.UnixMilli(100), time.UnixMilli(1_000_000)

// newEnv opens a memory store on a manual clock reading now.
func newEnv(t testing.TB, now time.Time) *env {
	return newEnvOn(t, testengine.Memory, now)
}

func newEnvOn(t testing.TB, eng testengine.Engine, now time.Time) *env {
	clk := clock.NewManual(now)
	l, err := fdblayer.Open(eng.Open(t, "outcome.bbolt"), fdblayer.Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	logs := &testlog.Buffer{}
	return &env{t: t, s: l, p: partition, clock: clk, logs: logs, log: slog.New(slog.NewTextHandler(logs, nil))}
}

func rid(s string) refdomain.ReservationID { return refdomain.MustReservationID(s) }

func reservationKey(t testing.TB, id string) store.Key {
	k, err := refdomain.AppendReservationKey(nil, rid(id))
	require.NoError(t, err)
	return k
}

func encode(t testing.TB, r refdomain.ReservationV1) store.Value {
	v, err := refdomain.EncodeReservationV1(r)
	require.NoError(t, err)
	return v
}

func committed() refdomain.ReservationV1 {
	return &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 100, BytesStored: 1, NewToRepo: 1, NewToStore: 1}
}

func aborted() refdomain.ReservationV1 {
	return &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 100, Reason: refdomain.AbortReasonRefConflict}
}

// seed writes a Ticketed reservation per id, then, in one outbox batch,
// makes each Committed and queues its outcome: the batch creates exactly
// one outcome-delivery timer.
func (e *env) seed(ids ...string) {
	t := e.t
	prior := encode(t, &refdomain.ReservationTicketed{TicketID: [32]byte{7}})
	b := store.NewBatch()
	for _, id := range ids {
		b.Put(reservationKey(t, id), prior)
	}
	out, err := e.s.Apply(ctx, e.p, b)
	require.NoError(t, err)
	require.True(t, out.Committed())
	e.appendOutcomes(prior, committed(), ids...)
}

// appendOutcomes queues terminal outcomes of reservations holding prior,
// through the outbox, and returns how many delivery timers the batch
// created.
func (e *env) appendOutcomes(prior store.Value, terminal refdomain.ReservationV1, ids ...string) {
	t := e.t
	o, err := outbox.Read(ctx, store.ReaderOf(e.s, e.p))
	require.NoError(t, err)
	bld, err := outbox.NewBuilder(e.s, e.clock.Now(), o)
	require.NoError(t, err)
	for _, id := range ids {
		_, err := resSource.Append(context.Background(), bld, refdomain.ReservationKey{ID: rid(id)}, prior, terminal)
		require.NoError(t, err)
	}
	b := store.NewBatch()
	require.NoError(t, bld.Finish(b))
	timersPut := 0
	for _, w := range b.Writes {
		if tk, err := gen.ParseTimerKey(w.Key); err == nil && w.Op == store.OpPut && timers.Kind(tk.Kind) == timers.KindOutcomeDelivery {
			timersPut++
		}
	}
	if o.Backlog == nil {
		require.Equal(t, 1, timersPut, "the batch that fills the backlog creates the delivery timer")
	} else {
		require.Zero(t, timersPut, "a backlog with rows has its timer")
	}
	out, err := e.s.Apply(ctx, e.p, b)
	require.NoError(t, err)
	require.True(t, out.Committed(), "%v", out)
}

// resSource is the reference domain's reservations, the source of the
// ported reference tests' outcomes, delivered on behalf of audience.
var resSource = func() *reservations.Source {
	src, err := reservations.NewSource(audience)
	if err != nil {
		panic(err)
	}
	return src
}()

// delivery builds a Delivery of sink and the reservations source, with a
// sleep that never elapses, and the changes of cfg.
func delivery(t testing.TB, sink outcome.Sink, cfg ...func(*outcome.DeliveryConfig)) *outcome.Delivery {
	c := outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{resSource}, Sleep: (&manualSleep{}).Sleep, Metrics: telemetry.NewRecorder()}
	for _, f := range cfg {
		f(&c)
	}
	if rec, ok := c.Metrics.(*telemetry.Recorder); ok {
		t.Cleanup(func() { assert.NoError(t, rec.Err(), "samples the telemetry catalogue does not list") })
	}
	d, err := outcome.NewDelivery(c)
	require.NoError(t, err)
	return d
}

// fire runs the partition's due timers at now with a Delivery of sink.
func (e *env) fire(sink outcome.Sink, now time.Time) timers.Report {
	return e.fireWith(delivery(e.t, sink), now)
}

func (e *env) fireWith(d *outcome.Delivery, now time.Time) timers.Report {
	t := e.t
	reg, err := timers.NewRegistry(d)
	require.NoError(t, err)
	rep, err := timers.RunDue(ctx, e.s, e.p, reg, now, timers.RunConfig{Clock: e.clock, Logger: e.log})
	require.NoError(t, err)
	return rep
}

func (e *env) backlog() gen.Backlog {
	v, _, err := e.s.Get(ctx, e.p, outbox.BacklogKey())
	require.NoError(e.t, err)
	b, err := outbox.DecodeBacklog(v)
	require.NoError(e.t, err)
	return b
}

func (e *env) backlogRows() uint64 { return e.backlog().Rows }

// timer returns the outcome-delivery timer's row; ok is false when there
// is none.
func (e *env) timer() (key store.Key, value store.Value, tk gen.TimerKey, ok bool) {
	start, end := gen.ClassRange(gen.TagTimerKey)
	page, err := e.s.Scan(ctx, e.p, start, end, nil, 10)
	require.NoError(e.t, err)
	for _, kv := range page.Entries {
		k, err := gen.ParseTimerKey(kv.Key)
		require.NoError(e.t, err)
		if timers.Kind(k.Kind) == timers.KindOutcomeDelivery {
			return kv.Key, kv.Value, k, true
		}
	}
	return nil, nil, gen.TimerKey{}, false
}

// timerDue returns the delivery timer's due time.
func (e *env) timerDue() time.Time {
	_, _, tk, ok := e.timer()
	require.True(e.t, ok, "an outcome-delivery timer")
	return store.DecodeTime(tk.DueAtMs)
}

// pending returns the pending index rows.
func (e *env) pending() []store.KeyValue {
	start, end := gen.ClassRange(gen.TagOutcomePendingKey)
	page, err := e.s.Scan(ctx, e.p, start, end, nil, 1000)
	require.NoError(e.t, err)
	return page.Entries
}

// timerRows counts the rows of the timer class.
func (e *env) timerRows() int {
	start, end := gen.ClassRange(gen.TagTimerKey)
	page, err := e.s.Scan(ctx, e.p, start, end, nil, 10)
	require.NoError(e.t, err)
	return len(page.Entries)
}

// plan fires the delivery timer directly, without applying the outcome,
// at t0, as the reference's planned_delivery does (at now 100).
func (e *env) plan(sink outcome.Sink) (key store.Key, value store.Value, fired timers.Fired) {
	key, value, tk, ok := e.timer()
	require.True(e.t, ok)
	d := delivery(e.t, sink)
	fired, err := d.Fire(ctx, &timers.Ctx{Store: e.s, Partition: e.p, Now: t0, Clock: e.clock, Logger: e.log},
		timers.DueTimer{Key: key, DueAt: store.DecodeTime(tk.DueAtMs), Kind: timers.Kind(tk.Kind), Reference: tk.Reference, Value: value})
	require.NoError(e.t, err)
	return key, value, fired
}

// completion adds what RunDue adds to a Done: the timer row and its
// reference entry guarded as read, and deleted.
func (e *env) completion(b *store.Batch, key store.Key, value store.Value) *store.Batch {
	ref, err := timers.RefKey(timers.KindOutcomeDelivery, "")
	require.NoError(e.t, err)
	refValue, _, err := e.s.Get(ctx, e.p, ref)
	require.NoError(e.t, err)
	return b.Require(store.Equals(key, value), store.Equals(ref, refValue)).Delete(key).Delete(ref)
}

// capture is a sink that records what it is given and fails every call
// when fail is set.
type capture struct {
	mu   sync.Mutex
	seen []outcome.Envelope
	fail bool
}

func (c *capture) Deliver(_ context.Context, env outcome.Envelope) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, env)
	if c.fail {
		return &outcome.DeliveryError{Reason: "secret sink failure"}
	}
	return nil
}

// envelopes are the envelopes the sink was given, in order.
func (c *capture) envelopes() []outcome.Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// outcomes are the reservation outcomes the envelopes carry.
func (c *capture) outcomes() []reservations.Outcome {
	var os []reservations.Outcome
	for _, e := range c.envelopes() {
		os = append(os, reservationOf(e))
	}
	return os
}

func (c *capture) ids() []string {
	var ids []string
	for _, o := range c.outcomes() {
		ids = append(ids, o.ReservationID)
	}
	return ids
}

// manualSleep is the sink timeout's wait in tests: it records what it is
// asked to wait and elapses once elapse is closed (never when nil) or its
// context ends.
type manualSleep struct {
	mu        sync.Mutex
	requested []time.Duration
	elapse    <-chan struct{}
}

func (m *manualSleep) Sleep(ctx context.Context, d time.Duration) error {
	m.mu.Lock()
	m.requested = append(m.requested, d)
	m.mu.Unlock()
	select {
	case <-m.elapse:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *manualSleep) asked() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requested)
}

// contextT shortens handler signatures.
type contextT = context.Context

// reservationOf is the reservation outcome an envelope carries (the zero
// Outcome when its data is not one).
func reservationOf(e outcome.Envelope) reservations.Outcome {
	o, _ := reservations.ParseOutcome(e.Data)
	return o
}
