package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// now is the tests' time: the store clock's and every builder's.
var now = time.UnixMilli(50_000)

type env struct {
	ctx    context.Context
	faults *storetest.Faults
	inner  store.Store
	p      store.Partition
	caps   store.Capabilities
}

func forEachEngine(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, eng := range testengine.All {
		t.Run(eng.Name, func(t *testing.T) { fn(t, newEnv(t, eng.Open(t, "outbox.bbolt"))) })
	}
}

// newEnv returns an env over a new store on engine, at the formats this
// binary knows (mkit format 2 and up: see newEnvAt).
func newEnv(t testing.TB, engine kv.Engine) *env {
	return newEnvAt(t, engine, gen.SchemaFormat)
}

// newEnvAt returns an env over a new store on engine whose format of the
// library's namespace is format: its Layer's gate claims to know no newer
// one, as a binary of that format would, and starts the store there.
func newEnvAt(t testing.TB, engine kv.Engine, format uint32) *env {
	l, err := fdblayer.Open(engine, fdblayer.Config{Clock: clock.NewManual(now), Gate: evolve.GateConfig{Known: map[string]uint32{gen.SchemaNamespace: format}}})
	require.NoError(t, err)
	require.Equal(t, format, store.FormatOf(l, gen.SchemaNamespace), "the store's format")
	t.Cleanup(func() { _ = l.Close() })
	return &env{
		ctx:    context.Background(),
		faults: storetest.NewFaults(l),
		inner:  l,
		p:      refdomain.RefPartition{NS: refdomain.MustNamespaceKey("tenant"), Repo: refdomain.MustRepoName("repo"), ShardRef: refdomain.MustShardRef("refs/heads/main")},
		caps:   l.Capabilities(),
	}
}

// builder reads the outbox state and returns a builder over it.
func (e *env) builder(t testing.TB) *outbox.Builder {
	t.Helper()
	o, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
	require.NoError(t, err)
	b, err := outbox.NewBuilder(e.inner, now, o)
	require.NoError(t, err)
	return b
}

func (e *env) apply(t testing.TB, b *store.Batch) store.BatchOutcome {
	t.Helper()
	out, err := e.faults.Apply(e.ctx, e.p, b)
	require.NoError(t, err)
	return out
}

func (e *env) mustApply(t testing.TB, b *store.Batch) {
	t.Helper()
	out := e.apply(t, b)
	require.True(t, out.Committed(), "%v", out)
}

func (e *env) finish(t testing.TB, ob *outbox.Builder) {
	t.Helper()
	b := store.NewBatch()
	require.NoError(t, ob.Finish(b))
	e.mustApply(t, b)
}

func (e *env) get(t testing.TB, key store.Key) store.Value {
	t.Helper()
	v, _, err := e.inner.Get(e.ctx, e.p, key)
	require.NoError(t, err)
	return v
}

func (e *env) sequence(t testing.TB) uint64 {
	t.Helper()
	s, err := outbox.DecodeSequence(e.get(t, outbox.SequenceKey()))
	require.NoError(t, err)
	return s
}

func (e *env) backlog(t testing.TB) (gen.Backlog, bool) {
	t.Helper()
	v := e.get(t, outbox.BacklogKey())
	b, err := outbox.DecodeBacklog(v)
	require.NoError(t, err)
	return b, v != nil
}

// scan lists the rows of a key class.
func (e *env) scan(t testing.TB, tag gen.Tag) []store.KeyValue {
	t.Helper()
	start, end := gen.ClassRange(tag)
	return e.scanRange(t, start, end)
}

// scanRange lists the rows in [start, end).
func (e *env) scanRange(t testing.TB, start, end []byte) []store.KeyValue {
	t.Helper()
	page, err := e.inner.Scan(e.ctx, e.p, start, end, nil, 1000)
	require.NoError(t, err)
	require.Nil(t, page.Next)
	return page.Entries
}

// timerRows lists the timer rows of kind k as (due, value).
func (e *env) timerRows(t testing.TB, k timers.Kind) map[time.Time]string {
	t.Helper()
	out := map[time.Time]string{}
	for _, kv := range e.scan(t, gen.TagTimerKey) {
		tk, err := gen.ParseTimerKey(kv.Key)
		require.NoError(t, err)
		if timers.Kind(tk.Kind) == k {
			require.Empty(t, tk.Reference)
			out[store.DecodeTime(tk.DueAtMs)] = string(kv.Value)
		}
	}
	return out
}

var (
	target = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")}
	ticket = mustEncode(&refdomain.ReservationTicketed{TicketID: [32]byte{7}})
)

func committed(repo refdomain.RepoName) refdomain.ReservationV1 {
	return &refdomain.ReservationCommitted{Repository: repo, OccurredAtMs: 100, BytesStored: 1, NewToRepo: 1, NewToStore: 1}
}

func aborted() refdomain.ReservationV1 {
	return &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 100, Reason: refdomain.AbortReasonRefConflict}
}

func mustEncode(r refdomain.ReservationV1) store.Value {
	v, err := refdomain.EncodeReservationV1(r)
	if err != nil {
		panic(err)
	}
	return v
}

func resKey(t testing.TB, rid refdomain.ReservationID) store.Key {
	t.Helper()
	k, err := refdomain.AppendReservationKey(nil, rid)
	require.NoError(t, err)
	return k
}

// seedTicketed stores Ticketed reservations rids.
func (e *env) seedTicketed(t testing.TB, rids ...refdomain.ReservationID) {
	t.Helper()
	b := store.NewBatch()
	for _, rid := range rids {
		b.Put(resKey(t, rid), ticket)
	}
	e.mustApply(t, b)
}

func put(key, value string) gen.RelayPut {
	return gen.RelayPut{Key: []byte(key), Value: []byte(value)}
}

// reservationSource is the reference domain's outcome source, the
// tests' way to queue outcomes of real records.
var reservationSource = func() *reservations.Source {
	src, err := reservations.NewSource("https://example.test")
	if err != nil {
		panic(err)
	}
	return src
}()

// appendReservation queues the outcome of reservation rid, which holds
// prior, becoming terminal.
func appendReservation(ob *outbox.Builder, rid refdomain.ReservationID, prior store.Value, terminal refdomain.ReservationV1) (uint64, error) {
	return reservationSource.Append(context.Background(), ob, refdomain.ReservationKey{ID: rid}, prior, terminal)
}

// ackReservation plans the acknowledgment of reservation rid's outcome,
// queued at seq, whose delivered value is value: the reservation is
// deleted, as its source says.
func ackReservation(a *outbox.Acks, rid refdomain.ReservationID, seq uint64, value store.Value) error {
	id, err := gen.NewOutcomeID(rid.String())
	if err != nil {
		return err
	}
	key, err := refdomain.AppendReservationKey(nil, rid)
	if err != nil {
		return err
	}
	return a.Ack(outbox.Ack{ID: id, Seq: seq, Key: key, Value: value})
}
