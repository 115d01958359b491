package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

var (
	sequenceKey = store.Key(gen.AppendOutboxSequenceKey(nil))
	scanKey     = store.Key(gen.AppendRelayScanKey(nil))
)

// requires reports whether b (nil: a call without a batch yet) has a
// precondition on key.
func requires(b *store.Batch, key store.Key) bool {
	if b == nil {
		return false
	}
	for _, c := range b.Preconditions {
		if bytes.Equal(c.Key, key) {
			return true
		}
	}
	return false
}

// once wraps a BeforeApply hook so that it acts on the first batch match
// accepts only.
func once(match func(*store.Batch) bool, act func(ctx context.Context)) func(context.Context, store.Partition, *store.Batch) error {
	done := false
	return func(ctx context.Context, p store.Partition, b *store.Batch) error {
		if !done && same(p, source) && match(b) {
			done = true
			act(ctx)
		}
		return nil
	}
}

// Reference: Done is guarded by the outbox sequence (Absent when there is
// none), so a row queued during the fire, even the first ever, keeps the
// timer, and the next fire delivers it.
func TestRowQueuedDuringTheFireKeepsTheTimer(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t testing.TB, e *env)
	}{
		{"after earlier rows", func(t testing.TB, e *env) { e.queue(t, put(ta, "k", "1")) }},
		{"the first row ever", func(t testing.TB, e *env) {
			b := store.NewBatch()
			require.NoError(t, timers.Schedule(b, e.inner.Capabilities(), nil, timers.Timer{Kind: timers.KindRelay, DueAt: e.now()}))
			e.putBatch(t, b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				tt.prepare(t, e)
				isDone := func(b *store.Batch) bool { return requires(b, sequenceKey) }
				e.source.BeforeApply(once(isDone, func(ctx context.Context) {
					queueInto(t, ctx, e.inner, e.now(), []row{put(tb, "k", "late")})
				}))

				rep := e.run(t)
				assert.Equal(t, 1, rep.Raced, "Done lost to the queued row")
				_, ok := e.timerDue(t)
				require.True(t, ok, "the timer stays")

				e.drain(t, 3)
				assert.Equal(t, "late", e.get(t, tb, "k"))
				assert.Empty(t, e.queued(t))
			})
		})
	}
}

// Reference: a checkpoint that loses a race (another relay fire, or a
// writer of the scan state) lands nothing of its batch; the rows it
// delivered are found at or below their marks next time and never applied
// twice. The last checkpoint batch rides on the fire's outcome, so its race
// is the outcome's (the run counts it raced and leaves the timer due); a
// race of an earlier batch (a window of more rows than one checkpoint
// batch holds) returns Retry, which moves the timer RetryBackoff later.
func TestLostCheckpointRaceRetriesWithoutDoubleApplication(t *testing.T) {
	racers := []struct {
		name  string
		racer func(t testing.TB, e *env, ctx context.Context)
		// concurrentDone: the racer's own run completes the timer.
		concurrentDone bool
	}{
		{"scan state rewritten", func(t testing.TB, e *env, _ context.Context) {
			v, err := gen.EncodeRelayScanV1(gen.RelayScanV1{CycleEnd: 3})
			require.NoError(t, err)
			e.putSource(t, scanKey, v)
		}, false},
		{"a concurrent fire", func(t testing.TB, e *env, ctx context.Context) {
			rep, err := timers.RunDue(ctx, e.inner, source, e.reg, e.now(), timers.RunConfig{Clock: e.clock, Logger: e.logger})
			require.NoError(t, err)
			assert.Equal(t, 1, rep.Fired, "the racer finds every row a duplicate and completes")
		}, true},
	}
	for _, tt := range racers {
		for _, rows := range []int{3, 60} {
			t.Run(fmt.Sprintf("%s/rows=%d", tt.name, rows), func(t *testing.T) {
				forEachEngine(t, func(t *testing.T, e *env) {
					var queued []row
					for i := range rows {
						queued = append(queued, put([]store.Partition{ta, tb}[i%2], "k", fmt.Sprint(i+1)))
					}
					e.queue(t, queued...)
					isCheckpoint := func(b *store.Batch) bool { return requires(b, scanKey) }
					e.source.BeforeApply(once(isCheckpoint, func(ctx context.Context) { tt.racer(t, e, ctx) }))

					rep := e.run(t)
					due, ok := e.timerDue(t)
					switch {
					case tt.concurrentDone:
						// Whichever batch lost, the outcome's guard on the
						// timer fails too.
						assert.Equal(t, 1, rep.Raced)
						assert.False(t, ok, "the racer completed the timer")
					case rows <= checkpointRows:
						assert.Equal(t, 1, rep.Raced, "the outcome carrying the checkpoint lost")
						require.True(t, ok)
						assert.Equal(t, start, due, "a raced outcome leaves the timer due")
					default:
						assert.Equal(t, 1, rep.Retried, "the lost checkpoint retries")
						require.True(t, ok)
						assert.Equal(t, e.now().Add(timers.RetryBackoff), due)
					}

					e.drain(t, 3)
					assert.Empty(t, e.queued(t))
					e.requireAppliedOnce(t, ta, seqStep(1, uint64(rows), 2)...)
					e.requireAppliedOnce(t, tb, seqStep(2, uint64(rows), 2)...)
				})
			})
		}
	}
}

// checkpointRows is how many rows one checkpoint batch deletes on a store
// of 100-operation batches: 100 less the scan state's guard and put and
// what the timer run adds to the last (7), two operations per row.
const checkpointRows = (store.DefaultMaxBatchOps - 2 - timers.OutcomeOps) / 2

// seqStep lists from, from+step, ... up to last.
func seqStep(from, last, step uint64) []uint64 {
	var out []uint64
	for s := from; s <= last; s += step {
		out = append(out, s)
	}
	return out
}

// Reference: an unknown commit result on a target apply fails (blocks)
// the target without counting its rows delivered; whether or not the
// batch landed, its rows are never applied twice: the next cycle finds
// them at or below the mark.
func TestUnknownTargetCommitResultNeverAppliesARowTwice(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "1"), put(ta, "k", "2"))
		e.target.CommitThenFailNth(1)

		e.run(t)
		assert.Contains(t, e.logs.String(), "relay target apply failed")
		assert.Equal(t, ids(ta), e.scanState(t).Blocked)
		assert.Equal(t, []uint64{1, 2}, e.queued(t), "rows of a failed apply stay queued")
		assert.Equal(t, uint64(2), e.highWater(t, ta), "the batch did land")

		// A later row rewrites the key: replaying rows 1..2 after it would
		// show.
		e.queue(t, put(ta, "k", "3"))
		e.drain(t, 4)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, 1, 2, 3)
		assert.Equal(t, "3", e.get(t, ta, "k"))
	})
}

// An unknown commit result on a checkpoint batch fails the run: the
// fire's, for a batch before the last (the run moves the timer later), or
// the outcome's apply, which carries the last one. The next fire goes on
// from whatever landed, without applying a row twice.
func TestUnknownCheckpointCommitResultNeverAppliesARowTwice(t *testing.T) {
	for _, rows := range []int{2, 60} {
		t.Run(fmt.Sprint("rows=", rows), func(t *testing.T) {
			forEachEngine(t, func(t *testing.T, e *env) {
				e.queue(t, repeat(rows, put(ta, "k", "v"))...)
				first := true
				e.source.CommitThenFailWhen(func(c storetest.Call) bool {
					hit := first && requires(c.Batch, scanKey)
					first = first && !hit
					return hit
				})

				rep, err := timers.RunDue(e.ctx, e.source, source, e.reg, e.now(), timers.RunConfig{Clock: e.clock, Logger: e.logger})
				if rows <= checkpointRows {
					require.ErrorIs(t, err, store.ErrUnknownResult, "the outcome's apply")
					assert.Empty(t, e.queued(t), "the checkpoint landed")
					_, ok := e.timerDue(t)
					assert.False(t, ok, "with the outcome: Done")
				} else {
					require.NoError(t, err)
					assert.Equal(t, 1, rep.Failed)
					assert.Len(t, e.queued(t), rows-checkpointRows, "the first checkpoint batch landed")
				}

				e.queue(t, put(ta, "k", "last"))
				e.drain(t, 3)
				e.requireAppliedOnce(t, ta, seqRange(1, uint64(rows)+1)...)
				assert.Equal(t, "last", e.get(t, ta, "k"))
			})
		})
	}
}

// A failed target precondition (a concurrent delivery moved the mark) is
// read again and tried once more in the same fire.
func TestFailedTargetGuardIsReadAgainAndRetriedOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(ta, "k", "1"), put(ta, "k", "2"))
		moved := false
		e.target.BeforeApply(func(_ context.Context, p store.Partition, _ *store.Batch) error {
			if same(p, ta) && !moved {
				moved = true
				e.setHighWater(t, ta, 1) // another relay delivered row 1
			}
			return nil
		})

		e.run(t)
		assert.Empty(t, e.queued(t))
		assert.Empty(t, e.scanState(t).Blocked)
		e.requireAppliedOnce(t, ta, 2)
		calls := e.audit.applyCalls()
		require.Len(t, calls, 2)
		assert.Equal(t, []uint64{1, 2}, calls[0].seqs)
		assert.Equal(t, []uint64{2}, calls[1].seqs, "the retry leaves out the row now covered")
	})
}

// Two failed guards in a row block the target, on a target store without
// transactions (on a store.Transactor the mark is read in the batch's own
// transaction: see TestTargetMarkMovedUnderTheTransactionIsReadAgain).
func TestTargetGuardFailingTwiceBlocksTheTarget(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(tb, "k", "1"), put(tb, "k", "2"), put(ta, "k", "3"))
		var mark uint64
		e.target.BeforeApply(func(_ context.Context, p store.Partition, _ *store.Batch) error {
			if same(p, ta) {
				mark++
				e.setHighWater(t, ta, mark) // 1, then 2: never the mark read, never covering row 3
			}
			return nil
		})

		e.run(t)
		assert.Equal(t, uint64(2), mark, "two tries")
		assert.Equal(t, ids(ta), e.scanState(t).Blocked)
		assert.Equal(t, []uint64{3}, e.queued(t))
		e.requireAppliedOnce(t, ta)
		e.requireAppliedOnce(t, tb, 1, 2)
	}, withPlainTarget())
}

// On a store.Transactor a target's mark is read in the transaction that
// applies the batch past it: a mark another delivery moves before the
// commit (twice here) makes the store run the relay's function again on
// the mark as it is now, not fail the guard, and the rows past it land.
func TestTargetMarkMovedUnderTheTransactionIsReadAgain(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.queue(t, put(tb, "k", "1"), put(tb, "k", "2"), put(ta, "k", "3"))
		var mark uint64
		e.target.BeforeApply(func(_ context.Context, p store.Partition, _ *store.Batch) error {
			if same(p, ta) && mark < 2 {
				mark++
				e.setHighWater(t, ta, mark) // 1, then 2: never covering row 3
			}
			return nil
		})

		e.run(t)
		assert.Equal(t, uint64(2), mark)
		assert.Empty(t, e.scanState(t).Blocked)
		assert.Empty(t, e.queued(t))
		e.requireAppliedOnce(t, ta, 3)
		e.requireAppliedOnce(t, tb, 1, 2)
		var seqs [][]uint64
		for _, c := range e.audit.applyCalls() {
			if same(c.target, ta) {
				seqs = append(seqs, c.seqs)
			}
		}
		assert.Equal(t, [][]uint64{{3}, {3}, {3}}, seqs, "built again on each mark read")
	})
}

func (e *env) putBatch(t testing.TB, b *store.Batch) {
	t.Helper()
	out, err := e.inner.Apply(e.ctx, source, b)
	require.NoError(t, err)
	require.True(t, out.Committed(), "%v", out)
}
