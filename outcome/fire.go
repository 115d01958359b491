package outcome

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// fire is the state of one Fire.
type fire struct {
	d       *Delivery
	c       *timers.Ctx
	s       store.Store
	p       store.Partition
	id      []byte // the partition's tuple identity
	log     *slog.Logger
	metrics telemetry.Metrics
	clock   clock.Clock
	// attempt is the delivery timer's backoff attempt: the fires in a row
	// whose sink call failed before this one.
	attempt uint32
	// pending is the page of pending rows the candidates index: a sink
	// call's span reads its writer's trace context there (see send).
	pending []store.KeyValue
}

// candidate is a pending row that became a deliverable outcome.
type candidate struct {
	index int // in the page
	acked
	queued    time.Time // when it was queued (zero: unknown)
	e         Envelope
	synthetic bool
}

// acked is a row to acknowledge: its pending index entry (id, seq), its
// source, and its record's key and value as read (the acknowledgment
// guards it).
type acked struct {
	id    gen.OutcomeID
	seq   uint64
	src   *sourceCore
	key   store.Key
	value store.Value
}

// run fires the delivery timer t: it reads the backlog and a page of
// pending rows, delivers the page's outcomes, and returns the
// acknowledgments of those delivered, with the timer completed when no
// row remains and moved to the next fire otherwise.
func (f *fire) run(ctx context.Context, t timers.DueTimer) (timers.Fired, error) {
	// MaxRows reserves the timer's own operations; the acknowledgments'
	// plan reserves what the timer's outcome adds (operations and bytes).
	caps := f.s.Capabilities()
	maxRows := min(f.d.maxRows, MaxRows(caps))
	caps = timers.HandlerCapabilities(caps, t)

	state, stateErr := decodeTimer(t.Value)
	oc, rows, pg, err := f.readBacklog(ctx, state.cursor, stateErr == nil, maxRows)
	if err != nil {
		return nil, err
	}
	if rows == 0 {
		pg.wait()
		// Guarded: an outcome queued meanwhile keeps the timer.
		return timers.Done{Batch: store.NewBatch().Require(store.Guard(backlogKey, oc)).Delete(backlogKey)}, nil
	}
	if stateErr != nil {
		return nil, fmt.Errorf("outcome: %s: %w", store.PartitionName(f.p), stateErr)
	}
	f.attempt = state.attempt

	// The scan cursor names the last row examined; the page is the fire's
	// row budget, so that no unexamined suffix waits a whole rotation.
	if pg == nil {
		pg = f.readPage(ctx, state.cursor, maxRows)
	}
	page, after, err := pg.wait()
	if err != nil {
		return nil, err
	}
	f.pending = page.Entries[:min(len(page.Entries), maxRows)]
	cands, err := f.candidates(ctx, f.pending)
	if err != nil {
		return nil, err
	}
	res, err := f.deliver(ctx, cands)
	if err != nil {
		return nil, err
	}
	b, acks, done, err := f.acknowledge(ctx, caps, oc, res.acked)
	if err != nil {
		return nil, err
	}
	if done {
		return timers.Done{Batch: b}, nil
	}
	return f.reschedule(ctx, state, page, after, res, acks, b)
}

// readBacklog reads the backlog (its stored value and its rows) and sets
// its gauges. With withPage, on a store that overlaps calls
// (store.OverlapsCalls), it starts reading the page of pending rows after
// cursor beside it, which pg returns (nil: not started): the page does
// not depend on the backlog, which only says whether there is anything to
// deliver. A row queued between the two reads stays in the backlog the
// acknowledgments leave, for the next fire. It waits for the page before
// it fails.
func (f *fire) readBacklog(ctx context.Context, cursor store.Cursor, withPage bool, maxRows int) (oc store.Value, rows uint64, pg *pageRead, err error) {
	if withPage && store.OverlapsCalls(f.s) {
		pg = f.readPage(ctx, cursor, maxRows)
	}
	oc, _, err = f.s.Get(ctx, f.p, backlogKey)
	if err != nil {
		pg.wait()
		return nil, 0, nil, fmt.Errorf("outcome: read the backlog of %s: %w", store.PartitionName(f.p), err)
	}
	backlog, err := outbox.DecodeBacklog(oc)
	if err != nil {
		pg.wait()
		return nil, 0, nil, fmt.Errorf("outcome: %s: %w", store.PartitionName(f.p), err)
	}
	kind := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: f.p.Kind()}
	f.metrics.Gauge(telemetry.MetricOutboxBacklogRows, []telemetry.Label{kind}, float64(backlog.Rows))
	f.metrics.Gauge(telemetry.MetricOutboxBacklogBytes, []telemetry.Label{kind}, float64(backlog.Bytes))
	return oc, backlog.Rows, pg, nil
}

// acknowledge plans the acknowledgments of the rows delivered, against the
// backlog read now, after the slow sink calls (oc, the backlog read
// before them, when none was delivered): an outcome queued meanwhile
// fails this guard, and the next fire plans again. It returns their batch,
// how many rows it acknowledges, and done when no row remains queued
// after them. A row whose acknowledgment cannot be planned is logged and
// retained.
func (f *fire) acknowledge(ctx context.Context, caps store.Capabilities, oc store.Value, rows []acked) (b *store.Batch, n int, done bool, err error) {
	fresh := oc
	if len(rows) > 0 {
		if fresh, _, err = f.s.Get(ctx, f.p, backlogKey); err != nil {
			return nil, 0, false, fmt.Errorf("outcome: read the backlog of %s: %w", store.PartitionName(f.p), err)
		}
	}
	plan, err := outbox.NewAcks(caps, fresh)
	if err != nil {
		return nil, 0, false, fmt.Errorf("outcome: %s: %w", store.PartitionName(f.p), err)
	}
	for _, a := range rows {
		// The candidates checked the id, the key and the terminal value.
		if err := plan.Ack(outbox.Ack{ID: a.id, Seq: a.seq, Key: a.key, Value: a.value, Keep: a.src.keep}); err != nil {
			f.log.Warn("outcome: acknowledgment not planned; retaining the row", "outcome", a.id.String(), "source", a.src.name.String(), "seq", a.seq, "error", err)
			continue
		}
		n++
	}
	b = store.NewBatch()
	if err := plan.Finish(b); err != nil {
		return nil, 0, false, fmt.Errorf("outcome: %s: %w", store.PartitionName(f.p), err)
	}
	return b, n, plan.Remaining().Rows == 0, nil
}

// reschedule moves the timer, carrying the acknowledgments' batch b, to
// the next fire: at once when the fire acknowledged acks rows, after a
// backoff when it acknowledged none, with the scan cursor where the next
// fire resumes.
func (f *fire) reschedule(ctx context.Context, state timerState, page store.ScanPage, after store.Cursor, res delivered, acks int, b *store.Batch) (timers.Fired, error) {
	// The next fire resumes just after the failed row. Resuming after the
	// page instead would, when the page reached the end of the range, wrap
	// to the head and try the failing row first again, forever, starving
	// every row behind it. The page's cursor is opaque, so ask the store
	// for the one after the failed row.
	resume := page.Next
	var err error
	switch {
	case res.stoppedAt >= 0:
		resume, err = f.cursorAfter(ctx, after, res.stoppedAt+1)
	case res.cutAt > 0:
		resume, err = f.cursorAfter(ctx, after, res.cutAt)
	case res.cutAt == 0:
		// Cut before the page's first row: it starts there again. (The
		// reference resumed after the page, skipping it for a rotation.)
		resume = after
	}
	if err != nil {
		return nil, err
	}
	// Only a failed or hung sink call backs off: a page that delivered
	// nothing because every row was junk or synthetic is no sink fault.
	attempt, delay := state.attempt, uint64(0)
	if acks > 0 {
		attempt = 0
	} else {
		if res.stoppedAt >= 0 && attempt < math.MaxUint32 {
			attempt++
		}
		delay = min(max(backoffMs(f.id, state.attempt), res.hintMs), uint64(MaxBackoff/time.Millisecond))
	}
	value, err := encodeTimer(timerState{attempt: attempt, cursor: resume})
	if err != nil {
		return nil, fmt.Errorf("outcome: %s: %w", store.PartitionName(f.p), err)
	}
	return timers.Reschedule{DueAt: f.c.Now.Add(time.Duration(delay) * time.Millisecond), Value: value, Batch: b}, nil
}

// pageRead is a page of pending rows being read beside the fire (see
// readPage).
type pageRead struct {
	done  chan struct{}
	page  store.ScanPage
	after store.Cursor
	err   error
}

// readPage reads the page of pending rows after cursor (see page): on a
// goroutine of its own on a store that overlaps calls, else now; wait
// returns it.
func (f *fire) readPage(ctx context.Context, cursor store.Cursor, limit int) *pageRead {
	r := &pageRead{done: make(chan struct{})}
	if !store.OverlapsCalls(f.s) {
		r.page, r.after, r.err = f.page(ctx, cursor, limit)
		close(r.done)
		return r
	}
	go func() {
		defer close(r.done)
		r.page, r.after, r.err = f.page(ctx, cursor, limit)
	}()
	return r
}

// wait returns the page once it is read. A nil r (no page started)
// returns nothing.
func (r *pageRead) wait() (store.ScanPage, store.Cursor, error) {
	if r == nil {
		return store.ScanPage{}, nil, nil
	}
	<-r.done
	return r.page, r.after, r.err
}

// page scans the pending rows after cursor, at most limit, wrapping to the
// head once when the cursor is past the end. A cursor the store rejects
// as not its own (the store changed under a stored timer) is logged and
// dropped: the scan starts at the head, which skips nothing. It returns
// the page and the cursor it was read after.
func (f *fire) page(ctx context.Context, cursor store.Cursor, limit int) (store.ScanPage, store.Cursor, error) {
	after := cursor
	page, err := f.s.Scan(ctx, f.p, pendingStart, pendingEnd, after, limit)
	if err != nil && after != nil && errors.Is(err, store.ErrInvalid) {
		f.log.Warn("outcome: the store rejects the timer's scan cursor; scanning from the head", "error", err)
		after = nil
		page, err = f.s.Scan(ctx, f.p, pendingStart, pendingEnd, after, limit)
	}
	if err == nil && len(page.Entries) == 0 && after != nil && page.Next == nil {
		after = nil
		page, err = f.s.Scan(ctx, f.p, pendingStart, pendingEnd, after, limit)
	}
	if err != nil {
		return store.ScanPage{}, nil, fmt.Errorf("outcome: scan the pending outcomes of %s: %w", store.PartitionName(f.p), err)
	}
	return page, after, nil
}

// cursorAfter returns the cursor after the first n pending rows after
// after (nil: the range ends there). A page may end short of its limit
// (the store's byte budget): it reads on until it passed n rows.
func (f *fire) cursorAfter(ctx context.Context, after store.Cursor, n int) (store.Cursor, error) {
	for n > 0 {
		page, err := f.s.Scan(ctx, f.p, pendingStart, pendingEnd, after, n)
		if err != nil {
			return nil, fmt.Errorf("outcome: scan the pending outcomes of %s: %w", store.PartitionName(f.p), err)
		}
		if page.Next == nil {
			return nil, nil
		}
		n, after = n-len(page.Entries), page.Next
	}
	return after, nil
}

// candidates resolves a page of pending rows to outcomes, reading their
// records in one snapshot. A row that cannot become an outcome (an invalid
// index key or value, a source the Delivery does not have, a missing
// record, or one its source cannot make an outcome of) is logged and left
// out: it stays queued, never acknowledged, for a repair. So is a row
// whose index value or record is of a newer version than this binary
// reads (store.ErrNewerVersion), counted apart: a binary that reads it
// delivers it.
func (f *fire) candidates(ctx context.Context, rows []store.KeyValue) ([]candidate, error) {
	cands := make([]candidate, 0, len(rows))
	keys := make([]store.Key, 0, len(rows))
	for i, kv := range rows {
		pk, err := gen.ParseOutcomePendingKey(kv.Key)
		if err != nil {
			f.log.Warn("outcome: invalid outcome index row; retaining", "key", fmt.Sprintf("%x", []byte(kv.Key)), "error", err)
			continue
		}
		src, key, queued := f.d.legacy, store.Key(nil), time.Time{}
		if len(kv.Value) == 0 {
			// A row written before pending rows named their source.
			if src == nil {
				f.log.Warn("outcome: pending outcome names no source (queued before sources) and no source resolves such rows; retaining",
					"outcome", pk.ID.String(), "seq", pk.Seq)
				continue
			}
			if key, err = src.legacyKey(pk.ID.String()); err != nil {
				f.log.Warn("outcome: invalid outcome index row; retaining", "outcome", pk.ID.String(), "source", src.name.String(), "seq", pk.Seq, "error", err)
				continue
			}
		} else {
			pv, err := outbox.DecodePending(kv.Value)
			if errors.Is(err, store.ErrNewerVersion) {
				f.newer()
				f.log.Warn("outcome: pending outcome of a newer version than this binary reads; retaining", "outcome", pk.ID.String(), "seq", pk.Seq, "error", err)
				continue
			}
			if err != nil {
				f.log.Warn("outcome: invalid outcome index row; retaining", "outcome", pk.ID.String(), "seq", pk.Seq, "error", err)
				continue
			}
			if src = f.d.sources[pv.Source]; src == nil {
				f.log.Warn("outcome: pending outcome of a source the delivery does not have; retaining",
					"outcome", pk.ID.String(), "source", pv.Source.String(), "seq", pk.Seq)
				continue
			}
			key, queued = pv.Key, time.UnixMilli(int64(min(pv.AtMs, 1<<62))).UTC()
		}
		cands = append(cands, candidate{index: i, acked: acked{id: pk.ID, seq: pk.Seq, src: src, key: key}, queued: queued})
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	values, err := f.s.GetMany(ctx, f.p, keys)
	if err != nil {
		return nil, fmt.Errorf("outcome: read the pending outcomes' records of %s: %w", store.PartitionName(f.p), err)
	}
	if len(values) != len(keys) {
		return nil, fmt.Errorf("outcome: read the pending outcomes' records of %s: %d values for %d keys: %w",
			store.PartitionName(f.p), len(values), len(keys), store.ErrCorrupt)
	}
	out := cands[:0]
	for i, c := range cands {
		v := values[i]
		if v == nil {
			f.log.Warn("outcome: missing terminal outcome row; retaining its index row", "outcome", c.id.String(), "source", c.src.name.String(), "seq", c.seq)
			continue
		}
		e, synthetic, err := c.src.resolve(c.key, v, c.queued)
		if errors.Is(err, store.ErrNewerVersion) {
			f.newer()
			f.log.Warn("outcome: terminal outcome of a newer version than this binary reads; retaining", "outcome", c.id.String(), "source", c.src.name.String(), "seq", c.seq, "error", err)
			continue
		}
		if errors.Is(err, errUndecodable) {
			f.log.Warn("outcome: undecodable terminal outcome; retaining", "outcome", c.id.String(), "source", c.src.name.String(), "seq", c.seq, "error", err)
			continue
		}
		if err != nil {
			f.log.Warn("outcome: indexed outcome cannot be delivered; retaining", "outcome", c.id.String(), "source", c.src.name.String(), "seq", c.seq, "error", err)
			continue
		}
		c.value, c.e, c.synthetic = v, e, synthetic
		out = append(out, c)
	}
	return out, nil
}

// newer counts a pending outcome passed over because a newer binary wrote
// its row or its record (MetricOutcomeNewerRows).
func (f *fire) newer() {
	f.metrics.Add(telemetry.MetricOutcomeNewerRows, []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: f.p.Kind()}}, 1)
}

// delivered is what the sink loop did.
type delivered struct {
	acked []acked
	// stoppedAt is the page index of the row whose sink call failed or
	// timed out; cutAt of the first row not tried because the fire budget
	// was spent. -1: none.
	stoppedAt, cutAt int
	// hintMs is the longest retry-after hint of a failed call.
	hintMs uint64
}

// deliver sends the candidates to the sink in order, until the first
// failure or the fire budget. Synthetic outcomes are acknowledged without
// a sink call. It fails only when ctx ends.
func (f *fire) deliver(ctx context.Context, cands []candidate) (delivered, error) {
	res := delivered{stoppedAt: -1, cutAt: -1}
	started := f.clock.Now()
	for _, c := range cands {
		if c.synthetic {
			f.metrics.Add(telemetry.MetricSyntheticOutcomesAcked, nil, 1)
			res.acked = append(res.acked, c.acked)
			continue
		}
		if f.clock.Now().Sub(started) >= f.d.budget {
			res.cutAt = c.index
			return res, nil
		}
		err := f.send(ctx, &c)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return delivered{}, fmt.Errorf("outcome: fire of %s: %w", store.PartitionName(f.p), ctxErr)
		}
		if err == nil {
			res.acked = append(res.acked, c.acked)
			continue
		}
		if errors.Is(err, errSinkTimeout) {
			f.log.Warn("outcome: outcome delivery timed out", "outcome", c.e.ID, "timeout", f.d.timeout)
		} else {
			var de *DeliveryError
			if errors.As(err, &de) && de.RetryAfter > 0 {
				res.hintMs = max(res.hintMs, uint64(min(de.RetryAfter, MaxBackoff)/time.Millisecond))
			}
			f.log.Warn("outcome: outcome delivery failed", "outcome", c.e.ID, "error", err)
		}
		// A failing or hung sink is not asked again in this fire.
		res.stoppedAt = c.index
		return res, nil
	}
	return res, nil
}

// call delivers e under the sink timeout. A sink that outlives it is
// abandoned (its context is cancelled) and the call fails with
// errSinkTimeout; a sink that panics fails the call.
//
// The sink runs in a goroutine of its own and the timeout's sleep in the
// caller's: the sink's goroutine cancels the sleep's context once it has
// answered, so a call costs one goroutine, not two.
func (d *Delivery) call(ctx context.Context, e Envelope) error {
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	answer := make(chan error, 1)
	go func() {
		defer cancel() // after the answer is sent: it ends the sleep
		defer func() {
			if v := recover(); v != nil {
				answer <- fmt.Errorf("outcome: the sink panicked: %v", v)
			}
		}()
		answer <- d.sink.Deliver(callCtx, e)
	}()
	slept := d.sleep(callCtx, d.timeout)
	select {
	case err := <-answer:
		return err
	default:
	}
	if slept != nil {
		return slept // ctx ended; the caller sees it
	}
	return errSinkTimeout
}

// addSat adds without wrapping past math.MaxUint64.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
