package storetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// model is the reference store.Store the suite is proved against: one
// mutex over a map per partition, scans sorting the map's keys. Slow and
// obviously correct; test-only. Without a due index (newModel) it rejects
// batches carrying a Wakeup; dueModel adds one.
type model struct {
	clk  clock.Clock
	caps store.Capabilities
	due  bool

	mu    sync.Mutex
	parts map[string]map[string]string // partition encoding -> key -> value
	wake  map[string]uint64            // partition encoding -> wake time
	ceil  map[string]uint64            // partition encoding -> wake ceiling
}

// fdbLikeCaps mirror FoundationDB's limits; smallCaps make every limit
// reachable in a few bytes and reserve operations.
var (
	fdbLikeCaps = store.Capabilities{MaxBatchOps: 100, MaxKeyBytes: 9_900, MaxValueBytes: 100_000, MaxBatchBytes: 10_000_000,
		MaxScanBytes: 1 << 20, MaxTransactReadBytes: 4 << 20, MaxCommitBatches: 100, MaxCommitOps: 1000, MaxCommitBytes: 1_700_000}
	smallCaps = store.Capabilities{MaxBatchOps: 20, ReservedBatchOps: 5, MaxKeyBytes: 64, MaxValueBytes: 512, MaxBatchBytes: 4096,
		MaxScanBytes: 256, MaxTransactReadBytes: 1024, MaxCommitBatches: 4, MaxCommitOps: 30, MaxCommitBytes: 6000}
)

func newModel(clk clock.Clock, caps store.Capabilities) *model {
	return &model{clk: clk, caps: caps, parts: map[string]map[string]string{}, wake: map[string]uint64{}, ceil: map[string]uint64{}}
}

// dueModel is the model with a due index.
type dueModel struct{ *model }

func newDueModel(clk clock.Clock, caps store.Capabilities) dueModel {
	m := newModel(clk, caps)
	m.due = true
	return dueModel{m}
}

// modelErr wraps err with the partition's name.
func modelErr(p store.Partition, err error) error {
	return fmt.Errorf("model: partition %s: %w", store.PartitionName(p), err)
}

// partitionID is p's encoding: the partition's identity.
func partitionID(p store.Partition) (string, error) {
	if p == nil {
		return "", modelErr(p, store.ErrInvalid)
	}
	enc, err := p.AppendTuple(nil)
	if err != nil && !errors.Is(err, store.ErrInvalid) {
		err = fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	if err == nil && len(enc) == 0 {
		err = fmt.Errorf("%w: empty encoding", store.ErrInvalid)
	}
	if err != nil {
		return "", modelErr(p, err)
	}
	return string(enc), nil
}

// begin checks p and the context: the steps every call starts with.
func (m *model) begin(ctx context.Context, p store.Partition) (string, error) {
	id, err := partitionID(p)
	if err != nil {
		return "", err
	}
	if err := m.notNested(ctx); err != nil {
		return "", modelErr(p, err)
	}
	if err := ctx.Err(); err != nil {
		return "", modelErr(p, fmt.Errorf("%w: %w", store.ErrUnavailable, err))
	}
	return id, nil
}

func (m *model) checkKey(p store.Partition, key store.Key) error {
	if len(key) == 0 || len(key) > m.caps.MaxKeyBytes {
		return modelErr(p, fmt.Errorf("%w: key of %d bytes, limit %d", store.ErrInvalid, len(key), m.caps.MaxKeyBytes))
	}
	return nil
}

// read returns a fresh copy of a row's value, nil when absent.
func read(rows map[string]string, key []byte) store.Value {
	v, ok := rows[string(key)]
	if !ok {
		return nil
	}
	out := make(store.Value, len(v))
	copy(out, v)
	return out
}

func (m *model) Get(ctx context.Context, p store.Partition, key store.Key) (store.Value, bool, error) {
	vs, err := m.GetMany(ctx, p, []store.Key{key})
	if err != nil {
		return nil, false, err
	}
	return vs[0], vs[0] != nil, nil
}

func (m *model) GetMany(ctx context.Context, p store.Partition, keys []store.Key) ([]store.Value, error) {
	if _, err := partitionID(p); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := m.checkKey(p, k); err != nil {
			return nil, err
		}
	}
	id, err := m.begin(ctx, p)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Value, len(keys))
	for i, k := range keys {
		out[i] = read(m.parts[id], k)
	}
	return out, nil
}

// rowBytes is what a row counts against a byte budget.
func rowBytes(kv store.KeyValue) int { return len(kv.Key) + len(kv.Value) }

func (m *model) Scan(ctx context.Context, p store.Partition, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	id, err := partitionID(p)
	if err != nil {
		return store.ScanPage{}, err
	}
	if limit < 1 {
		return store.ScanPage{}, modelErr(p, fmt.Errorf("%w: scan limit %d", store.ErrInvalid, limit))
	}
	var last []byte
	if len(after) > 0 {
		c, err := decodeModelCursor(after)
		if err == nil && (c.part != id || !bytes.Equal(c.start, start) || !bytes.Equal(c.end, end)) {
			err = errors.New("cursor of another partition or range")
		}
		if err != nil {
			return store.ScanPage{}, modelErr(p, fmt.Errorf("%w: %w", store.ErrInvalid, err))
		}
		last = c.last
	}
	if _, err := m.begin(ctx, p); err != nil {
		return store.ScanPage{}, err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	return m.scanLocked(id, start, end, last, limit, m.caps.MaxScanBytes), nil
}

// scanLocked reads a page of partition id after last (nil: from start):
// the first row, then rows while the page holds at most limit rows and
// maxBytes bytes (0: no byte bound). m.mu is held.
func (m *model) scanLocked(id string, start, end, last []byte, limit, maxBytes int) store.ScanPage {
	rows := m.parts[id]
	var ks []string
	for k := range rows {
		kb := []byte(k)
		if bytes.Compare(kb, start) >= 0 && bytes.Compare(kb, end) < 0 && (last == nil || bytes.Compare(kb, last) > 0) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	var page store.ScanPage
	size := 0
	for i, k := range ks {
		kv := store.KeyValue{Key: store.Key(k), Value: read(rows, []byte(k))}
		size += rowBytes(kv)
		if i > 0 && (i >= limit || maxBytes > 0 && size > maxBytes) {
			page.Next = encodeModelCursor(modelCursor{part: id, start: start, end: end, last: []byte(ks[i-1])})
			break
		}
		page.Entries = append(page.Entries, kv)
	}
	return page
}

func (m *model) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if _, err := partitionID(p); err != nil {
		return store.BatchOutcome{}, err
	}
	if err := m.check(p, b); err != nil {
		return store.BatchOutcome{}, err
	}
	id, err := m.begin(ctx, p)
	if err != nil {
		return store.BatchOutcome{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applyLocked(id, b), nil
}

// check validates b as Apply does.
func (m *model) check(p store.Partition, b *store.Batch) error {
	if err := b.Validate(m.caps.Full()); err != nil {
		return modelErr(p, err)
	}
	if b.NeedsDueIndex() && !m.due {
		return modelErr(p, fmt.Errorf("%w: a wakeup, but the store keeps no due index", store.ErrInvalid))
	}
	return nil
}

// applyLocked applies a valid batch to partition id; m.mu is held.
func (m *model) applyLocked(id string, b *store.Batch) store.BatchOutcome {
	if out := m.decideLocked(id, b); !out.Committed() {
		return out
	}
	m.writeLocked(id, b)
	return store.BatchOutcome{Outcome: store.Committed}
}

// decideLocked checks b's deadline and preconditions against partition
// id: Committed when the batch may land. m.mu is held.
func (m *model) decideLocked(id string, b *store.Batch) store.BatchOutcome {
	if now := m.clk.Now(); !b.Deadline.IsZero() && now.After(b.Deadline) {
		return store.BatchOutcome{Outcome: store.DeadlinePassed, Now: now}
	}
	rows := m.parts[id]
	cur := m.wake[id]
	for i, c := range b.Preconditions {
		holds := c.Holds(read(rows, c.Key))
		if c.Op == store.MustWakeAt {
			holds = cur == encodeTime(c.Wake)
		}
		if !holds {
			return store.BatchOutcome{Outcome: store.PreconditionFailed, Failed: c, FailedIndex: i}
		}
	}
	return store.BatchOutcome{Outcome: store.Committed}
}

// writeLocked applies b's writes and wakeup to partition id; m.mu is held.
func (m *model) writeLocked(id string, b *store.Batch) {
	rows := m.parts[id]
	cur := m.wake[id]
	if rows == nil {
		rows = map[string]string{}
		m.parts[id] = rows
	}
	for _, w := range b.Writes {
		if w.Op == store.OpPut {
			rows[string(w.Key)] = string(w.Value)
		} else {
			delete(rows, string(w.Key))
		}
	}
	if w := b.Wakeup; w != nil {
		at, ceil := w.NextEncoded(cur, m.ceil[id])
		delete(m.wake, id)
		delete(m.ceil, id)
		if at != 0 {
			m.wake[id] = at
		}
		if ceil != 0 {
			m.ceil[id] = ceil
		}
	}
}

// modelTxnKey marks the context the model's TransactOnce hands its
// function, holding the model.
type modelTxnKey struct{}

// notNested refuses a call made with the context of the model's own
// TransactOnce, whose lock the call would wait for.
func (m *model) notNested(ctx context.Context) error {
	if held, _ := ctx.Value(modelTxnKey{}).(*model); held == m {
		return fmt.Errorf("%w: called from inside the store's own TransactOnce", store.ErrInvalid)
	}
	return nil
}

// TransactOnce runs fn under the model's lock, so that nothing changes
// between its reads and its batch: every read is of one snapshot, and the
// batch is applied on it.
func (m *model) TransactOnce(ctx context.Context, p store.Partition, fn store.TransactFunc) (store.BatchOutcome, error) {
	return m.transact(ctx, p, fn, true, true)
}

// transact is TransactOnce; mutants turn off marking the function's
// context (nested calls then wait for the lock) or ending its Reader.
func (m *model) transact(ctx context.Context, p store.Partition, fn store.TransactFunc, mark, endReader bool) (store.BatchOutcome, error) {
	if fn == nil {
		return store.BatchOutcome{}, modelErr(p, fmt.Errorf("%w: nil function", store.ErrInvalid))
	}
	id, err := m.begin(ctx, p)
	if err != nil {
		return store.BatchOutcome{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &modelReader{m: m, p: p, id: id, live: true}
	fnCtx := ctx
	if mark {
		fnCtx = context.WithValue(ctx, modelTxnKey{}, m)
	}
	b, err := fn(fnCtx, r)
	if endReader {
		r.end()
	}
	if err != nil {
		return store.BatchOutcome{}, err
	}
	if b == nil || b.Ops() == 0 && b.Wakeup == nil {
		return store.BatchOutcome{}, nil
	}
	if err := m.check(p, b); err != nil {
		return store.BatchOutcome{}, err
	}
	return m.applyLocked(id, b), nil
}

// modelReader is the Reader of the model's TransactOnce: reads of the
// state under the lock its TransactOnce holds, counted against
// MaxTransactReadBytes.
type modelReader struct {
	m     *model
	p     store.Partition
	id    string
	mu    sync.Mutex
	live  bool
	spent int
}

func (r *modelReader) end() {
	r.mu.Lock()
	r.live = false
	r.mu.Unlock()
}

// begin checks that a read may run; r.mu is held.
func (r *modelReader) begin(ctx context.Context) error {
	switch max := r.m.caps.MaxTransactReadBytes; {
	case !r.live:
		return modelErr(r.p, fmt.Errorf("%w: reader used after its function returned", store.ErrInvalid))
	case max > 0 && r.spent >= max:
		return modelErr(r.p, fmt.Errorf("%w: the transaction's reads hold %d bytes, limit %d", store.ErrInvalid, r.spent, max))
	}
	if err := ctx.Err(); err != nil {
		return modelErr(r.p, fmt.Errorf("%w: %w", store.ErrUnavailable, err))
	}
	return nil
}

func (r *modelReader) Partition() store.Partition { return r.p }

func (r *modelReader) Get(ctx context.Context, key store.Key) (store.Value, bool, error) {
	vs, err := r.GetMany(ctx, []store.Key{key})
	if err != nil {
		return nil, false, err
	}
	return vs[0], vs[0] != nil, nil
}

func (r *modelReader) GetMany(ctx context.Context, keys []store.Key) ([]store.Value, error) {
	for _, k := range keys {
		if err := r.m.checkKey(r.p, k); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin(ctx); err != nil {
		return nil, err
	}
	out := make([]store.Value, len(keys))
	for i, k := range keys {
		out[i] = read(r.m.parts[r.id], k)
		r.spent += len(k) + len(out[i])
	}
	return out, nil
}

func (r *modelReader) Scan(ctx context.Context, start, end store.Key, after store.Cursor, limit int) (store.ScanPage, error) {
	if limit < 1 {
		return store.ScanPage{}, modelErr(r.p, fmt.Errorf("%w: scan limit %d", store.ErrInvalid, limit))
	}
	var last []byte
	if len(after) > 0 {
		c, err := decodeModelCursor(after)
		if err == nil && (c.part != r.id || !bytes.Equal(c.start, start) || !bytes.Equal(c.end, end)) {
			err = errors.New("cursor of another partition or range")
		}
		if err != nil {
			return store.ScanPage{}, modelErr(r.p, fmt.Errorf("%w: %w", store.ErrInvalid, err))
		}
		last = c.last
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin(ctx); err != nil {
		return store.ScanPage{}, err
	}
	budget := r.m.caps.MaxScanBytes
	if max := r.m.caps.MaxTransactReadBytes; max > 0 && (budget == 0 || max-r.spent < budget) {
		budget = max - r.spent
	}
	page := r.m.scanLocked(r.id, start, end, last, limit, budget)
	for _, kv := range page.Entries {
		r.spent += rowBytes(kv)
	}
	return page, nil
}

// NextWake makes the model's reader a store.WakeReader; without a due
// index it fails with ErrInvalid.
func (r *modelReader) NextWake(ctx context.Context) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.begin(ctx); err != nil {
		return time.Time{}, false, err
	}
	if !r.m.due {
		return time.Time{}, false, modelErr(r.p, fmt.Errorf("%w: the store keeps no due index", store.ErrInvalid))
	}
	at, ok := r.m.wake[r.id]
	return store.DecodeTime(at), ok, nil
}

// modelDueBuckets is the model's number of due index buckets.
const modelDueBuckets = 3

func (dueModel) DueBuckets() int { return modelDueBuckets }

// modelBucket is the model's bucket of a partition: the sum of its
// identity's bytes.
func modelBucket(id string) int {
	sum := 0
	for i := range len(id) {
		sum += int(id[i])
	}
	return sum % modelDueBuckets
}

func (d dueModel) ScanDue(ctx context.Context, q store.DueQuery) ([]store.DueEntry, error) {
	n, err := q.Check(modelDueBuckets)
	if err != nil {
		return nil, fmt.Errorf("model: due index: %w", err)
	}
	if err := d.notNested(ctx); err != nil {
		return nil, fmt.Errorf("model: due index: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("model: due index: %w: %w", store.ErrUnavailable, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return listDue(d.wake, q, n), nil
}

// listDue lists, from wake times by identity, what a query of n buckets
// selects.
func listDue(wake map[string]uint64, q store.DueQuery, n int) []store.DueEntry {
	var out []store.DueEntry
	for id, at := range wake {
		e := store.DueEntry{Bucket: modelBucket(id), At: store.DecodeTime(at), Partition: []byte(id)}
		if at >= encodeTime(q.From) && at <= encodeTime(q.Until) && q.Offset(e.Bucket, modelDueBuckets) < n &&
			(q.After == nil || compareDue(q, e, *q.After) > 0) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b store.DueEntry) int { return compareDue(q, a, b) })
	if q.PerBucket > 0 {
		per := map[int]int{}
		out = slices.DeleteFunc(out, func(e store.DueEntry) bool {
			per[e.Bucket]++
			return per[e.Bucket] > q.PerBucket
		})
	}
	return out[:min(q.Limit, len(out))]
}

// compareDue orders entries as a listing q lists them.
func compareDue(q store.DueQuery, a, b store.DueEntry) int {
	return cmp.Or(cmp.Compare(q.Offset(a.Bucket, modelDueBuckets), q.Offset(b.Bucket, modelDueBuckets)),
		cmp.Compare(encodeTime(a.At), encodeTime(b.At)), bytes.Compare(a.Partition, b.Partition))
}

func (d dueModel) NextWake(ctx context.Context, p store.Partition) (time.Time, bool, error) {
	id, err := d.begin(ctx, p)
	if err != nil {
		return time.Time{}, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.wake[id]
	return store.DecodeTime(at), ok, nil
}

func (m *model) Capabilities() store.Capabilities { return m.caps }

func (m *model) Stats(ctx context.Context, p store.Partition) (store.PartitionStats, error) {
	id, err := m.begin(ctx, p)
	if err != nil {
		return store.PartitionStats{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k, v := range m.parts[id] {
		n += int64(len(k) + len(v))
	}
	return store.PartitionStats{ApproximateBytes: n}, nil
}

func (m *model) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("model: probe: %w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// modelCursor is what the model's cursors hold.
type modelCursor struct {
	part       string
	start, end []byte
	last       []byte
}

// Model cursor layout: version 0x01, then partition encoding, start, end
// and last key, each as a uvarint length and bytes, then a big-endian
// CRC-32C of everything before it.
const modelCursorVersion = 0x01

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeModelCursor(c modelCursor) store.Cursor {
	b := []byte{modelCursorVersion}
	for _, field := range [][]byte{[]byte(c.part), c.start, c.end, c.last} {
		b = binary.AppendUvarint(b, uint64(len(field)))
		b = append(b, field...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeModelCursor(b []byte) (modelCursor, error) {
	if len(b) < 5 {
		return modelCursor{}, errors.New("cursor too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return modelCursor{}, errors.New("cursor checksum mismatch")
	}
	if body[0] != modelCursorVersion {
		return modelCursor{}, fmt.Errorf("cursor version %d", body[0])
	}
	body = body[1:]
	var fields [4][]byte
	for i := range fields {
		n, w := binary.Uvarint(body)
		if w <= 0 || n > uint64(len(body)-w) {
			return modelCursor{}, errors.New("cursor field truncated")
		}
		fields[i] = bytes.Clone(body[w : w+int(n)])
		body = body[w+int(n):]
	}
	if len(body) != 0 {
		return modelCursor{}, errors.New("cursor has trailing bytes")
	}
	return modelCursor{part: string(fields[0]), start: fields[1], end: fields[2], last: fields[3]}, nil
}

var (
	_ store.Store      = (*model)(nil)
	_ store.Transactor = (*model)(nil)
	_ store.DueIndex   = dueModel{}
	_ store.WakeReader = (*modelReader)(nil)
)

// encodeTime is t as stored data holds it (store.EncodeTime): the models
// keep times so, and only the times of validated batches and queries
// (none before the epoch) reach them.
func encodeTime(t time.Time) uint64 {
	u, _ := store.EncodeTime(t)
	return u
}
