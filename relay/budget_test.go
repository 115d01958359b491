package relay_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
)

// wide is a row of n puts to target, each of a distinct key.
func wide(target store.Partition, n int) row {
	r := row{target: target}
	for i := range n {
		r.puts = append(r.puts, gen.RelayPut{Key: fmt.Appendf(nil, "w%03d", i), Value: []byte("v")})
	}
	return r
}

// sized is a row of one put whose value has n bytes.
func sized(target store.Partition, n int) row {
	return row{target: target, puts: []gen.RelayPut{{Key: []byte("big"), Value: bytes.Repeat([]byte{'x'}, n)}}}
}

func repeat(n int, r row) []row {
	rows := make([]row, n)
	for i := range rows {
		rows[i] = r
	}
	return rows
}

// Reference: the row, call and byte budgets each cut a fire; the fire
// checkpoints what it delivered and reschedules itself one millisecond
// later; the next fire resumes at exactly the first row not delivered.
func TestBudgetsCutAFireAndTheNextResumesWhereItStopped(t *testing.T) {
	tests := []struct {
		name   string
		budget relay.Budget
		rows   []row
		// fires lists, per fire, the target batches' sequences.
		fires [][][]uint64
	}{
		{
			name:   "rows: a window is 4*MaxRows rows",
			budget: relay.Budget{MaxRows: 1},
			rows:   repeat(10, put(ta, "k", "v")),
			fires:  [][][]uint64{{{1, 2, 3, 4}}, {{5, 6, 7, 8}}, {{9, 10}}},
		},
		{
			name:   "calls per target: a read and an apply",
			budget: relay.Budget{MaxTargetCalls: 2},
			rows:   repeat(5, wide(ta, 40)), // two rows a batch
			fires:  [][][]uint64{{{1, 2}}, {{3, 4}}, {{5}}},
		},
		{
			name:   "calls per target: at least 2",
			budget: relay.Budget{MaxTargetCalls: 1},
			rows:   repeat(3, wide(ta, 40)),
			fires:  [][][]uint64{{{1, 2}}, {{3}}},
		},
		{
			name:   "calls per fire: MaxTargetCalls*MaxTargets",
			budget: relay.Budget{MaxTargetCalls: 2, MaxTargets: 1},
			rows:   []row{put(ta, "k", "1"), put(tb, "k", "2"), put(ta, "k", "3")},
			fires:  [][][]uint64{{{1, 3}}, {{2}}},
		},
		{
			name:   "bytes: rows up to MaxBytes",
			budget: relay.Budget{MaxBytes: 2_500},
			rows:   repeat(5, sized(ta, 1_000)),
			fires:  [][][]uint64{{{1, 2}}, {{3, 4}}, {{5}}},
		},
		{
			name:   "bytes: a first row over MaxBytes is read alone",
			budget: relay.Budget{MaxBytes: 10},
			rows:   repeat(2, sized(ta, 100)),
			fires:  [][][]uint64{{{1}}, {{2}}},
		},
		{
			name:   "bytes: the 4 MiB default",
			rows:   repeat(50, sized(ta, 95_000)),
			fires:  [][][]uint64{{seqRange(1, 44)}, {seqRange(45, 50)}},
			budget: relay.Budget{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				seqs := e.queue(t, tt.rows...)
				for i, want := range tt.fires {
					before := len(e.audit.applyCalls())
					if i > 0 {
						due, ok := e.timerDue(t)
						require.True(t, ok)
						assert.Equal(t, e.now().Add(time.Millisecond), due, "a fire that delivered runs again soon")
					}
					rep := e.step(t)
					require.Equal(t, 1, rep.Fired, "fire %d", i+1)
					var got [][]uint64
					for _, c := range e.audit.applyCalls()[before:] {
						got = append(got, c.seqs)
					}
					require.Equal(t, want, got, "fire %d", i+1)
				}
				_, ok := e.timerDue(t)
				assert.False(t, ok, "done after the last fire")
				assert.Empty(t, e.queued(t))
				for _, seq := range seqs {
					assert.Len(t, e.applications(t, tt.rows[seq-1].target)[seq], 1, "seq %d", seq)
				}
			}, withBudget(tt.budget))
		})
	}
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// Reference: the target budget pauses at the first row of the first
// target over it, without blocking it; rows of earlier targets past the
// pause point, already covered by their marks, are deleted at once; the
// next fire resumes at the pause point.
func TestTargetBudgetPausesAtTheNextTargetAndTheNextFireResumes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		td := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("td")}
		e.queue(t, put(ta, "k", "1"), put(tb, "k", "2"), put(tc, "k", "3"), put(ta, "k", "4"),
			put(tb, "k", "5"), put(tc, "k", "6"), put(td, "k", "7"))
		applies := countApplies(e.target)
		e.step(t)

		assert.Equal(t, []uint64{3, 6, 7}, e.queued(t), "ta's and tb's rows 4 and 5 deleted past the pause")
		st := e.scanState(t)
		assert.Equal(t, uint64(2), st.Cursor, "the cursor stops before the pause point")
		assert.Empty(t, st.Blocked, "a paused target is not blocked")
		assert.Equal(t, uint64(4), e.highWater(t, ta))
		assert.Equal(t, uint64(5), e.highWater(t, tb))
		assert.Equal(t, uint64(0), e.highWater(t, tc))
		assert.Equal(t, 2, applies())

		e.step(t)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, tc, 3, 6)
		e.requireAppliedOnce(t, td, 7)
		e.requireAppliedOnce(t, ta, 1, 4)
		_, ok := e.timerDue(t)
		assert.False(t, ok)
	}, withBudget(relay.Budget{MaxTargets: 2}))
}

// Budgets too large to multiply (4*MaxRows, MaxTargetCalls*MaxTargets)
// are clamped, not wrapped: they mean "no practical bound".
func TestHugeBudgetsDoNotOverflow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "1"), put(tb, "k", "2"))
		e.run(t)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, 1)
		e.requireAppliedOnce(t, tb, 2)
	}, withBudget(relay.Budget{MaxRows: math.MaxInt, MaxTargets: math.MaxInt, MaxTargetCalls: math.MaxInt}))
}
