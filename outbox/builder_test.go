package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

func TestSequencesContinueAcrossRowKindsAndBuilders(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.seedTicketed(t, refdomain.MustReservationID("r1"))
		ob := e.builder(t)
		s1, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("a", "1")}, nil)
		require.NoError(t, err)
		s2, err := appendReservation(ob, refdomain.MustReservationID("r1"), ticket, committed(refdomain.MustRepoName("repo")))
		require.NoError(t, err)
		s3, err := ob.Relay(context.Background(), target, nil, [][]byte{[]byte("b")})
		require.NoError(t, err)
		assert.Equal(t, []uint64{1, 2, 3}, []uint64{s1, s2, s3})
		e.finish(t, ob)
		assert.Equal(t, uint64(3), e.sequence(t))

		ob = e.builder(t)
		s4, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("c", "3")}, nil)
		require.NoError(t, err)
		assert.Equal(t, uint64(4), s4)
		e.finish(t, ob)
		assert.Equal(t, uint64(4), e.sequence(t))
	})
}

func TestRelayRowsAreQueuedAsRelayV1(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		ob := e.builder(t)
		_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("k", "v"), put("k2", "")}, [][]byte{[]byte("gone")})
		require.NoError(t, err)
		e.finish(t, ob)

		rows := e.scan(t, gen.TagRelayKey)
		require.Len(t, rows, 1)
		rk, err := gen.ParseRelayKey(rows[0].Key)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), rk.Seq)
		row, err := gen.DecodeRelayV1(rows[0].Value)
		require.NoError(t, err)
		want, err := target.AppendTuple(nil)
		require.NoError(t, err)
		assert.Equal(t, want, row.Target, "the target's tuple identity")
		assert.Equal(t, []gen.RelayPut{put("k", "v"), put("k2", "")}, row.Puts)
		assert.Equal(t, [][]byte{[]byte("gone")}, row.Deletes)
		assert.Equal(t, now, store.DecodeTime(row.AtMs))
	})
}

func TestTheRelayTimerIsCreatedExactlyOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		ob := e.builder(t)
		_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("a", "1")}, nil)
		require.NoError(t, err)
		b := store.NewBatch()
		require.NoError(t, ob.Finish(b))
		require.NotNil(t, b.Wakeup)
		assert.Equal(t, now, b.Wakeup.At, "the partition wakes for the new timer")
		e.mustApply(t, b)
		assert.Equal(t, map[time.Time]string{now: ""}, e.timerRows(t, timers.KindRelay))

		ob = e.builder(t)
		_, err = ob.Relay(context.Background(), target, []gen.RelayPut{put("b", "2")}, nil)
		require.NoError(t, err)
		b = store.NewBatch()
		require.NoError(t, ob.Finish(b))
		assert.Nil(t, b.Wakeup, "the timer exists: nothing to create")
		e.mustApply(t, b)
		assert.Equal(t, map[time.Time]string{now: ""}, e.timerRows(t, timers.KindRelay))
		assert.Empty(t, e.timerRows(t, timers.KindOutcomeDelivery), "relay rows alone need no outcome timer")
	})
}

// A second writer appends between this writer's read and its apply: the
// sequence guard fails this writer's batch, and nothing of it lands.
func TestAConcurrentAppendFailsFinishsPrecondition(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.seedTicketed(t, refdomain.MustReservationID("mine"), refdomain.MustReservationID("theirs"))
		for _, observedEmpty := range []bool{true, false} {
			ob := e.builder(t)
			_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("mine", "1")}, nil)
			require.NoError(t, err)
			if observedEmpty {
				_, err = appendReservation(ob, refdomain.MustReservationID("mine"), ticket, committed(refdomain.MustRepoName("repo")))
				require.NoError(t, err)
			}
			hooked := false
			e.faults.BeforeApply(func(context.Context, store.Partition, *store.Batch) error {
				if hooked {
					return nil
				}
				hooked = true
				other := e.builder(t)
				_, err := other.Relay(context.Background(), target, []gen.RelayPut{put("theirs", "1")}, nil)
				require.NoError(t, err)
				b := store.NewBatch()
				require.NoError(t, other.Finish(b))
				out, err := e.inner.Apply(e.ctx, e.p, b)
				require.NoError(t, err)
				require.True(t, out.Committed())
				return nil
			})
			before := e.sequence(t)
			b := store.NewBatch()
			require.NoError(t, ob.Finish(b))
			out := e.apply(t, b)
			e.faults.Clear()

			require.Equal(t, store.PreconditionFailed, out.Outcome)
			assert.Equal(t, store.Key(outbox.SequenceKey()), out.Failed.Key, "the sequence guard fails")
			assert.Equal(t, before+1, e.sequence(t), "only the other writer's row landed")
			assert.Equal(t, ticket, e.get(t, resKey(t, refdomain.MustReservationID("mine"))), "the outcome did not land")
		}
		assert.Len(t, e.timerRows(t, timers.KindRelay), 1)
	})
}

// The relay finished (deleting its timer) after this writer read the timer
// as present: the batch fails rather than queue a row with no timer, and
// the writer's retry creates the timer again.
func TestARelayTimerDeletedMeanwhileFailsTheGuard(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		ob := e.builder(t)
		_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("a", "1")}, nil)
		require.NoError(t, err)
		e.finish(t, ob)

		ob = e.builder(t)
		_, err = ob.Relay(context.Background(), target, []gen.RelayPut{put("b", "2")}, nil)
		require.NoError(t, err)
		observed, _, err := timers.ReadRef(e.ctx, e.inner, e.p, timers.KindRelay, "")
		require.NoError(t, err)
		cancel := store.NewBatch()
		require.NoError(t, timers.Cancel(cancel, observed, timers.KindRelay, ""))
		e.mustApply(t, cancel)

		b := store.NewBatch()
		require.NoError(t, ob.Finish(b))
		out := e.apply(t, b)
		require.Equal(t, store.PreconditionFailed, out.Outcome)
		refKey, _ := timers.RefKey(timers.KindRelay, "")
		assert.Equal(t, refKey, out.Failed.Key)

		ob = e.builder(t)
		_, err = ob.Relay(context.Background(), target, []gen.RelayPut{put("b", "2")}, nil)
		require.NoError(t, err)
		e.finish(t, ob)
		assert.Equal(t, map[time.Time]string{now: ""}, e.timerRows(t, timers.KindRelay))
		assert.Len(t, e.scan(t, gen.TagRelayKey), 2)
	})
}

func TestOutcomeRowsRewriteTheReservationIndexItAndGrowTheBacklog(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.seedTicketed(t, refdomain.MustReservationID("r1"), refdomain.MustReservationID("r2"), refdomain.MustReservationID("r3"))
		ob := e.builder(t)
		s1, err := appendReservation(ob, refdomain.MustReservationID("r1"), ticket, committed(refdomain.MustRepoName("repo")))
		require.NoError(t, err)
		s2, err := appendReservation(ob, refdomain.MustReservationID("r2"), ticket, aborted())
		require.NoError(t, err)
		b := store.NewBatch()
		require.NoError(t, ob.Finish(b))
		assert.Contains(t, b.Preconditions, store.Absent(outbox.BacklogKey()))
		assert.Contains(t, b.Preconditions, store.Equals(resKey(t, refdomain.MustReservationID("r1")), ticket))
		e.mustApply(t, b)

		assert.Equal(t, mustEncode(committed(refdomain.MustRepoName("repo"))), e.get(t, resKey(t, refdomain.MustReservationID("r1"))))
		assert.Equal(t, mustEncode(aborted()), e.get(t, resKey(t, refdomain.MustReservationID("r2"))))
		pending := e.scan(t, gen.TagOutcomePendingKey)
		require.Len(t, pending, 2)
		for i, want := range []gen.OutcomePendingKey{{Seq: s1, ID: gen.MustOutcomeID("r1")}, {Seq: s2, ID: gen.MustOutcomeID("r2")}} {
			got, err := gen.ParseOutcomePendingKey(pending[i].Key)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			pv, err := gen.DecodeOutcomePendingV1(pending[i].Value)
			require.NoError(t, err)
			assert.Equal(t, gen.OutcomePendingV1{Source: gen.MustOutcomeSource("refdomain.reservations"), Key: []byte(resKey(t, refdomain.MustReservationID(want.ID.String()))), AtMs: pv.AtMs}, pv, "the row names its source and record")
			assert.Equal(t, now, store.DecodeTime(pv.AtMs), "the row's queue time")
		}
		bl, ok := e.backlog(t)
		require.True(t, ok)
		wantBytes := uint64(len(mustEncode(committed(refdomain.MustRepoName("repo")))) + len(mustEncode(aborted())))
		assert.Equal(t, gen.Backlog{Rows: 2, Bytes: wantBytes}, bl)
		timerValue, err := gen.EncodeOutcomeTimer(gen.OutcomeTimer{})
		require.NoError(t, err)
		assert.Equal(t, map[time.Time]string{now: string(timerValue)}, e.timerRows(t, timers.KindOutcomeDelivery))
		assert.Empty(t, e.timerRows(t, timers.KindRelay), "outcome rows alone need no relay timer")

		// A later outcome joins the backlog; the timer exists already.
		ob = e.builder(t)
		_, err = appendReservation(ob, refdomain.MustReservationID("r3"), ticket, committed(refdomain.MustRepoName("other")))
		require.NoError(t, err)
		b = store.NewBatch()
		require.NoError(t, ob.Finish(b))
		assert.Nil(t, b.Wakeup)
		e.mustApply(t, b)
		bl, _ = e.backlog(t)
		assert.Equal(t, uint64(3), bl.Rows)
		assert.Len(t, e.timerRows(t, timers.KindOutcomeDelivery), 1, "created exactly once")
	})
}

func TestAnOutcomeLandsOnlyOnTheObservedReservation(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.seedTicketed(t, refdomain.MustReservationID("r1"))
		ob := e.builder(t)
		_, err := appendReservation(ob, refdomain.MustReservationID("r1"), ticket, committed(refdomain.MustRepoName("repo")))
		require.NoError(t, err)
		b := store.NewBatch()
		require.NoError(t, ob.Finish(b))
		other := mustEncode(&refdomain.ReservationTicketed{TicketID: [32]byte{9}})
		e.mustApply(t, store.NewBatch().Put(resKey(t, refdomain.MustReservationID("r1")), other))

		out := e.apply(t, b)
		require.Equal(t, store.PreconditionFailed, out.Outcome)
		assert.Equal(t, resKey(t, refdomain.MustReservationID("r1")), out.Failed.Key)
		assert.Equal(t, other, e.get(t, resKey(t, refdomain.MustReservationID("r1"))))
		_, ok := e.backlog(t)
		assert.False(t, ok)
	})
}

// Writers racing on one partition, each retrying on a failed guard until
// it lands, get distinct sequences, and the timers exist exactly once.
func TestConcurrentWritersShareNoSequenceAndCreateEachTimerOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		const writers = 8
		rids := make([]refdomain.ReservationID, writers)
		for i := range rids {
			rids[i] = refdomain.MustReservationID(string(rune('a' + i)))
		}
		e.seedTicketed(t, rids...)
		var wg sync.WaitGroup
		seqs := make(chan uint64, 2*writers)
		for _, rid := range rids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each failed attempt means another writer landed, so 2*writers
				// attempts are plenty; more means a guard can never hold.
				for range 2 * writers {
					o, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
					if !assert.NoError(t, err) {
						return
					}
					ob, err := outbox.NewBuilder(e.inner, now, o)
					if !assert.NoError(t, err) {
						return
					}
					s1, err1 := ob.Relay(context.Background(), target, []gen.RelayPut{put(rid.String(), "v")}, nil)
					s2, err2 := appendReservation(ob, rid, ticket, committed(refdomain.MustRepoName("repo")))
					b := store.NewBatch()
					if !assert.NoError(t, err1) || !assert.NoError(t, err2) || !assert.NoError(t, ob.Finish(b)) {
						return
					}
					out, err := e.inner.Apply(e.ctx, e.p, b)
					if !assert.NoError(t, err) {
						return
					}
					if out.Committed() {
						seqs <- s1
						seqs <- s2
						return
					}
				}
				t.Errorf("writer %s never landed", rid)
			}()
		}
		wg.Wait()
		close(seqs)
		seen := map[uint64]bool{}
		for s := range seqs {
			assert.False(t, seen[s], "sequence %d allocated twice", s)
			seen[s] = true
		}
		assert.Len(t, seen, 2*writers)
		assert.Equal(t, uint64(2*writers), e.sequence(t))
		assert.Len(t, e.timerRows(t, timers.KindRelay), 1)
		assert.Len(t, e.timerRows(t, timers.KindOutcomeDelivery), 1)
		bl, _ := e.backlog(t)
		assert.Equal(t, uint64(writers), bl.Rows)
	})
}

func TestFinishWithNothingAppendedAddsNothing(t *testing.T) {
	e := newEnv(t, memengine.New())
	ob := e.builder(t)
	b := store.NewBatch().Put(store.Key("mine"), store.Value("x"))
	require.NoError(t, ob.Finish(b))
	assert.Len(t, b.Writes, 1)
	assert.Empty(t, b.Preconditions)
	require.ErrorIs(t, ob.Finish(b), store.ErrInvalid, "a second Finish")
	_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("a", "1")}, nil)
	require.ErrorIs(t, err, store.ErrInvalid, "no appends after Finish")
}

func TestNewBuilderRejectsCorruptState(t *testing.T) {
	s := newEnv(t, memengine.New()).inner
	for name, o := range map[string]outbox.Observed{
		"sequence":    {Sequence: store.Value("junk")},
		"backlog":     {Backlog: store.Value("junk")},
		"relay timer": {RelayTimer: store.Value("\x01junk")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := outbox.NewBuilder(s, now, o)
			require.ErrorIs(t, err, store.ErrCorrupt)
		})
	}
	// A relay timer entry of a version above the library's was written
	// by a newer binary: not corrupt.
	_, err := outbox.NewBuilder(s, now, outbox.Observed{RelayTimer: store.Value("\x03junk")})
	require.ErrorIs(t, err, store.ErrNewerVersion)
	require.NotErrorIs(t, err, store.ErrCorrupt)
}

// TestReadReadsInTheTransaction: a store.Transact function reads the
// outbox through its Reader, which returns what a Reader of the store
// returns, and a builder made from it appends in the function's batch.
func TestReadReadsInTheTransaction(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		ob := e.builder(t)
		_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("a", "1")}, nil)
		require.NoError(t, err)
		e.finish(t, ob)
		want, err := outbox.Read(e.ctx, store.ReaderOf(e.inner, e.p))
		require.NoError(t, err)
		_, err = store.Transact(e.ctx, e.faults, e.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			got, err := outbox.Read(ctx, r)
			if err != nil {
				return nil, err
			}
			assert.Equal(t, want, got)
			ob, err := outbox.NewBuilder(e.inner, time.UnixMilli(1), got)
			if err != nil {
				return nil, err
			}
			if _, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("b", "2")}, nil); err != nil {
				return nil, err
			}
			b := store.NewBatch()
			return b, ob.Finish(b)
		}, store.TransactConfig{})
		require.NoError(t, err)
		assert.Equal(t, uint64(2), e.sequence(t))
	})
}
