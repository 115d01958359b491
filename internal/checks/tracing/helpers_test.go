package tracing_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

var ctx = context.Background()

// quiet drops the logs of the failures the tests cause.
var quiet = slog.New(slog.DiscardHandler)

// The writer's partition, the relay's target, the outcome's record.
var (
	source   store.Partition = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("shop")}
	target   store.Partition = refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("index")}
	latest                   = []byte("latest")
	audience                 = "https://shop.example"
)

// partner is the partner's webhook endpoint: a Receiver over HTTP whose
// handler fails while failures are left, and records what each call saw.
type partner struct {
	srv *httptest.Server
	key *outcome.HMACKey

	mu       sync.Mutex
	failures int
	calls    []call
}

// call is what one call of the partner's handler saw.
type call struct {
	traceparent string            // the request's header
	span        trace.SpanContext // the span of the handler's context
	id          string            // the envelope's
	failed      bool
}

func newPartner(t *testing.T, clk clock.Clock, tp trace.TracerProvider) *partner {
	key, err := outcome.NewHMACKey([]byte("a partner's secret of thirty-two bytes!"))
	require.NoError(t, err)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, Clock: clk, TracerProvider: tp, Logger: quiet})
	require.NoError(t, err)
	p := &partner{key: key}
	handle := func(header string) http.Handler {
		return outcome.Handle(func(ctx context.Context, e outcome.Envelope) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			c := call{traceparent: header, span: trace.SpanContextFromContext(ctx), id: e.ID}
			if p.failures > 0 {
				p.failures--
				c.failed = true
			}
			p.calls = append(p.calls, c)
			if c.failed {
				return errors.New("the partner's database is down")
			}
			return nil
		})
	}
	p.srv = httptest.NewServer(recv.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(r.Header.Get("traceparent")).ServeHTTP(w, r)
	})))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *partner) seen() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls...)
}

// world is a store kept in a bbolt file, which processes open one after
// another, on one clock, with the partner's endpoint.
type world struct {
	t       *testing.T
	path    string
	format  uint32               // the newest format of the library's namespace each process knows
	tp      trace.TracerProvider // each process's library configuration (nil: none)
	clock   *clock.Manual
	partner *partner
	source  *reservations.Source
}

func newWorld(t *testing.T, format uint32, tp, partnerTP trace.TracerProvider) *world {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	src, err := reservations.NewSource(audience)
	require.NoError(t, err)
	return &world{t: t, path: filepath.Join(t.TempDir(), "shop.bbolt"), format: format, tp: tp, clock: clk,
		partner: newPartner(t, clk, partnerTP), source: src}
}

// process is one process over the world's store: its Layer, the relay,
// outcome delivery to the partner's webhook, and a scheduler, each built
// afresh, so that what a process knows of a row it learns from the store.
type process struct {
	s     store.Store
	sched *timers.Scheduler
	layer *fdblayer.Layer
	file  *boltengine.Engine
}

func (w *world) start(owner string) *process {
	t := w.t
	eng, err := boltengine.Open(w.path, boltengine.Config{})
	require.NoError(t, err)
	// The first process's gate starts the new store at the format its
	// binary knows; the others know the same.
	l, err := fdblayer.Open(eng, fdblayer.Config{Clock: w.clock, Gate: evolve.GateConfig{Process: owner, Known: map[string]uint32{gen.SchemaNamespace: w.format}}})
	require.NoError(t, err)
	require.Equal(t, w.format, store.FormatOf(l, gen.SchemaNamespace), "the store's format")
	var s store.Store = l
	rh, err := relay.NewHandler(relay.HandlerConfig{Target: s, TracerProvider: w.tp})
	require.NoError(t, err)
	sink, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: w.partner.srv.URL, Signer: w.partner.key, Clock: w.clock})
	require.NoError(t, err)
	d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{w.source}, TracerProvider: w.tp})
	require.NoError(t, err)
	reg, err := timers.NewRegistry(rh, d)
	require.NoError(t, err)
	sched, err := timers.NewScheduler(timers.SchedulerConfig{Store: s, Registry: reg, Owner: owner, Workers: 1, Clock: w.clock,
		ParsePartition: timers.PartitionParser(refdomain.ParsePartition), TracerProvider: w.tp, Logger: quiet})
	require.NoError(t, err)
	p := &process{s: s, sched: sched, layer: l, file: eng}
	t.Cleanup(func() { _ = l.Close() })
	return p
}

// tick fires every due timer of the store once.
func (p *process) tick(t *testing.T) timers.TickReport {
	t.Helper()
	rep, err := p.sched.Tick(ctx)
	require.NoError(t, err)
	return rep
}

// crash ends the process as its death would: the store's file is closed
// under it, as the system closes a dead process's files, and nothing else
// is: its gate's process row and its scheduler's membership are left in
// the store, live until they expire. What the next process knows of a row
// it learns from the file.
func (p *process) crash(t *testing.T) {
	require.NoError(t, p.file.Close())
}

func rid(i int) refdomain.ReservationID {
	return refdomain.MustReservationID("r" + strconv.Itoa(i))
}

// produce is the writer: in ctx (its span, if any), it writes a
// reservation's prior record, then, in one batch of the source partition,
// queues a relay row to the target and the reservation's terminal outcome.
func (w *world) produce(ctx context.Context, s store.Store, i int) {
	t := w.t
	key, err := refdomain.AppendReservationKey(nil, rid(i))
	require.NoError(t, err)
	prior, err := refdomain.EncodeReservationV1(&refdomain.ReservationTicketed{TicketID: [32]byte{7}})
	require.NoError(t, err)
	out, err := s.Apply(ctx, source, store.NewBatch().Require(store.Absent(key)).Put(key, prior))
	require.NoError(t, err)
	require.True(t, out.Committed())
	committed := &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 100, BytesStored: 1, NewToRepo: 1, NewToStore: 1}
	_, err = store.Transact(ctx, s, source, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		o, err := outbox.Read(ctx, r)
		if err != nil {
			return nil, err
		}
		ob, err := outbox.NewBuilder(s, w.clock.Now(), o)
		if err != nil {
			return nil, err
		}
		if _, err := ob.Relay(ctx, target, []gen.RelayPut{{Key: latest, Value: []byte(rid(i).String())}}, nil); err != nil {
			return nil, err
		}
		if _, err := w.source.Append(ctx, ob, refdomain.ReservationKey{ID: rid(i)}, prior, committed); err != nil {
			return nil, err
		}
		b := store.NewBatch()
		return b, ob.Finish(b)
	}, store.TransactConfig{})
	require.NoError(t, err)
}

// rows returns the stored values of the source's queued relay rows and
// pending outcomes.
func rows(t *testing.T, s store.Store) (relays, pending []store.Value) {
	t.Helper()
	for _, r := range []struct {
		tag gen.Tag
		out *[]store.Value
	}{{gen.TagRelayKey, &relays}, {gen.TagOutcomePendingKey, &pending}} {
		start, end := gen.ClassRange(r.tag)
		page, err := s.Scan(ctx, source, start, end, nil, 100)
		require.NoError(t, err)
		for _, kv := range page.Entries {
			*r.out = append(*r.out, kv.Value)
		}
	}
	return relays, pending
}

// backlog returns the source's undelivered outcomes.
func backlog(t *testing.T, s store.Store) uint64 {
	t.Helper()
	v, _, err := s.Get(ctx, source, outbox.BacklogKey())
	require.NoError(t, err)
	b, err := outbox.DecodeBacklog(v)
	require.NoError(t, err)
	return b.Rows
}

// relayed returns what the relay wrote at the target.
func relayed(t *testing.T, s store.Store) string {
	t.Helper()
	v, _, err := s.Get(ctx, target, latest)
	require.NoError(t, err)
	return string(v)
}
