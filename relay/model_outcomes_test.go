package relay_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// The model's outcomes: producers also make records terminal through
// outcome sources, in the batch that queues their relay rows: reservations
// (refdomain/reservations) in the reference domain's source partitions,
// and in the last source partition, a bank's (internal/testkit/bank), withdrawals
// (kept once acknowledged) and transfers (deleted). Every worker's
// registry holds an outcome.Delivery of the three sources whose sink fails
// at random (with or without a retry-after hint). Besides the relay's
// checks, after every step (a quiescent point: no fire is in flight) the
// world checks that each source's backlog equals its pending rows (count
// and bytes), that every pending row is an outcome a producer landed, that
// an outcome left the pending index only after a successful sink call (or
// with a synthetic id, acknowledged locally), that its record went with
// it or, when its source keeps records, still holds its terminal value,
// and that no backlog is left without its delivery timer. After the
// drain, every landed outcome with a real id reached the sink.

// modelOutcome is an outcome the model knows a producer landed.
type modelOutcome struct {
	src       int
	key       store.Key
	terminal  store.Value
	keep      bool // its source keeps the record once acknowledged
	synthetic bool
}

// modelSink is the workers' sink: it records what it took and, outside
// the drain, refuses an outcome one time in five. It is called from the
// fire's goroutine (or the Delivery's, while the fire waits for it), one
// call at a time, so its random choices keep a seed's replay exact.
type modelSink struct{ w *world }

func (s modelSink) Deliver(_ context.Context, env outcome.Envelope) error {
	w := s.w
	if !w.quiet && w.rng.IntN(5) == 0 {
		w.seen.sinkFailures++
		w.note("sink refuses %s", env.ID)
		var hint time.Duration
		if w.rng.IntN(2) == 0 {
			hint = time.Duration(1+w.rng.IntN(3)) * time.Second
		}
		if w.cfg.lyingSink {
			return nil // the mutant: a refusal reported as taken
		}
		return &outcome.DeliveryError{Reason: "model refusal", RetryAfter: hint}
	}
	w.taken[env.ID]++
	w.note("sink takes %s", env.ID)
	return nil
}

// The model's outcome sources.
var (
	modelReservations = func() *reservations.Source {
		src, err := reservations.NewSource("https://model.example")
		if err != nil {
			panic(err)
		}
		return src
	}()
	modelWithdrawals = bank.Withdrawals()
	modelTransfers   = bank.Transfers()
)

func (w *world) newDelivery() timers.Handler {
	d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: modelSink{w},
		Sources: []outcome.Source{modelReservations, modelWithdrawals, modelTransfers}, MaxRows: 2})
	if err != nil {
		panic(err)
	}
	return d
}

// bankSource reports whether source partition src is the bank's.
func bankSource(src int) bool { return src == modelSources-1 }

// sourcePartition is source partition i: the reference domain's, but the
// last, which is the bank's.
func sourcePartition(i int) store.Partition {
	if bankSource(i) {
		return bankgen.BranchPartition{Branch: uint16(i)}
	}
	return refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey(fmt.Sprintf("src%d", i))}
}

var modelTicket = func() store.Value {
	v, err := refdomain.EncodeReservationV1(&refdomain.ReservationTicketed{TicketID: [32]byte{1}})
	if err != nil {
		panic(err)
	}
	return v
}()

// record stores, in source src, a new record of the source's schema in
// its initial state (prior), for a producer to make terminal.
func (w *world) record(src int, key, prior []byte) {
	out, err := w.layer.Apply(w.ctx, w.sources[src], store.NewBatch().Require(store.Absent(key)).Put(key, prior))
	if err != nil || !out.Committed() {
		panic(fmt.Sprintf("record %x: %v %v", key, out, err))
	}
}

func mustKey(k outcome.Key) store.Key {
	b, err := k.AppendKey(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// appendOutcome makes a new record of source src terminal in b, one time
// in three, and returns its outcome's id.
func (w *world) appendOutcome(src int, b *outbox.Builder) (*modelOutcome, string, uint64) {
	if w.rng.IntN(3) != 0 {
		return nil, "", 0
	}
	w.reservations++
	n := uint64(w.reservations)
	var (
		o   = &modelOutcome{src: src}
		id  string
		seq uint64
		err error
	)
	switch {
	case !bankSource(src):
		name := fmt.Sprintf("r%d", n)
		if w.rng.IntN(4) == 0 {
			name = "s:" + name // a synthetic id, one time in four
		}
		key := refdomain.ReservationKey{ID: refdomain.MustReservationID(name)}
		o.key, o.synthetic, id = mustKey(key), reservations.IsSynthetic(key.ID), name
		w.record(src, o.key, modelTicket)
		terminal := &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: n, Reason: refdomain.AbortReasonExpired}
		seq, err = modelReservations.Append(context.Background(), b, key, modelTicket, terminal)
		if o.terminal, err = refdomain.EncodeReservationV1(terminal); err != nil {
			panic(err)
		}
	case w.rng.IntN(2) == 0:
		key := bank.WithdrawalKey("acct", n)
		prior, terminal := bankgen.WithdrawalV1{State: bankgen.StatePending, AmountCents: n}, bankgen.WithdrawalV1{State: bankgen.StateSettled, AmountCents: n, SettledAtMs: n}
		o.key, o.keep, id = mustKey(key), true, bank.WithdrawalID(key, terminal)
		p := must(bankgen.EncodeWithdrawalV1(prior))
		w.record(src, o.key, p)
		seq, err = modelWithdrawals.Append(context.Background(), b, key, p, terminal)
		o.terminal = must(bankgen.EncodeWithdrawalV1(terminal))
	default:
		key := bank.TransferKey("acct", n)
		prior := bankgen.TransferV1{State: bankgen.StatePending, To: bankgen.MustAccountID("savings"), AmountCents: n}
		terminal := prior
		terminal.State = bankgen.StateFailed
		o.key, id = mustKey(key), bank.TransferID(key, terminal)
		p := must(bankgen.EncodeTransferV1(prior))
		w.record(src, o.key, p)
		seq, err = modelTransfers.Append(context.Background(), b, key, p, terminal)
		o.terminal = must(bankgen.EncodeTransferV1(terminal))
	}
	if err != nil {
		panic(err)
	}
	return o, id, seq
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
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
		if !o.synthetic && w.taken[name] == 0 {
			return fmt.Errorf("src%d: outcome %s acknowledged without a successful sink call", src, name)
		}
		v, ok, err := w.layer.Get(w.ctx, p, o.key)
		switch {
		case err != nil:
			return err
		case o.keep && (!ok || string(v) != string(o.terminal)):
			return fmt.Errorf("src%d: outcome %s acknowledged, and its record, which its source keeps, does not hold its terminal value (%x)", src, name, v)
		case !o.keep && ok:
			return fmt.Errorf("src%d: outcome %s acknowledged, its record still stored", src, name)
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
	for name, o := range w.outcomes {
		if !o.synthetic && w.taken[name] == 0 {
			return fmt.Errorf("outcome %s never reached the sink", name)
		}
	}
	return nil
}
