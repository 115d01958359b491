package relay_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The model's outcomes: producers also make reservations terminal through
// outcome.Append, in the batch that queues their relay rows, and every
// worker's registry holds an outcome.Delivery whose sink fails at random
// (with or without a retry-after hint). Besides the relay's checks, after
// every step (a quiescent point: no fire is in flight) the world checks
// that each source's backlog equals its pending rows (count and bytes),
// that every pending row is an outcome a producer landed, that an outcome
// left the pending index only after a successful sink call (or with a
// synthetic id, acknowledged locally) and took its reservation with it,
// and that no backlog is left without its delivery timer. After the drain,
// every landed outcome with a real id reached the sink.

// modelOutcome is an outcome the model knows a producer landed.
type modelOutcome struct {
	src      int
	id       refdomain.ReservationID
	terminal store.Value
}

// modelSink is the workers' sink: it records what it took and, outside
// the drain, refuses an outcome one time in five. It is called from the
// fire's goroutine (or the Delivery's, while the fire waits for it), one
// call at a time, so its random choices keep a seed's replay exact.
type modelSink struct{ w *world }

func (s modelSink) Deliver(_ context.Context, env outcome.Envelope) error {
	o, err := outcome.ParseOutcome(env.Data)
	if err != nil {
		return err
	}
	w := s.w
	if !w.quiet && w.rng.IntN(5) == 0 {
		w.seen.sinkFailures++
		w.note("sink refuses %s", o.ReservationID)
		var hint time.Duration
		if w.rng.IntN(2) == 0 {
			hint = time.Duration(1+w.rng.IntN(3)) * time.Second
		}
		if w.cfg.lyingSink {
			return nil // the mutant: a refusal reported as taken
		}
		return &outcome.DeliveryError{Reason: "model refusal", RetryAfter: hint}
	}
	w.taken[o.ReservationID]++
	w.note("sink takes %s", o.ReservationID)
	return nil
}

func (w *world) newDelivery() timers.Handler {
	d, err := outcome.NewDelivery(outcome.Config{Sink: modelSink{w}, Audience: "https://model.example", MaxRows: 2})
	if err != nil {
		panic(err)
	}
	return d
}

var modelTicket = func() store.Value {
	v, err := refdomain.EncodeReservationV1(&refdomain.ReservationTicketed{TicketID: [32]byte{1}})
	if err != nil {
		panic(err)
	}
	return v
}()

// ticket stores a new Ticketed reservation in source src, for a producer
// to make terminal, and returns its id (a synthetic one, "s:...", one time
// in four).
func (w *world) ticket(src int) (refdomain.ReservationID, bool) {
	w.reservations++
	name := fmt.Sprintf("r%d", w.reservations)
	if w.rng.IntN(4) == 0 {
		name = "s:" + name
	}
	id := refdomain.MustReservationID(name)
	key, err := refdomain.AppendReservationKey(nil, id)
	if err != nil {
		panic(err)
	}
	out, err := w.layer.Apply(w.ctx, w.sources[src], store.NewBatch().Require(store.Absent(key)).Put(key, modelTicket))
	if err != nil || !out.Committed() {
		panic(fmt.Sprintf("ticket %s: %v %v", id, out, err))
	}
	return id, true
}

// appendOutcome makes reservation id terminal in b, one time in three.
func (w *world) appendOutcome(src int, b *outbox.Builder) (*modelOutcome, uint64) {
	if w.rng.IntN(3) != 0 {
		return nil, 0
	}
	id, _ := w.ticket(src)
	terminal := &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: uint64(w.reservations), Reason: refdomain.AbortReasonExpired}
	seq, err := outcome.Append(b, id, modelTicket, terminal)
	if err != nil {
		panic(err)
	}
	v, err := refdomain.EncodeReservationV1(terminal)
	if err != nil {
		panic(err)
	}
	return &modelOutcome{src: src, id: id, terminal: v}, seq
}

// checkOutcomes runs the outcome checks of source src.
func (w *world) checkOutcomes(src int) error {
	p := w.sources[src]
	start, end := gen.ClassRange(gen.TagOutcomePendingKey)
	page, err := w.layer.Scan(w.ctx, p, start, end, nil, 10_000)
	if err != nil {
		return err
	}
	pending := map[string]bool{}
	var rows, bytes uint64
	for _, kv := range page.Entries {
		k, err := gen.ParseOutcomePendingKey(kv.Key)
		if err != nil {
			return fmt.Errorf("src%d: pending key %x: %w", src, []byte(kv.Key), err)
		}
		o, ok := w.outcomes[k.ID.String()]
		if !ok || o.src != src {
			return fmt.Errorf("src%d: outcome %s is pending but was never landed here", src, k.ID)
		}
		pending[k.ID.String()] = true
		rows++
		bytes += uint64(len(o.terminal))
	}
	v, _, err := w.layer.Get(w.ctx, p, outbox.BacklogKey())
	if err != nil {
		return err
	}
	backlog, err := outbox.DecodeBacklog(v)
	if err != nil {
		return fmt.Errorf("src%d: %w", src, err)
	}
	if backlog.Rows != rows || backlog.Bytes != bytes {
		return fmt.Errorf("src%d: backlog %d rows %d bytes, the pending rows make %d rows %d bytes", src, backlog.Rows, backlog.Bytes, rows, bytes)
	}
	if rows > 0 {
		ref, err := timers.RefKey(timers.KindOutcomeDelivery, "")
		if err != nil {
			return err
		}
		if _, ok, err := w.layer.Get(w.ctx, p, ref); err != nil || !ok {
			return fmt.Errorf("src%d holds %d pending outcomes and no delivery timer (%v)", src, rows, err)
		}
	}
	for name, o := range w.outcomes {
		if o.src != src || pending[name] {
			continue
		}
		if !strings.HasPrefix(name, "s:") && w.taken[name] == 0 {
			return fmt.Errorf("src%d: outcome %s acknowledged without a successful sink call", src, name)
		}
		key, err := refdomain.AppendReservationKey(nil, o.id)
		if err != nil {
			return err
		}
		if _, ok, err := w.layer.Get(w.ctx, p, key); err != nil || ok {
			return fmt.Errorf("src%d: outcome %s acknowledged, its reservation still stored (%v)", src, name, err)
		}
	}
	return nil
}

// outcomesDrained reports whether every backlog is empty.
func (w *world) outcomesDrained() bool {
	for _, p := range w.sources {
		v, _, err := w.layer.Get(w.ctx, p, outbox.BacklogKey())
		if err != nil || v != nil {
			return false
		}
	}
	return true
}

// everyOutcomeTaken checks, after the drain, that every landed outcome
// with a real id reached the sink at least once.
func (w *world) everyOutcomeTaken() error {
	for name := range w.outcomes {
		if !strings.HasPrefix(name, "s:") && w.taken[name] == 0 {
			return fmt.Errorf("outcome %s never reached the sink", name)
		}
	}
	return nil
}
