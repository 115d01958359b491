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
	fdbLikeCaps = store.Capabilities{MaxBatchOps: 100, MaxKeyBytes: 9_900, MaxValueBytes: 100_000, MaxBatchBytes: 10_000_000}
	smallCaps   = store.Capabilities{MaxBatchOps: 20, ReservedBatchOps: 5, MaxKeyBytes: 64, MaxValueBytes: 512, MaxBatchBytes: 4096}
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
	for _, k := range ks[:min(limit, len(ks))] {
		page.Entries = append(page.Entries, store.KeyValue{Key: store.Key(k), Value: read(rows, []byte(k))})
	}
	if len(ks) > limit {
		page.Next = encodeModelCursor(modelCursor{part: id, start: start, end: end, last: []byte(ks[limit-1])})
	}
	return page, nil
}

func (m *model) Apply(ctx context.Context, p store.Partition, b *store.Batch) (store.BatchOutcome, error) {
	if _, err := partitionID(p); err != nil {
		return store.BatchOutcome{}, err
	}
	if err := b.Validate(m.caps.Full()); err != nil {
		return store.BatchOutcome{}, modelErr(p, err)
	}
	if b.Wakeup != nil && !m.due {
		return store.BatchOutcome{}, modelErr(p, fmt.Errorf("%w: a wakeup, but the store keeps no due index", store.ErrInvalid))
	}
	id, err := m.begin(ctx, p)
	if err != nil {
		return store.BatchOutcome{}, err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if now := m.clk.Now(); !b.Deadline.IsZero() && now.After(b.Deadline) {
		return store.BatchOutcome{Outcome: store.DeadlinePassed, Now: now}, nil
	}
	rows := m.parts[id]
	for i, c := range b.Preconditions {
		if !c.Holds(read(rows, c.Key)) {
			return store.BatchOutcome{Outcome: store.PreconditionFailed, Failed: c, FailedIndex: i}, nil
		}
	}
	cur, hasWake := m.wake[id]
	if w := b.Wakeup; w != nil && w.Exact && cur != w.ExpectMs {
		return store.BatchOutcome{Outcome: store.PreconditionFailed, FailedIndex: store.WakeupPrecondition}, nil
	}
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
	switch w := b.Wakeup; {
	case w == nil:
	case w.Exact && w.AtMs == 0:
		delete(m.wake, id)
		delete(m.ceil, id)
	case w.Exact:
		m.wake[id] = w.AtMs
		delete(m.ceil, id)
		if w.CeilingMs != 0 {
			m.ceil[id] = w.CeilingMs
		}
	default:
		at := w.AtMs
		if c, ok := m.ceil[id]; ok && c < at {
			at = c
		}
		if !hasWake || at < cur {
			m.wake[id] = at
			delete(m.ceil, id)
		}
	}
	return store.BatchOutcome{Outcome: store.Committed}, nil
}

func (d dueModel) ScanDue(ctx context.Context, untilMs uint64, after *store.DueEntry, limit int) ([]store.DueEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("model: due index: %w: limit %d", store.ErrInvalid, limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("model: due index: %w: %w", store.ErrUnavailable, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []store.DueEntry
	for id, at := range d.wake {
		e := store.DueEntry{AtMs: at, Partition: []byte(id)}
		if at <= untilMs && (after == nil || compareDue(e, *after) > 0) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, compareDue)
	return out[:min(limit, len(out))], nil
}

func compareDue(a, b store.DueEntry) int {
	if a.AtMs != b.AtMs {
		return cmp.Compare(a.AtMs, b.AtMs)
	}
	return bytes.Compare(a.Partition, b.Partition)
}

func (d dueModel) NextWake(ctx context.Context, p store.Partition) (uint64, bool, error) {
	id, err := d.begin(ctx, p)
	if err != nil {
		return 0, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.wake[id]
	return at, ok, nil
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
	_ store.Store    = (*model)(nil)
	_ store.DueIndex = dueModel{}
)
