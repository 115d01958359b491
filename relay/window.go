package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/telemetry"
)

// window is what one fire read from the queue: the raw rows, the valid
// prefix decoded, and that prefix grouped by target.
type window struct {
	raw     []store.KeyValue
	rows    []queued // the decoded prefix of raw, in sequence order
	groups  []group  // by first sequence
	corrupt bool     // a corrupt row ended the prefix
	// corruptKey (in hex) and corruptErr name the corrupt row and why.
	corruptKey string
	corruptErr error
	// newer: the row that ended the prefix is of a newer version than
	// this binary reads (store.ErrNewerVersion), not corrupt: held alike,
	// logged and counted apart.
	newer     bool
	exhausted bool // no queued row of this cycle lies past raw
	// tailEmpty: the window's reads showed nothing queued after its rows,
	// no key of the queue class at all, well-formed or not, up to the
	// class's end. Only then may the fire complete the relay timer.
	tailEmpty bool
	// head is the queue's first row when the window's first page showed
	// it (headKnown): the window started at the queue's head, or at a
	// cursor below which no row remains (nothing is blocked).
	head      store.Key
	headKnown bool
	// lagExceeded: a row older than the lag bound was seen.
	lagExceeded bool
}

// queued is one decoded row of the window.
type queued struct {
	seq   uint64
	key   store.Key
	value store.Value
	group int
}

// group is one target's rows of the window, in sequence order.
type group struct {
	// target addresses the rows' target partition: a store.Identity of
	// id, the first row's Record.Target (which aliases the window's
	// bytes). It is boxed once, so that passing it to the target store
	// and the hook allocates nothing.
	target store.Partition
	id     []byte
	rows   []Row
	costs  []rowCost // one per row
	// wasBlocked: the target was blocked earlier in this cycle (it is in
	// the scan state's Blocked); the fire does not attempt it.
	wasBlocked bool
	// failed: delivery failed in this fire; the target is to be blocked.
	failed bool
	// inBlocked: the target is in the scan state being checkpointed.
	inBlocked bool
}

// rowCost is what one row adds to a target batch, computed once.
type rowCost struct {
	writes int // puts and deletes
	bytes  int // their key and value bytes
	// fits: every key and value is within the target's per-row limits.
	fits bool
	win  int // the row's index in window.rows
}

// readState reads the outbox sequence and the scan state in one snapshot.
// A scan state that does not decode is logged, and the scan restarts from
// the head; a finished cycle (cursor at or past its end) starts a new one
// at the current sequence.
func (f *fire) readState(ctx context.Context) error {
	vs, err := f.c.Store.GetMany(ctx, f.c.Partition, stateKeys)
	if err != nil {
		return fmt.Errorf("relay: read the outbox state of %s: %w", f.src, err)
	}
	if len(vs) != 2 {
		return fmt.Errorf("relay: read the outbox state of %s: %d values for 2 keys: %w", f.src, len(vs), store.ErrCorrupt)
	}
	f.sequenceValue, f.scanValue = vs[0], vs[1]
	if f.sequenceValue != nil {
		u, err := gen.DecodeU64Value(f.sequenceValue)
		if err != nil {
			return fmt.Errorf("relay: outbox sequence of %s: %w", f.src, err)
		}
		f.sequence = u.Value
	}
	if f.scanValue != nil {
		s, err := gen.DecodeRelayScanV1(f.scanValue)
		if err != nil {
			f.log.Warn("relay: corrupt relay scan state; restarting from source head", "source", f.src, "error", err)
		} else if s.Cursor < s.CycleEnd {
			f.scan = s
			return nil
		}
	}
	f.scan = gen.RelayScanV1{CycleEnd: f.sequence}
	return nil
}

// readStart reads the outbox state (readState) and then the window
// (readWindow). A fire that may make concurrent calls (Concurrency above
// 1) reads the queue's first page from its head beside the state, which
// saves a round trip whenever that page is the window's first (see
// headPage).
func (f *fire) readStart(ctx context.Context) error {
	if f.budget.Concurrency < 2 {
		if err := f.readState(ctx); err != nil {
			return err
		}
		return f.readWindow(ctx, nil)
	}
	var stateErr, err error
	var first store.ScanPage
	func() {
		// Wait even when the scan panics: the state is read into the
		// fire's scratch, which the fire releases as it ends.
		defer f.beside(ctx, func(ctx context.Context) { stateErr = f.readState(ctx) })()
		// One row more than the window's first page: see headPage.
		first, err = f.scanQueue(ctx, queueStart, queueEnd, nil, f.pageRows(f.budget.MaxRows*4)+1, &f.readBuf)
	}()
	if stateErr != nil {
		return stateErr
	}
	if err != nil {
		return fmt.Errorf("relay: scan the queue of %s: %w", f.src, err)
	}
	return f.readWindow(ctx, &first)
}

// beside runs fn concurrently with the caller, through the fire's lane
// runner, and returns the function that waits for it; a panic in fn is
// raised again by that function.
func (f *fire) beside(ctx context.Context, fn func(ctx context.Context)) (wait func()) {
	r := f.runner(f.budget.Concurrency)
	var panicked any
	r.Go(ctx, 0, func(ctx context.Context) {
		defer func() {
			if v := recover(); v != nil {
				panicked = fmt.Sprintf("%v\n[relay]\n%s", v, debug.Stack())
			}
		}()
		fn(ctx)
	})
	return func() {
		r.Wait()
		if panicked != nil {
			panic(panicked)
		}
	}
}

// readWindow reads the rows after the cursor, up to the cycle's end, in
// pages: at most 4*MaxRows rows and MaxBytes encoded bytes (a first row
// over MaxBytes is read alone). It starts at the cursor's own key, which
// may remain for a blocked target, so that malformed keys between it and
// the next sequence cannot be skipped; at cursor 0, at the head of the
// queue class, which catches malformed keys before sequence 1. When the
// outbox state says nothing was queued after the cycle began, it reads
// on past the cycle's end to the end of the queue class, for what may lie
// there though no producer queued it in this cycle: a malformed key
// (which stops the window as a corrupt row), a row queued during the fire
// or one past the outbox sequence (which ends the window: it is the next
// cycle's). So the fire knows whether anything at all is queued behind
// its rows (tailEmpty); on the window's last page it asks for one row
// more than its budget leaves, to see what follows its rows without
// another read. first, when not nil, is a page read from the queue's head
// beside the outbox state, which stands for the window's first page where
// it can (see headPage).
func (f *fire) readWindow(ctx context.Context, first *store.ScanPage) error {
	limit := f.budget.MaxRows * 4
	if first != nil && (len(first.Entries) > 0 || first.Next == nil) {
		f.headKnown = true
		if len(first.Entries) > 0 {
			f.head = first.Entries[0].Key
		}
	}
	var anchor store.Key
	start := queueStart
	if f.scan.Cursor != 0 {
		anchor = outbox.RelayKey(f.scan.Cursor)
		start = anchor
	}
	// The cycle's rows lie before cycleEnd (nil: every relay key is the
	// cycle's).
	var cycleEnd store.Key
	if f.scan.CycleEnd < math.MaxUint64 {
		cycleEnd = outbox.RelayKey(f.scan.CycleEnd + 1)
	}
	end, toEnd := queueEnd, true
	if f.sequence > f.scan.CycleEnd && cycleEnd != nil {
		// Rows were queued after the cycle began: the fire reschedules
		// for them whatever lies past the cycle, so it reads no further.
		end, toEnd = cycleEnd, false
	}
	w := windowReader{f: f, anchor: anchor, cycleEnd: cycleEnd, remaining: limit}
	if first != nil {
		if rows, exhausted, tailEmpty, next, ok := f.headPage(first, anchor, cycleEnd, f.pageRows(limit)); ok {
			if !w.take(rows) || !f.decodeRead() {
				return nil
			}
			if exhausted || w.remaining <= 0 {
				f.exhausted, f.tailEmpty = exhausted, exhausted && tailEmpty
				return nil
			}
			start, anchor, w.anchor = next, nil, nil
		}
	}
	var after store.Cursor
	for {
		n := f.pageRows(w.remaining)
		if n == w.remaining && toEnd && f.mayEnd(n) {
			n++ // what follows the window's rows, if anything
		}
		page, err := f.scanQueue(ctx, start, end, after, n, &f.readBuf)
		if err != nil {
			return fmt.Errorf("relay: scan the queue of %s: %w", f.src, err)
		}
		if first == nil && after == nil && len(page.Entries) > 0 && (anchor == nil || len(f.scan.Blocked) == 0) {
			// Only a blocked target's rows remain at or below the cursor.
			f.head, f.headKnown = page.Entries[0].Key, true
		}
		if !w.take(page.Entries) || !f.decodeRead() {
			return nil // a budget, a corrupt row or the cycle's end ends the window
		}
		if page.Next == nil {
			f.exhausted, f.tailEmpty = true, toEnd
			return nil
		}
		if w.remaining <= 0 {
			return nil
		}
		after = page.Next
	}
}

// pageRows is how many rows a scan page of the window asks for with
// remaining rows of its budget left (see ScanPageRows): all of them when
// f.windowPages, so that a window of small rows is one read, one round
// trip, not one per ScanPageRows rows in sequence; at most ScanPageRows
// otherwise.
func (f *fire) pageRows(remaining int) int {
	if f.windowPages {
		return remaining
	}
	return min(ScanPageRows, remaining)
}

// mayEnd reports whether the window, with rows rows of its budget left,
// may reach the cycle's last row: its rows have distinct sequences, so at
// most CycleEnd-last of the cycle's follow the last one read.
func (f *fire) mayEnd(rows int) bool {
	last := f.scan.Cursor
	if len(f.rows) > 0 {
		last = f.rows[len(f.rows)-1].seq
	}
	return f.scan.CycleEnd-min(last, f.scan.CycleEnd) <= uint64(rows)
}

// headPage decides whether a page read from the queue's head, beside the
// outbox state, can stand for the first page of the window that runs from
// anchor (nil: the head), pageRows rows, the cycle's rows lying before
// cycleEnd (nil: all): the page was read to the end of the queue class
// with one row more, to see what follows them. It may be older than the
// state: rows of the cycle may have been queued after it. Rows are queued
// in sequence order (each batch guarded by the outbox sequence), so a page
// that shows a row shows every row queued before it. It stands for the
// window's first page (ok) when no row remains at or below the cursor
// and either more of the window's rows follow its first pageRows (which
// are then the window's first page; next is where to read on, afresh: a
// cursor is bound to its range), or the page ended short of its limit at
// the store's byte bound with every row it shows in the cycle (they are
// the window's first rows, and it reads on after them), or it shows the
// whole cycle, down to row CycleEnd or a row past it, or an empty cycle's
// nothing (the window is then exhausted, and tailEmpty says whether the
// page shows nothing after the cycle's rows). Otherwise, a malformed key
// past the cycle among them, the window is read as if there were no such
// page.
func (f *fire) headPage(first *store.ScanPage, anchor, cycleEnd store.Key, pageRows int) (rows []store.KeyValue, exhausted, tailEmpty bool, next store.Key, ok bool) {
	entries := first.Entries
	if anchor != nil && len(entries) > 0 && bytes.Compare(entries[0].Key, anchor) <= 0 {
		return nil, false, false, nil, false
	}
	n := 0
	for n < len(entries) && (cycleEnd == nil || bytes.Compare(entries[n].Key, cycleEnd) < 0) {
		n++
	}
	if n > pageRows {
		return entries[:pageRows:pageRows], false, false, append(bytes.Clone(entries[pageRows-1].Key), 0x00), true
	}
	// No row of the window follows the page's n where the page ended
	// (Next nil) or showed a key past them: true of the state beside it
	// only if the page shows the whole cycle.
	whole := false
	switch {
	case n < len(entries):
		_, err := gen.ParseRelayKey(entries[n].Key)
		whole = err == nil // a row past the cycle; a malformed key is read again as the window's
	case n > 0:
		k, err := gen.ParseRelayKey(entries[n-1].Key)
		whole = err == nil && k.Seq == f.scan.CycleEnd
	default:
		whole = f.scan.CycleEnd == 0
	}
	if !whole {
		if n > 0 && n == len(entries) && first.Next != nil {
			// The page ended short of its limit, at the store's byte
			// bound, with rows of the cycle still to come: its rows are
			// the window's first, as far as a read of the window would
			// have gone, and the window reads on after them.
			return entries[:n:n], false, false, append(bytes.Clone(entries[n-1].Key), 0x00), true
		}
		return nil, false, false, nil, false
	}
	return entries[:n:n], true, n == len(entries) && first.Next == nil, nil, true
}

// windowReader adds the rows of the pages read to the window, within its
// row and byte budgets and the cycle.
type windowReader struct {
	f         *fire
	anchor    store.Key // the cursor's row, not the window's (nil: none)
	cycleEnd  store.Key // the cycle's rows lie before it (nil: all)
	remaining int       // rows the budget leaves
	size      int       // the window's bytes
}

// take adds entries to the window and reports whether the window goes
// on: false once a row past its row or byte budget, or a well-formed row
// past the cycle (the cycle is then read to its end), ends it. A malformed
// key past the cycle is added, and ends the window as a corrupt row.
func (w *windowReader) take(entries []store.KeyValue) bool {
	f := w.f
	for _, kv := range entries {
		if w.anchor != nil && bytes.Equal(kv.Key, w.anchor) {
			w.remaining--
			continue
		}
		if w.cycleEnd != nil && bytes.Compare(kv.Key, w.cycleEnd) >= 0 {
			if _, err := gen.ParseRelayKey(kv.Key); err == nil {
				if f.decodeRead() {
					f.exhausted = true
				}
				return false
			}
		}
		n := len(kv.Key) + len(kv.Value)
		if w.remaining <= 0 || len(f.raw) > 0 && w.size+n > f.budget.MaxBytes {
			f.decodeRead()
			return false
		}
		w.remaining--
		w.size += n
		f.raw = append(f.raw, kv)
	}
	return true
}

// scanQueue reads one page of the source's queue. When the source store
// is a store.ScanAppender the rows' bytes are appended to *buf, which the
// fire's scratch keeps for the next fire: a relay reads every row it
// delivers, and copying each into fresh memory doubled the bytes a
// relayed row allocates, and with them the garbage collector's work. The
// page's Entries slice is reused by the next scanQueue; the rows' bytes
// stay valid until *buf is emptied (readBuf only when the fire ends,
// probeBuf before each one-row probe).
func (f *fire) scanQueue(ctx context.Context, start, end store.Key, after store.Cursor, limit int, buf *[]byte) (store.ScanPage, error) {
	sa, ok := f.c.Store.(store.ScanAppender)
	if !ok {
		return f.c.Store.Scan(ctx, f.c.Partition, start, end, after, limit)
	}
	page, out, err := sa.AppendScan(ctx, f.c.Partition, start, end, after, limit, f.page[:0], *buf)
	if err != nil {
		return store.ScanPage{}, err
	}
	*buf, f.page = out, page.Entries
	if buf == &f.readBuf {
		f.readsKept = true
	}
	return page, nil
}

// decodeRead decodes the rows read since its last call, in order,
// stopping at the first corrupt key or value (a zero sequence is
// corrupt), and reports whether the window may go on. readWindow calls it
// after each page, while the page's bytes are still in the cache: decoding
// the whole window after reading it touched every row cold a second time.
func (f *fire) decodeRead() bool {
	if f.corrupt {
		return false
	}
	// Decoded puts and deletes go into the scratch's arenas; a row that
	// does not fit the room left gets its own, and decodeWindow grows the
	// arena for the next fire.
	puts, deletes := f.puts, f.deletes
	defer func() { f.puts, f.deletes = puts, deletes }()
	for ; f.decoded < len(f.raw); f.decoded++ {
		kv := f.raw[f.decoded]
		row := Row{Source: f.c.Partition, Record: gen.RelayV1{Puts: puts[len(puts):len(puts):cap(puts)], Deletes: deletes[len(deletes):len(deletes):cap(deletes)]}}
		g, err := f.decodeRow(kv, &row)
		if err == nil && g < 0 {
			g = len(f.groups)
			var target store.Identity
			if target, err = f.targets.add(row.Record.Target, g); err == nil {
				f.groups = append(f.groups, group{target: store.Partition(target), id: row.Record.Target})
			}
		}
		if err != nil {
			f.corruptKey, f.corruptErr = fmt.Sprintf("%x", []byte(kv.Key)), err
			f.corrupt, f.newer = true, errors.Is(err, store.ErrNewerVersion)
			f.exhausted = false
			return false
		}
		f.needPuts += len(row.Record.Puts)
		f.needDeletes += len(row.Record.Deletes)
		if len(row.Record.Puts) <= cap(puts)-len(puts) {
			puts = puts[:len(puts)+len(row.Record.Puts)]
		}
		if len(row.Record.Deletes) <= cap(deletes)-len(deletes) {
			deletes = deletes[:len(deletes)+len(row.Record.Deletes)]
		}
		if !f.lagExceeded && f.nowMs > row.Record.AtMs && f.nowMs-row.Record.AtMs > f.lagBoundMs {
			f.log.Warn("relay: outbox relay lag bound exceeded", "source", f.src, "age_ms", f.nowMs-row.Record.AtMs)
			f.lagExceeded = true
		}
		f.rows = append(f.rows, queued{seq: row.Seq, key: kv.Key, value: kv.Value, group: g})
		f.flat = append(f.flat, row)
	}
	return true
}

// decodeWindow finishes decoding the window (decodeRead) and groups the
// valid prefix by target in order of first sequence.
func (f *fire) decodeWindow() {
	if len(f.raw) == 0 {
		return
	}
	f.decodeRead()
	if f.needPuts > cap(f.puts) {
		f.puts = make([]gen.RelayPut, 0, f.needPuts)
	}
	if f.needDeletes > cap(f.deletes) {
		f.deletes = make([][]byte, 0, f.needDeletes)
	}
	f.groupRows()
}

// groupRows lays the decoded rows out per group, contiguously, with their
// costs, and marks the groups blocked earlier in the cycle.
func (f *fire) groupRows() {
	n := len(f.flat)
	f.bounds = append(f.bounds[:0], make([]int, len(f.groups)+1)...)
	for _, q := range f.rows {
		f.bounds[q.group+1]++
	}
	for g := 1; g < len(f.bounds); g++ {
		f.bounds[g] += f.bounds[g-1]
	}
	// Every slot is written below, so none is zeroed first: zeroing rows
	// (which hold pointers) costs a write barrier per pointer while the
	// collector marks.
	f.grouped = slices.Grow(f.grouped[:0], n)[:n]
	f.costs = slices.Grow(f.costs[:0], n)[:n]
	for g := range f.groups {
		lo, hi := f.bounds[g], f.bounds[g+1]
		f.groups[g].rows, f.groups[g].costs = f.grouped[lo:lo:hi], f.costs[lo:lo:hi]
		_, f.groups[g].wasBlocked = slices.BinarySearchFunc(f.scan.Blocked, f.groups[g].id, bytes.Compare)
		f.groups[g].inBlocked = f.groups[g].wasBlocked
	}
	for i := range f.flat {
		g := &f.groups[f.rows[i].group]
		g.rows = append(g.rows, f.flat[i])
		g.costs = append(g.costs, f.costOf(&f.flat[i].Record, i))
	}
}

// decodeRow parses one queued row's key and decodes its value into row,
// reusing the capacity of row.Record's slices, and returns the group of
// its target when the target is one the window has seen (-1: a new one).
func (f *fire) decodeRow(kv store.KeyValue, row *Row) (int, error) {
	k, err := gen.ParseRelayKey(kv.Key)
	if err != nil {
		return -1, fmt.Errorf("bad relay queue key: %w", err)
	}
	if k.Seq == 0 {
		return -1, fmt.Errorf("relay sequence is zero: %w", store.ErrCorrupt)
	}
	row.Seq = k.Seq
	if err := f.decodeRecord(kv.Value, row); err != nil {
		return -1, err
	}
	return f.targets.find(row.Record.Target, f.groups), nil
}

// decodeRecord decodes a queued row's value into row.Record, reusing the
// capacity of its slices. A RelayV1, the row of every writer without a
// span, decodes in place; a RelayV2 likewise, through the outbox's family,
// and its trace context, which aliases the value, is kept in f.traces at
// the row's index in the window.
func (f *fire) decodeRecord(v store.Value, row *Row) error {
	i := len(f.flat)
	if i < len(f.traces) {
		// A row decoded at i before, left out of the window: not this one.
		f.traces[i] = gen.TraceContext{}
	}
	if len(v) > 0 && v[0] == gen.VersionRelayV1 {
		return gen.DecodeRelayV1Into(v, &row.Record)
	}
	r := gen.RelayV2{Puts: row.Record.Puts, Deletes: row.Record.Deletes}
	if err := outbox.DecodeRelayInto(v, &r); err != nil {
		return err
	}
	row.Record = gen.RelayV1{Target: r.Target, Puts: r.Puts, Deletes: r.Deletes, AtMs: r.AtMs}
	if tracing.Traced(&r.Trace) {
		if n := len(f.traces); n <= i {
			f.traces = slices.Grow(f.traces, i+1-n)[:i+1]
			clear(f.traces[n:])
		}
		f.traces[i] = r.Trace
	}
	return nil
}

// trace returns the trace context of the window's row i (zero: none).
func (f *fire) trace(i int) gen.TraceContext {
	if i < len(f.traces) {
		return f.traces[i]
	}
	return gen.TraceContext{}
}

// costOf sizes one row against the target's limits, as Batch.Validate
// would count its writes.
func (f *fire) costOf(rec *gen.RelayV1, win int) rowCost {
	caps := &f.targetCaps
	c := rowCost{writes: len(rec.Puts) + len(rec.Deletes), fits: true, win: win}
	for i := range rec.Puts {
		k, v := rec.Puts[i].Key, rec.Puts[i].Value
		c.bytes += len(k) + len(v)
		if len(k) == 0 || len(k) > caps.MaxKeyBytes || len(v) > caps.MaxValueBytes {
			c.fits = false
		}
	}
	for _, k := range rec.Deletes {
		c.bytes += len(k)
		if len(k) == 0 || len(k) > caps.MaxKeyBytes {
			c.fits = false
		}
	}
	return c
}

// recordBacklog sets the backlog gauge, an upper bound counted from the
// queue's head (os - first + 1: rows delivered out of order leave holes,
// but a bounded window must never hide a long queued tail), and counts a
// lag-exceeded fire. The head is the window's first row when the window
// showed it, and is read otherwise.
func (f *fire) recordBacklog(ctx context.Context) error {
	head, known := f.head, f.headKnown
	if !known {
		f.probeBuf = f.probeBuf[:0]
		page, err := f.scanQueue(ctx, queueStart, queueEnd, nil, 1, &f.probeBuf)
		if err != nil {
			return fmt.Errorf("relay: scan the queue head of %s: %w", f.src, err)
		}
		if len(page.Entries) > 0 {
			head = page.Entries[0].Key
		}
	}
	var backlog uint64
	if head != nil {
		if k, err := gen.ParseRelayKey(head); err == nil {
			backlog = addSat(f.sequence-min(f.sequence, k.Seq), 1)
		}
	}
	labels := []telemetry.Label{{Name: telemetry.LabelPartitionKind, Value: f.src.Kind()}}
	f.metrics.Gauge(telemetry.MetricRelayBacklogRows, labels, float64(backlog))
	if f.lagExceeded {
		f.metrics.Add(telemetry.MetricRelayLagExceeded, labels, 1)
	}
	return nil
}
