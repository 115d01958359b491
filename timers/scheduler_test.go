package timers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/telemetry"
	"github.com/mkit-dev/mkitfdb/timers"
)

// TestConfigErrorsNameTheField: a negative field of a SchedulerConfig or
// a RunConfig fails with store.ErrInvalid, naming the field.
func TestConfigErrorsNameTheField(t *testing.T) {
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	require.NoError(t, err)
	defer l.Close()
	reg := registry(t)
	for _, tc := range []struct {
		field string
		sched func(*timers.SchedulerConfig)
		run   func(*timers.RunConfig)
	}{
		{"Workers", func(c *timers.SchedulerConfig) { c.Workers = -1 }, nil},
		{"LeaseDuration", func(c *timers.SchedulerConfig) { c.LeaseDuration = -1 }, nil},
		{"PollInterval", func(c *timers.SchedulerConfig) { c.PollInterval = -1 }, nil},
		{"DuePageSize", func(c *timers.SchedulerConfig) { c.DuePageSize = -1 }, nil},
		{"Budget.MaxTimers", func(c *timers.SchedulerConfig) { c.Budget.MaxTimers = -1 }, func(c *timers.RunConfig) { c.Budget.MaxTimers = -1 }},
		{"Budget.MaxDuration", func(c *timers.SchedulerConfig) { c.Budget.MaxDuration = -1 }, func(c *timers.RunConfig) { c.Budget.MaxDuration = -1 }},
		{"HeldBackoff", func(c *timers.SchedulerConfig) { c.HeldBackoff = -1 }, func(c *timers.RunConfig) { c.HeldBackoff = -1 }},
		{"PageSize", nil, func(c *timers.RunConfig) { c.PageSize = -1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			if tc.sched != nil {
				cfg := timers.SchedulerConfig{Store: l, Registry: reg}
				tc.sched(&cfg)
				_, err := timers.NewScheduler(cfg)
				require.ErrorIs(t, err, store.ErrInvalid)
				assert.Contains(t, err.Error(), tc.field)
			}
			if tc.run != nil {
				var cfg timers.RunConfig
				tc.run(&cfg)
				_, err := timers.RunDue(t.Context(), l, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("t")}, reg, time.UnixMilli(1), cfg)
				require.ErrorIs(t, err, store.ErrInvalid)
				assert.Contains(t, err.Error(), tc.field)
			}
		})
	}
}

func TestNewSchedulerRejectsBadConfig(t *testing.T) {
	l, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	require.NoError(t, err)
	defer l.Close()
	reg := registry(t)
	valid := func() timers.SchedulerConfig {
		return timers.SchedulerConfig{Store: l, Registry: reg, ParsePartition: timers.PartitionParser(refdomain.ParsePartition)}
	}
	for _, tc := range []struct {
		name string
		edit func(*timers.SchedulerConfig)
	}{
		{"nil store", func(c *timers.SchedulerConfig) { c.Store = nil }},
		{"store without a due index", func(c *timers.SchedulerConfig) { c.Store = struct{ store.Store }{l} }},
		{"nil registry", func(c *timers.SchedulerConfig) { c.Registry = nil }},
		{"owner over its bound", func(c *timers.SchedulerConfig) { c.Owner = strings.Repeat("o", gen.MaxSchedulerLeaseV1Owner+1) }},
		{"negative workers", func(c *timers.SchedulerConfig) { c.Workers = -1 }},
		{"negative due page size", func(c *timers.SchedulerConfig) { c.DuePageSize = -1 }},
		{"negative budget timers", func(c *timers.SchedulerConfig) { c.Budget.MaxTimers = -1 }},
		{"negative lease", func(c *timers.SchedulerConfig) { c.LeaseDuration = -time.Second }},
		{"lease under a millisecond", func(c *timers.SchedulerConfig) { c.LeaseDuration = time.Millisecond / 2 }},
		{"negative poll interval", func(c *timers.SchedulerConfig) { c.PollInterval = -time.Second }},
		{"negative budget duration", func(c *timers.SchedulerConfig) { c.Budget.MaxDuration = -time.Second }},
		{"budget as long as the lease", func(c *timers.SchedulerConfig) {
			c.LeaseDuration, c.Budget.MaxDuration = 5*time.Second, 5*time.Second
		}},
		{"budget longer than the default lease", func(c *timers.SchedulerConfig) { c.Budget = timers.DefaultBudget }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.edit(&cfg)
			s, err := timers.NewScheduler(cfg)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Nil(t, s)
		})
	}

	t.Run("defaults", func(t *testing.T) {
		a, err := timers.NewScheduler(valid())
		require.NoError(t, err)
		b, err := timers.NewScheduler(valid())
		require.NoError(t, err)
		assert.NotEmpty(t, a.Owner())
		assert.NotEqual(t, a.Owner(), b.Owner(), "random owners")
		cfg := valid()
		cfg.Owner = strings.Repeat("o", gen.MaxSchedulerLeaseV1Owner)
		cfg.LeaseDuration = time.Second // the budget's duration defaults below it
		s, err := timers.NewScheduler(cfg)
		require.NoError(t, err)
		assert.Equal(t, cfg.Owner, s.Owner())
	})
}

func TestTickFiresDuePartitionsUnderAParkedLease(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		e.schedule(t, part(0), timers.Timer{Kind: kindA, Reference: "a", DueAt: now.Add(-10 * time.Millisecond)})
		e.schedule(t, part(1), timers.Timer{Kind: kindA, Reference: "b", DueAt: now.Add(-5 * time.Millisecond)})
		e.schedule(t, part(1), timers.Timer{Kind: kindA, Reference: "later", DueAt: now.Add(500 * time.Millisecond)})
		e.schedule(t, part(2), timers.Timer{Kind: kindA, Reference: "c", DueAt: now.Add(time.Second)})
		type during struct {
			lease   gen.SchedulerLeaseV1
			leased  bool
			wake    time.Time
			hasWake bool
		}
		var seen []during
		h := &recorder{kind: kindA, during: func(c *timers.Ctx, _ timers.DueTimer) {
			var d during
			d.lease, d.leased = e.lease(t, c.Partition)
			d.wake, d.hasWake = e.wake(t, c.Partition)
			seen = append(seen, d)
		}}
		s := e.scheduler(t, "worker-a", registry(t, h), func(c *timers.SchedulerConfig) { c.Workers = 1 })

		rep := e.tick(t, s)

		// In the order of their buckets: by time within one.
		assert.ElementsMatch(t, []fire{{"namespace(p000)", "a", now.Add(-10 * time.Millisecond), now}, {"namespace(p001)", "b", now.Add(-5 * time.Millisecond), now}}, h.seen())
		assert.Equal(t, timers.TickReport{Now: now, Due: 2, Claimed: 2,
			Timers: timers.Report{Fired: 2, NextDue: now.Add(500 * time.Millisecond), Elapsed: rep.Timers.Elapsed}}, rep)
		for _, d := range seen {
			assert.Equal(t, during{gen.SchedulerLeaseV1{Owner: "worker-a", ExpiresAtMs: encoded(now.Add(10 * time.Second))}, true, timers.ParkedWake, true}, d,
				"while it fires, the partition holds our lease and a parked wake time")
		}
		for i := range 3 {
			_, leased := e.lease(t, part(i))
			assert.False(t, leased, "lease of %d released", i)
		}
		_, ok := e.wake(t, part(0))
		assert.False(t, ok, "no timer left in p000")
		w, _ := e.wake(t, part(1))
		assert.Equal(t, now.Add(500*time.Millisecond), w)
		w, _ = e.wake(t, part(2))
		assert.Equal(t, now.Add(time.Second), w, "not due: untouched")
		assert.Equal(t, uint64(1), e.metrics.CounterSum(telemetry.MetricSchedulerTicks))
		assert.Equal(t, uint64(2), e.metrics.Counter(telemetry.MetricSchedulerClaimed, schedLabel))

		e.clock.Set(now.Add(500 * time.Millisecond))
		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Claimed)
		require.Len(t, h.seen(), 3)
		assert.Equal(t, "later", h.seen()[2].Reference)
	})
}

func TestTickClaimsOnlyAbsentExpiredOrOwnLeases(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owner     string
		expiresAt time.Time
		corrupt   bool
		newer     bool // of a version this binary does not read
		want      timers.TickReport
	}{
		{name: "absent", want: timers.TickReport{Claimed: 1}},
		{name: "foreign and live", owner: "other", expiresAt: now.Add(time.Millisecond), want: timers.TickReport{Contended: 1}},
		{name: "foreign and expired", owner: "other", expiresAt: now, want: timers.TickReport{Claimed: 1, Recovered: 1}},
		{name: "ours and live", owner: "me", expiresAt: now.Add(9 * time.Second), want: timers.TickReport{Claimed: 1}},
		{name: "corrupt", corrupt: true, want: timers.TickReport{Corrupt: 1}},
		{name: "newer", newer: true, want: timers.TickReport{Contended: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
				p := part(0)
				e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
				leaseKey := gen.AppendSchedulerLeaseKey(nil)
				switch {
				case tc.corrupt:
					// Version 1, then not a lease.
					e.apply(t, p, store.NewBatch().Put(leaseKey, store.Value{gen.VersionSchedulerLeaseV1, 0xde, 0xad}))
					e.exempt(p)
				case tc.newer:
					// A newer binary's lease: contended until it goes.
					e.apply(t, p, store.NewBatch().Put(leaseKey, store.Value{gen.VersionSchedulerLeaseV1 + 1, 0xde, 0xad}))
					e.exempt(p)
				case tc.owner != "":
					v, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: tc.owner, ExpiresAtMs: encoded(tc.expiresAt)})
					require.NoError(t, err)
					e.apply(t, p, store.NewBatch().Put(leaseKey, v))
				}
				before, _, err := e.layer.Get(e.ctx, p, leaseKey)
				require.NoError(t, err)
				h := &recorder{kind: kindA}
				s := e.scheduler(t, "me", registry(t, h), nil)

				rep := e.tick(t, s)

				claimed := tc.want.Claimed == 1
				want := tc.want
				want.Now, want.Due = now, 1
				if claimed {
					want.Timers = timers.Report{Fired: 1, Elapsed: rep.Timers.Elapsed}
				}
				assert.Equal(t, want, rep)
				after, _, err := e.layer.Get(e.ctx, p, leaseKey)
				require.NoError(t, err)
				w, ok := e.wake(t, p)
				if claimed {
					assert.Len(t, h.seen(), 1)
					assert.Nil(t, after, "released")
					assert.False(t, ok, "no timer left")
				} else {
					assert.Empty(t, h.seen())
					assert.Equal(t, before, after, "lease untouched")
					assert.Equal(t, now.Add(-time.Millisecond), w, "wake time untouched")
				}
				assert.Equal(t, uint64(tc.want.Contended), e.metrics.Counter(telemetry.MetricSchedulerContended, schedLabel))
				assert.Equal(t, uint64(tc.want.Recovered), e.metrics.Counter(telemetry.MetricSchedulerRecovered, schedLabel))
				assert.Equal(t, uint64(tc.want.Corrupt), e.metrics.CounterSum(telemetry.MetricSchedulerCorrupt))
				if tc.corrupt {
					assert.Contains(t, e.logs.String(), "lease does not decode")
				}
			})
		})
	}
}

func TestTickThatLosesTheClaimRaceDoesNotFire(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		leaseKey := gen.AppendSchedulerLeaseKey(nil)
		raced := false
		e.faults.BeforeApply(func(ctx context.Context, q store.Partition, b *store.Batch) error {
			if raced || len(b.Writes) == 0 || string(b.Writes[0].Key) != string(leaseKey) || b.Writes[0].Op != store.OpPut {
				return nil
			}
			raced = true // another worker claims between our read and our Apply
			v, err := gen.EncodeSchedulerLeaseV1(gen.SchedulerLeaseV1{Owner: "other", ExpiresAtMs: encoded(now.Add(10 * time.Second))})
			require.NoError(t, err)
			_, err = e.layer.Apply(ctx, q, store.NewBatch().Put(leaseKey, v))
			return err
		})
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), nil)

		rep := e.tick(t, s)

		require.True(t, raced)
		assert.Equal(t, timers.TickReport{Now: now, Due: 1, Contended: 1}, rep)
		assert.Empty(t, h.seen())
		l, _ := e.lease(t, p)
		assert.Equal(t, "other", l.Owner)
		w, _ := e.wake(t, p)
		assert.Equal(t, now.Add(-time.Millisecond), w, "the failed claim parked nothing")
	})
}

// A timer written after RunDue read the partition, before the batch that
// releases the claim (here the run's last outcome, with the release
// folded in), lowers the parked wake time; that batch fails its wake
// guard, the outcome lands alone, and the release re-reads the wake time
// and keeps the earlier of the two.
func TestTimerWrittenBeforeTheFinishingBatchIsNotForgotten(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing time.Time // due time of a timer the run sees but does not fire (zero: none)
		written  time.Time // due time of the timer written before the finishing batch
		wantWake time.Time
	}{
		// A write past the claim's lease expiry lowers the parked wake
		// time to the expiry only (its ceiling): an early wake, never a
		// late one.
		{"later than everything", time.Time{}, now.Add(time.Minute), now.Add(leaseDuration)},
		{"before the run's next due time", now.Add(5 * time.Second), now.Add(time.Second), now.Add(time.Second)},
		{"after the run's next due time", now.Add(5 * time.Second), now.Add(9 * time.Second), now.Add(5 * time.Second)},
		{"already due", time.Time{}, now.Add(-3 * time.Millisecond), now.Add(-3 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
				p := part(0)
				e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "due", DueAt: now.Add(-10 * time.Millisecond)})
				if !tc.existing.IsZero() {
					e.schedule(t, p, timers.Timer{Kind: kindA, Reference: "existing", DueAt: tc.existing})
				}
				leaseKey := gen.AppendSchedulerLeaseKey(nil)
				finishes, written := 0, false
				e.faults.BeforeApply(func(_ context.Context, q store.Partition, b *store.Batch) error {
					if !deletes(b, leaseKey) {
						return nil
					}
					finishes++
					if !written {
						written = true
						e.schedule(t, q, timers.Timer{Kind: kindA, Reference: "written", DueAt: tc.written})
					}
					return nil
				})
				h := &recorder{kind: kindA}
				s := e.scheduler(t, "me", registry(t, h), nil)

				rep := e.tick(t, s)

				assert.Equal(t, 1, rep.Timers.Fired)
				assert.Equal(t, 2, finishes, "the first releasing batch fails its wake guard, the second lands")
				w, ok := e.wake(t, p)
				assert.True(t, ok)
				assert.Equal(t, tc.wantWake, w)
				_, leased := e.lease(t, p)
				assert.False(t, leased)

				firedAt := now
				if tc.written.After(now) {
					firedAt = tc.written
				}
				e.clock.Set(firedAt)
				e.tick(t, s)
				assert.Contains(t, h.seen(), fire{"namespace(p000)", "written", tc.written, firedAt},
					"the timer written meanwhile fires when due")
			})
		})
	}
}

func TestTickSkipsStaleEntriesAndCleansWakeTimesWithoutTimers(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		moved, gone, empty := part(0), part(1), part(2)
		for i := range 3 {
			e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(time.Duration(i-10) * time.Millisecond)})
		}
		// p002's timer is cancelled: its wake time stays, with no timer.
		ref, _, err := timers.ReadRef(e.ctx, e.layer, empty, kindA, "r")
		require.NoError(t, err)
		b := store.NewBatch()
		require.NoError(t, timers.Cancel(b, ref, kindA, "r"))
		e.apply(t, empty, b)
		// Once the tick has listed them, other workers move p000's wake
		// time into the future and clear p001's (by hand: they break the
		// invariant, which a real worker's fire would keep).
		e.exempt(moved, gone)
		once := false
		e.faults.AfterRead(func(_ context.Context, c storetest.Call) error {
			if once || c.Method != storetest.MethodScanDue {
				return nil
			}
			once = true
			e.setWake(t, moved, now.Add(5*time.Second))
			e.setWake(t, gone, time.Time{})
			return nil
		})
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), nil)

		rep := e.tick(t, s)

		assert.Equal(t, timers.TickReport{Now: now, Due: 3, Stale: 2, Claimed: 1, Timers: timers.Report{Elapsed: rep.Timers.Elapsed}}, rep)
		assert.Empty(t, h.seen())
		w, _ := e.wake(t, moved)
		assert.Equal(t, now.Add(5*time.Second), w, "a stale entry is left to the wake time it moved to")
		_, ok := e.wake(t, gone)
		assert.False(t, ok)
		for i := range 2 {
			_, leased := e.lease(t, part(i))
			assert.False(t, leased, "stale entries are not claimed")
		}
		_, ok = e.wake(t, empty)
		assert.False(t, ok, "the wake time without timers is cleared")
		assert.Equal(t, []store.DueEntry{{At: now.Add(5 * time.Second), Partition: identity(t, moved)}}, e.entries(t),
			"one entry left in the index")
		assert.Equal(t, uint64(2), e.metrics.Counter(telemetry.MetricSchedulerStale, schedLabel))

		rep = e.tick(t, s)
		assert.Equal(t, timers.TickReport{Now: now}, rep, "nothing due")
	})
}

// A timer of a kind no handler is registered for stays due, waking its
// partition once per HeldBackoff rather than at every poll; once its
// handler is registered it fires, with no write in between.
func TestATimerOfAKindRegisteredLaterFires(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		p := part(0)
		e.schedule(t, p, timers.Timer{Kind: 999, Reference: "early", DueAt: now.Add(-time.Millisecond), Value: store.Value("v")})
		reg := registry(t, &recorder{kind: kindA})
		s := e.scheduler(t, "me", reg, nil)

		rep := e.tick(t, s)
		assert.Equal(t, 1, rep.Claimed)
		assert.Equal(t, 1, rep.Timers.UnknownKind)
		assert.Equal(t, 1, rep.Timers.Held)
		w, ok := e.wake(t, p)
		assert.True(t, ok, "a held timer keeps its partition in the due index")
		assert.Equal(t, now.Add(timers.DefaultHeldBackoff), w)
		e.checkDueIndex(t, p)

		for range 3 {
			e.clock.Advance(time.Second)
			rep = e.tick(t, s)
			assert.Zero(t, rep.Due)
			assert.Zero(t, rep.Claimed)
		}
		assert.Equal(t, uint64(1), e.metrics.CounterSum(telemetry.MetricTimersUnknownKind), "not at every poll")

		late := &recorder{kind: 999}
		require.NoError(t, reg.Register(late, timers.KindConfig{}))
		e.clock.Set(now.Add(timers.DefaultHeldBackoff))
		rep = e.tick(t, s)
		assert.Equal(t, 1, rep.Timers.Fired)
		require.Len(t, late.seen(), 1)
		assert.Equal(t, "early", late.seen()[0].Reference)
		_, ok = e.wake(t, p)
		assert.False(t, ok, "nothing left")
		e.checkDueIndex(t, p)
	})
}

// A partition of a schema the scheduler's ParsePartition does not know is
// addressed by its identity (store.Identity) and fired all the same; a
// project's own parser names it. An entry whose identity is not a tuple
// names no partition: it is counted at every tick and logged once.
func TestTickFiresPartitionsItCannotParseByTheirIdentity(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		// A partition of the test kind: refdomain.ParsePartition cannot read it.
		foreign := testPartition("x")
		e.schedule(t, foreign, timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		e.schedule(t, part(0), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), nil)

		rep := e.tick(t, s)
		assert.Equal(t, 2, rep.Claimed)
		assert.Zero(t, rep.Corrupt)
		assert.ElementsMatch(t, []string{"namespace(p000)", `identity("x")`}, partitionsOf(h.seen()))
		_, ok := e.wake(t, foreign)
		assert.False(t, ok, "fired and released like any other")

		// With no parser at all, every partition is an identity; a
		// project's own parser names its partitions.
		e.schedule(t, foreign, timers.Timer{Kind: kindA, Reference: "again", DueAt: now})
		own := e.scheduler(t, "own", registry(t, h), func(c *timers.SchedulerConfig) {
			c.ParsePartition = func(id []byte) (store.Partition, error) {
				return testPartition(string(id[1 : len(id)-1])), nil
			}
		})
		rep = e.tick(t, own)
		assert.Equal(t, 1, rep.Claimed)
		assert.Equal(t, "test:x", partitionsOf(h.seen())[2])
		none := e.scheduler(t, "none", registry(t, h), func(c *timers.SchedulerConfig) { c.ParsePartition = nil })
		e.schedule(t, part(0), timers.Timer{Kind: kindA, Reference: "again", DueAt: now})
		rep = e.tick(t, none)
		assert.Equal(t, 1, rep.Claimed)
		assert.Equal(t, "identity(\"refdomain\", 2, \"p000\")", partitionsOf(h.seen())[3])
	})
}

// notATuple is a partition whose identity no tuple decoder reads.
type notATuple struct{}

func (notATuple) AppendTuple(dst []byte) ([]byte, error) { return append(dst, 0xfe, 0x01), nil }
func (notATuple) Kind() string                           { return "broken" }

func TestTickCountsAnEntryThatNamesNoPartitionAndLogsItOnce(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		e.apply(t, notATuple{}, store.NewBatch().WakeAt(now.Add(-time.Millisecond)))
		e.exempt(notATuple{}) // the checker cannot read it either
		e.schedule(t, part(0), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		h := &recorder{kind: kindA}
		s := e.scheduler(t, "me", registry(t, h), nil)
		for i := range 3 {
			rep := e.tick(t, s)
			assert.Equal(t, 1, rep.Corrupt, "tick %d", i)
			e.clock.Advance(time.Second)
		}
		assert.Equal(t, []string{"namespace(p000)"}, partitionsOf(h.seen()), "the others still fire")
		assert.Equal(t, uint64(3), e.metrics.CounterSum(telemetry.MetricSchedulerCorrupt), "counted at every tick")
		assert.Equal(t, 1, strings.Count(e.logs.String(), "names no partition"), "logged once")
	})
}

// A store failure fails that partition only: the tick fires the others,
// counts the failure and returns the first error. A failed run leaves its
// partition due (its wake time never passes a timer it holds), and the
// Scheduler leaves it alone for the retry backoff; a partition whose
// release failed stays parked under our lease, and the next tick takes it
// back.
func TestTickCountsStoreFailuresAndRecoversFromThem(t *testing.T) {
	forEachSchedEngine(t, now, func(t *testing.T, e *schedEnv) {
		for i := range 3 {
			e.schedule(t, part(i), timers.Timer{Kind: kindA, Reference: "r", DueAt: now.Add(-time.Millisecond)})
		}
		leaseKey := gen.AppendSchedulerLeaseKey(nil)
		is := func(c storetest.Call, p store.Partition) bool {
			return store.PartitionName(c.Partition) == store.PartitionName(p)
		}
		// p000's claim cannot scan (it reads the first page of timers);
		// p001's releasing batches (its last outcome with the release
		// folded in, then the release alone) fail once each.
		e.faults.FailWhen(storetest.MethodScan, func(c storetest.Call) bool { return is(c, part(0)) }, nil)
		releases := 0
		e.faults.FailWhen(storetest.MethodApply, func(c storetest.Call) bool {
			if is(c, part(1)) && deletes(c.Batch, leaseKey) && releases < 2 {
				releases++
				return true
			}
			return false
		}, nil)
		h := &recorder{kind: kindA}
		// One claim a partition: each partition's calls fail alone
		// (TestBatchedClaimsKeepFailuresApart has claims in batches).
		s := e.scheduler(t, "me", registry(t, h), func(c *timers.SchedulerConfig) { c.Workers, c.ClaimBatch = 1, 1 })

		rep, err := s.Tick(e.ctx)
		require.ErrorIs(t, err, storetest.ErrInjected)
		e.checkDueIndex(t)
		assert.Equal(t, 2, rep.Claimed)
		assert.Equal(t, 2, rep.Errors)
		assert.Equal(t, 1, rep.Timers.Fired, "p002 only")
		assert.Equal(t, uint64(2), e.metrics.Counter(telemetry.MetricSchedulerErrors, schedLabel))
		w, _ := e.wake(t, part(0))
		assert.LessOrEqual(t, w, now.Add(-time.Millisecond), "a failed run leaves its partition due")
		_, leased := e.lease(t, part(0))
		assert.False(t, leased)
		w, _ = e.wake(t, part(1))
		assert.Equal(t, timers.ParkedWake, w, "still parked")
		l, _ := e.lease(t, part(1))
		assert.Equal(t, "me", l.Owner)

		rep = e.tick(t, s)
		assert.Equal(t, timers.TickReport{Now: now, Due: 1, Parked: 1, BackedOff: 2,
			Timers: timers.Report{}}, withoutElapsed(rep), "both failed partitions are left alone for the backoff")

		e.faults.Clear()
		e.clock.Set(now.Add(timers.RetryBackoff))
		rep = e.tick(t, s)
		assert.Equal(t, 2, rep.Claimed)
		assert.Equal(t, 2, rep.Timers.Fired)
		assert.ElementsMatch(t, []string{"namespace(p001)", "namespace(p002)", "namespace(p000)", "namespace(p001)"},
			partitionsOf(h.seen()), "p001 twice: its first outcome never landed")
		_, leased = e.lease(t, part(1))
		assert.False(t, leased)
		assert.Empty(t, e.entries(t))
	})
}
