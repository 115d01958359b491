package relay_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
)

// queuedBytes is what the source's queued rows weigh in a window's byte
// budget: their keys and values.
func (e *env) queuedBytes(t testing.TB) int {
	t.Helper()
	s, end := gen.ClassRange(gen.TagRelayKey)
	page, err := e.inner.Scan(e.ctx, source, s, end, nil, 10_000)
	require.NoError(t, err)
	n := 0
	for _, kv := range page.Entries {
		n += len(kv.Key) + len(kv.Value)
	}
	return n
}

// A relay completes its timer only when it saw nothing queued behind its
// cursor, well-formed or not: a malformed key right after the last queued
// row, where a window cut by its byte or row budget ends, or past every
// relay key, and a row past the outbox sequence, each keep the relay
// timer, fire after fire; a malformed key holds the source back and is
// logged, never skipped. Removed, the queue drains and the timer goes.
func TestNothingQueuedBehindTheCursorWhenTheTimerCompletes(t *testing.T) {
	queueStart, _ := gen.ClassRange(gen.TagRelayKey)
	for _, tc := range []struct {
		name   string
		rows   int
		budget func(e *env) relay.Budget // once the rows are queued
		key    store.Key                 // queued behind the rows
		value  func(t testing.TB) store.Value
		held   bool // a malformed key: the source is held back
	}{
		{
			name: "malformed key after the last row, window cut by bytes", rows: 4,
			budget: func(e *env) relay.Budget { return relay.Budget{MaxBytes: e.queuedBytes(t)} },
			key:    append(relayKey(4), 0x00), held: true,
		},
		{
			name: "malformed key after the last row, window cut by rows", rows: 4,
			budget: func(*env) relay.Budget { return relay.Budget{MaxRows: 1} },
			key:    append(relayKey(4), 0x00), held: true,
		},
		{
			name: "malformed key after the last row, second window cut by rows", rows: 8,
			budget: func(*env) relay.Budget { return relay.Budget{MaxRows: 1} },
			key:    append(relayKey(8), 0x00), held: true,
		},
		{
			name: "malformed key after every relay key", rows: 4,
			budget: func(*env) relay.Budget { return relay.Budget{} },
			key:    append(bytes.Clone(queueStart), 0xfe, 'x'), held: true,
		},
		{
			name: "row past the outbox sequence", rows: 4,
			budget: func(*env) relay.Budget { return relay.Budget{} },
			key:    relayKey(100),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				var rows []row
				for i := range tc.rows {
					rows = append(rows, put(ta, "k", string(rune('a'+i))))
				}
				e.queue(t, rows...)
				e.configure(t, func(c *relay.HandlerConfig) { c.Budget = tc.budget(e) })
				e.putSource(t, tc.key, encodeRow(t, tb, "x", "behind"))
				for i := range 4 {
					e.step(t)
					_, ok := e.timerDue(t)
					require.True(t, ok, "fire %d completed the relay timer with a key queued behind its cursor", i+1)
				}
				e.requireAppliedOnce(t, ta, seqRange(1, uint64(tc.rows))...)
				want := uint64(0)
				if !tc.held {
					want = 100
				}
				assert.Equal(t, []uint64{want}, e.queued(t), "the key behind is kept, never skipped")
				if tc.held {
					assert.Contains(t, e.logs.String(), "corrupt relay row; tick stopped")
					assert.GreaterOrEqual(t, e.timerHold(t), 2*relay.CorruptHoldMin, "held back, the hold growing fire after fire")
				} else {
					assert.NotContains(t, e.logs.String(), "corrupt relay row")
				}

				e.deleteSource(t, tc.key)
				e.drain(t, 5)
				assert.Empty(t, e.queued(t))
				assert.Equal(t, 0, strings.Count(e.get(t, tb, "x"), "behind"), "never delivered")
			})
		})
	}
}
