package storetest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// The due checks run against stores that implement store.DueIndex; a store
// that does not must reject every batch carrying a Wakeup instead.
var dueChecks = []check{
	{"WakeupRejectedWithoutIndex", testWakeupRejectedWithoutIndex},
	{"WakeAtLowers", testWakeAtLowers},
	{"SetWakeIsGuarded", testSetWakeGuarded},
	{"CeilingBoundsTheNextLowering", testWakeCeiling},
	{"WakeupOnlyWithItsBatch", testWakeupOnlyWithItsBatch},
	{"WakeIsPerPartition", testWakePerPartition},
	{"ScanDueOrderAndPaging", testScanDue},
	{"ScanDueFollowsWakeChanges", testScanDueFollowsChanges},
	{"ConcurrentWakeAtKeepsMinimum", testConcurrentWakeAt},
	{"ConcurrentSetWakeGuarded", testConcurrentSetWake},
}

// dueIndex returns the store's due index, skipping t when it keeps none.
func (f *fixture) dueIndex(t testing.TB) store.DueIndex {
	t.Helper()
	di, ok := f.s.(store.DueIndex)
	if !ok {
		t.Skip("the store keeps no due index (it does not implement store.DueIndex)")
	}
	return di
}

// dueT0 is the base of the due checks' wake times: each is a duration
// after it, all of them before the store's clock (suiteEpoch), so that
// they are due.
var dueT0 = time.Unix(0, 0)

// wake reads p's wake time, the zero Time for none.
func (f *fixture) wake(t testing.TB, di store.DueIndex, p store.Partition) time.Time {
	t.Helper()
	wake, ok, err := di.NextWake(f.ctx, p)
	noErr(t, err, fmt.Sprintf("NextWake(%v)", p))
	if ok == wake.IsZero() {
		t.Fatalf("NextWake(%v) = %v, %v: a wake time is never the zero Time, and none is reported as ok false", p, wake, ok)
	}
	return wake
}

func (f *fixture) wantWake(t testing.TB, di store.DueIndex, p store.Partition, want time.Time) {
	t.Helper()
	if got := f.wake(t, di, p); !got.Equal(want) {
		t.Fatalf("wake time of %v = %v, want %v (the zero Time: none)", p, got, want)
	}
}

// dueEntry is the due index entry of p at at.
func dueEntry(t testing.TB, p store.Partition, at time.Time) store.DueEntry {
	t.Helper()
	id, err := p.AppendTuple(nil)
	noErr(t, err, "AppendTuple")
	return store.DueEntry{At: at, Partition: id}
}

// scanDue pages through the due index as q selects, q.Limit entries a
// page, and checks each page: at most q.Limit entries, in q's order
// (bucket by bucket from q.Start, by time then identity within one).
func (f *fixture) scanDue(t testing.TB, di store.DueIndex, q store.DueQuery) []store.DueEntry {
	t.Helper()
	var all []store.DueEntry
	for page := 0; ; page++ {
		if page > 10_000 {
			t.Fatalf("ScanDue %+v: no end after %d pages", q, page)
		}
		es, err := di.ScanDue(f.ctx, q)
		noErr(t, err, fmt.Sprintf("ScanDue %+v", q))
		if len(es) > q.Limit {
			t.Fatalf("ScanDue returned %d entries, limit %d", len(es), q.Limit)
		}
		all = append(all, es...)
		if len(es) < q.Limit {
			break
		}
		q.After = &es[len(es)-1]
	}
	buckets := di.DueBuckets()
	for i := 1; i < len(all); i++ {
		if listingOrder(q, buckets, all[i-1], all[i]) >= 0 {
			t.Fatalf("ScanDue %+v listed %v before %v: want bucket by bucket from %d, by time then identity within one", q, all[i-1], all[i], q.Start)
		}
	}
	return all
}

// listingOrder compares two entries in the order a listing from q.Start
// lists them.
func listingOrder(q store.DueQuery, buckets int, a, b store.DueEntry) int {
	return cmp.Or(cmp.Compare(q.Offset(a.Bucket, buckets), q.Offset(b.Bucket, buckets)), compareByTime(a, b))
}

// compareByTime orders entries by time, then identity.
func compareByTime(a, b store.DueEntry) int {
	return cmp.Or(a.At.Compare(b.At), bytes.Compare(a.Partition, b.Partition))
}

// byTime returns es sorted by time, then identity, buckets left out.
func byTime(es []store.DueEntry) []store.DueEntry {
	out := make([]store.DueEntry, len(es))
	for i, e := range es {
		out[i] = store.DueEntry{At: e.At, Partition: e.Partition}
	}
	slices.SortFunc(out, compareByTime)
	return out
}

func sameEntries(a, b []store.DueEntry) bool {
	return slices.EqualFunc(a, b, func(x, y store.DueEntry) bool {
		return x.Bucket == y.Bucket && x.At.Equal(y.At) && bytes.Equal(x.Partition, y.Partition)
	})
}

// wantDue checks that every listing of the entries due by until, from
// every bucket and in pages of several sizes, holds exactly want (by
// time, then identity; their buckets are the store's), each partition
// once and always in the same bucket.
func (f *fixture) wantDue(t testing.TB, di store.DueIndex, until time.Time, want []store.DueEntry) {
	t.Helper()
	want = byTime(want)
	bucketOf := map[string]int{}
	for start := range di.DueBuckets() {
		for _, limit := range []int{1, 2, 1000} {
			got := f.scanDue(t, di, store.DueQuery{Until: until, Start: start, Limit: limit})
			for _, e := range got {
				if b, seen := bucketOf[string(e.Partition)]; seen && b != e.Bucket {
					t.Fatalf("ScanDue until %v from bucket %d: %x listed in bucket %d, before in %d", until, start, e.Partition, e.Bucket, b)
				}
				if e.Bucket < 0 || e.Bucket >= di.DueBuckets() {
					t.Fatalf("ScanDue until %v: entry %v in bucket %d of %d", until, e, e.Bucket, di.DueBuckets())
				}
				bucketOf[string(e.Partition)] = e.Bucket
			}
			if got := byTime(got); !sameEntries(got, want) {
				t.Fatalf("ScanDue until %v from bucket %d limit %d:\n got %v\nwant %v", until, start, limit, got, want)
			}
		}
	}
}

// testWakeupRejectedWithoutIndex: a store without a due index rejects
// every batch carrying a Wakeup or a WakeIs with ErrInvalid, writing
// nothing.
func testWakeupRejectedWithoutIndex(t *testing.T, f *fixture) {
	if _, ok := f.s.(store.DueIndex); ok {
		t.Skip("the store keeps a due index")
	}
	f.rejects(t, store.NewBatch().Put(store.Key("k"), store.Value("v")).WakeAt(dueT0.Add(time.Second)), "Put with WakeAt")
	f.rejects(t, store.NewBatch().WakeAt(dueT0.Add(time.Second)), "WakeAt alone")
	f.rejects(t, store.NewBatch().Put(store.Key("k"), store.Value("v")).SetWake(time.Time{}, dueT0.Add(time.Second)), "Put with SetWake")
	f.rejects(t, store.NewBatch().Require(store.WakeIs(time.Time{})).Put(store.Key("k"), store.Value("v")), "Put guarded by WakeIs")
}

// testWakeAtLowers: WakeAt sets a partition's wake time to the earlier of
// its current one and the batch's, in the batch's transaction; a batch may
// carry nothing but a Wakeup.
func testWakeAtLowers(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	f.wantWake(t, di, f.p, time.Time{})
	f.apply(t, f.p, store.NewBatch().Put(store.Key("timer"), store.Value("t")).WakeAt(dueT0.Add(5*time.Second)), store.Committed, "Put with WakeAt(5000)")
	f.wantValue(t, f.p, store.Key("timer"), store.Value("t"))
	f.wantWake(t, di, f.p, dueT0.Add(5*time.Second))
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(7*time.Second)), store.Committed, "WakeAt(7000) alone")
	f.wantWake(t, di, f.p, dueT0.Add(5*time.Second))
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(3*time.Second)), store.Committed, "WakeAt(3000) alone")
	f.wantWake(t, di, f.p, dueT0.Add(3*time.Second))
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(3*time.Second)), store.Committed, "WakeAt(3000) again")
	f.wantWake(t, di, f.p, dueT0.Add(3*time.Second))
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, dueT0.Add(3*time.Second))})
}

// testSetWakeGuarded: SetWake replaces the wake time (raising, lowering or
// clearing it) only when the current one is the expected one; otherwise
// its WakeIs precondition fails like any other, named by its index, and
// the batch writes nothing.
func testSetWakeGuarded(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	wantWakeFailed := func(b *store.Batch, what string) {
		t.Helper()
		i := len(b.Preconditions) - 1 // SetWake appended its WakeIs last
		out := f.apply(t, f.p, b, store.PreconditionFailed, what)
		if out.FailedIndex != i || !samePrecondition(out.Failed, b.Preconditions[i]) {
			t.Fatalf("%s: failed precondition %d %v, want %d %v", what, out.FailedIndex, out.Failed, i, b.Preconditions[i])
		}
	}
	wantWakeFailed(store.NewBatch().Put(store.Key("w"), store.Value("x")).SetWake(dueT0.Add(time.Millisecond), dueT0.Add(4*time.Second)), "SetWake expecting 1 when none")
	f.apply(t, f.p, store.NewBatch().SetWake(time.Time{}, dueT0.Add(4*time.Second)), store.Committed, "SetWake expecting none")
	f.wantWake(t, di, f.p, dueT0.Add(4*time.Second))

	wantWakeFailed(store.NewBatch().Put(store.Key("w"), store.Value("x")).SetWake(dueT0.Add(999*time.Millisecond), dueT0.Add(5*time.Second)), "SetWake expecting 999 at 4000")
	wantWakeFailed(store.NewBatch().Put(store.Key("w"), store.Value("x")).SetWake(time.Time{}, dueT0.Add(5*time.Second)), "SetWake expecting none at 4000")
	// Preconditions are checked in order: a row guard before the WakeIs
	// that holds, then the WakeIs that fails at index 1, before a row
	// guard that would fail too.
	f.put(t, f.p, "g", "1")
	b := store.NewBatch().Require(store.Equals(store.Key("g"), store.Value("1"))).SetWake(dueT0.Add(999*time.Millisecond), dueT0.Add(5*time.Second)).Require(store.Absent(store.Key("g"))).Put(store.Key("w"), store.Value("x"))
	out := f.apply(t, f.p, b, store.PreconditionFailed, "row guard, failing WakeIs, failing row guard")
	if out.FailedIndex != 1 || !samePrecondition(out.Failed, store.WakeIs(dueT0.Add(999*time.Millisecond))) {
		t.Fatalf("row guard, failing WakeIs, failing row guard: failed precondition %d %v, want 1 %v", out.FailedIndex, out.Failed, store.WakeIs(dueT0.Add(999*time.Millisecond)))
	}
	f.apply(t, f.p, store.NewBatch().Require(store.WakeIs(dueT0.Add(4*time.Second))).Put(store.Key("checked"), store.Value("x")), store.Committed, "WakeIs(4000) alone guarding a put")
	f.wantValue(t, f.p, store.Key("checked"), store.Value("x"))
	f.wantAbsent(t, f.p, store.Key("w"))
	f.wantWake(t, di, f.p, dueT0.Add(4*time.Second))

	f.apply(t, f.p, store.NewBatch().Put(store.Key("w"), store.Value("x")).SetWake(dueT0.Add(4*time.Second), dueT0.Add(6*time.Second)), store.Committed, "SetWake raising 4000 to 6000")
	f.wantValue(t, f.p, store.Key("w"), store.Value("x"))
	f.wantWake(t, di, f.p, dueT0.Add(6*time.Second))
	f.apply(t, f.p, store.NewBatch().SetWake(dueT0.Add(6*time.Second), time.Time{}), store.Committed, "SetWake clearing 6000")
	f.wantWake(t, di, f.p, time.Time{})
	f.wantDue(t, di, store.MaxTime, nil)
	f.apply(t, f.p, store.NewBatch().SetWake(time.Time{}, time.Time{}), store.Committed, "SetWake clearing none")
	f.wantWake(t, di, f.p, time.Time{})
}

// testWakeCeiling: a wake time set with a ceiling (SetWakeCeiling) is
// lowered by the next WakeAt, however late, to at most the ceiling, and
// the ceiling is then gone; an exact wakeup without a ceiling clears it; a
// ceiling at or above its wake time is invalid.
func testWakeCeiling(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	parked := store.MaxTime
	f.rejects(t, store.NewBatch().SetWakeCeiling(time.Time{}, dueT0.Add(5*time.Second), dueT0.Add(5*time.Second)), "SetWakeCeiling with the ceiling at the wake time")
	f.rejects(t, store.NewBatch().Put(store.Key("w"), store.Value("x")).SetWakeCeiling(time.Time{}, dueT0.Add(5*time.Second), dueT0.Add(6*time.Second)), "SetWakeCeiling with the ceiling above the wake time")
	f.apply(t, f.p, store.NewBatch().SetWakeCeiling(time.Time{}, parked, dueT0.Add(5*time.Second)), store.Committed, "SetWakeCeiling(parked, ceiling 5000)")
	f.wantWake(t, di, f.p, parked)
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, parked)})
	f.apply(t, f.p, store.NewBatch().Put(store.Key("timer"), store.Value("t")).WakeAt(dueT0.Add(90*time.Second)), store.Committed, "WakeAt(90000) under the ceiling 5000")
	f.wantWake(t, di, f.p, dueT0.Add(5*time.Second))
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, dueT0.Add(5*time.Second))})
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(80*time.Second)), store.Committed, "WakeAt(80000) once the ceiling is gone")
	f.wantWake(t, di, f.p, dueT0.Add(5*time.Second))
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(4*time.Second)), store.Committed, "WakeAt(4000)")
	f.wantWake(t, di, f.p, dueT0.Add(4*time.Second))

	f.apply(t, f.p, store.NewBatch().SetWakeCeiling(dueT0.Add(4*time.Second), parked, dueT0.Add(6*time.Second)), store.Committed, "SetWakeCeiling(parked, ceiling 6000)")
	f.apply(t, f.p, store.NewBatch().SetWake(parked, parked), store.Committed, "SetWake(parked) clearing the ceiling")
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(90*time.Second)), store.Committed, "WakeAt(90000) without a ceiling")
	f.wantWake(t, di, f.p, dueT0.Add(90*time.Second))
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, dueT0.Add(90*time.Second))})
}

// testWakeupOnlyWithItsBatch: a batch that does not commit (failed guard,
// passed deadline, invalid, cancelled) leaves the wake time alone.
func testWakeupOnlyWithItsBatch(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	f.apply(t, f.p, store.NewBatch().Put(store.Key("k"), store.Value("v")).WakeAt(dueT0.Add(5*time.Second)), store.Committed, "WakeAt(5000)")

	f.apply(t, f.p, store.NewBatch().Require(store.Absent(store.Key("k"))).WakeAt(dueT0.Add(time.Second)), store.PreconditionFailed, "WakeAt with a failing guard")
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(time.Second)).WithDeadline(f.clk.Now().Add(-time.Millisecond)), store.DeadlinePassed, "WakeAt past its deadline")
	for name, b := range map[string]*store.Batch{
		"WakeAt(0)":                 store.NewBatch().Put(store.Key("x"), store.Value("x")).WakeAt(time.Time{}),
		"WakeAt with an empty key":  store.NewBatch().Put(store.Key{}, store.Value("x")).WakeAt(dueT0.Add(time.Second)),
		"WakeAt with an unknown op": store.NewBatch().Add(store.Write{Op: 9, Key: store.Key("x")}).WakeAt(dueT0.Add(time.Second)),
	} {
		_, err := f.s.Apply(f.ctx, f.p, b)
		wantSentinel(t, err, store.ErrInvalid, name)
	}
	_, err := f.s.Apply(cancelledContext(f.ctx), f.p, store.NewBatch().WakeAt(dueT0.Add(time.Second)))
	if !wrapsOneOf(err, store.ErrUnavailable, store.ErrUnknownResult) {
		t.Fatalf("WakeAt with a cancelled context: error %v, want ErrUnavailable or ErrUnknownResult", err)
	}
	f.wantWake(t, di, f.p, dueT0.Add(5*time.Second))
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, dueT0.Add(5*time.Second))})
	f.wantRows(t, f.p, rows("k", "v"))
}

// testWakePerPartition: each partition has its own wake time; an
// unencodable partition is ErrInvalid for NextWake and for a Wakeup.
func testWakePerPartition(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	f.apply(t, f.p, store.NewBatch().WakeAt(dueT0.Add(3*time.Second)), store.Committed, "WakeAt in p")
	f.apply(t, f.other, store.NewBatch().WakeAt(dueT0.Add(8*time.Second)), store.Committed, "WakeAt in other")
	f.wantWake(t, di, f.p, dueT0.Add(3*time.Second))
	f.wantWake(t, di, f.other, dueT0.Add(8*time.Second))
	f.wantWake(t, di, Partition{Name: "suite-third"}, time.Time{})
	for _, p := range []store.Partition{Partition{Name: "x", Broken: true}, Partition{}, nil} {
		_, _, err := di.NextWake(f.ctx, p)
		wantSentinel(t, err, store.ErrInvalid, "NextWake on "+store.PartitionName(p))
		_, err = f.s.Apply(f.ctx, p, store.NewBatch().WakeAt(dueT0.Add(time.Second)))
		wantSentinel(t, err, store.ErrInvalid, "WakeAt on "+store.PartitionName(p))
	}
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, dueT0.Add(3*time.Second)), dueEntry(t, f.other, dueT0.Add(8*time.Second))})
}

// dueFixturePartitions are five partitions with wake times, and the due
// index they make, in its order: by time, then partition identity.
func dueFixturePartitions(t testing.TB, f *fixture) (map[string]store.Partition, []store.DueEntry) {
	t.Helper()
	ps := map[string]store.Partition{}
	for _, w := range []struct {
		name string
		at   time.Duration // after dueT0
	}{{"due-b", 3 * time.Second}, {"due-a", 3 * time.Second}, {"due-c", time.Second}, {"due-e", 9 * time.Second}, {"due-d", 2 * time.Second}} {
		p := Partition{Name: w.name}
		ps[w.name] = p
		f.apply(t, p, store.NewBatch().Put(store.Key("timer"), store.Value(w.name)).WakeAt(dueT0.Add(w.at)), store.Committed, "WakeAt in "+w.name)
	}
	return ps, []store.DueEntry{
		dueEntry(t, ps["due-c"], dueT0.Add(time.Second)), dueEntry(t, ps["due-d"], dueT0.Add(2*time.Second)),
		dueEntry(t, ps["due-a"], dueT0.Add(3*time.Second)), dueEntry(t, ps["due-b"], dueT0.Add(3*time.Second)), dueEntry(t, ps["due-e"], dueT0.Add(9*time.Second)),
	}
}

// testScanDue: ScanDue lists the entries whose time lies in [From,
// Until] (both inclusive), bucket by bucket from Start (wrapping), by
// time then identity within a bucket, strictly after the given entry, at
// most Limit at a time, at most PerBucket from each bucket; a query out
// of range is ErrInvalid.
func testScanDue(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	f.wantDue(t, di, store.MaxTime, nil)
	_, all := dueFixturePartitions(t, f)

	f.wantDue(t, di, time.Time{}, nil)
	f.wantDue(t, di, dueT0.Add(999*time.Millisecond), nil)
	f.wantDue(t, di, dueT0.Add(time.Second), all[:1])
	f.wantDue(t, di, dueT0.Add(2999*time.Millisecond), all[:2])
	f.wantDue(t, di, dueT0.Add(3*time.Second), all[:4])
	f.wantDue(t, di, store.MaxTime, all)

	buckets := di.DueBuckets()
	for start := range buckets {
		listing := f.scanDue(t, di, store.DueQuery{Until: store.MaxTime, Start: start, Limit: 1000})
		for i, after := range listing {
			got := f.scanDue(t, di, store.DueQuery{Until: store.MaxTime, Start: start, After: &after, Limit: 2})
			if !sameEntries(got, listing[i+1:]) {
				t.Fatalf("ScanDue from bucket %d after entry %d:\n got %v\nwant %v", start, i, got, listing[i+1:])
			}
		}
		// Resuming after an entry not in the index, in the bucket of the
		// listing's second entry.
		between := store.DueEntry{Bucket: listing[1].Bucket, At: dueT0.Add(2500 * time.Millisecond), Partition: []byte("\x02zzz\x00")}
		q := store.DueQuery{Until: dueT0.Add(3 * time.Second), Start: start, After: &between, Limit: 10}
		var want []store.DueEntry
		for _, e := range listing {
			if !e.At.After(q.Until) && listingOrder(q, buckets, e, between) > 0 {
				want = append(want, e)
			}
		}
		if got := f.scanDue(t, di, q); !sameEntries(got, want) {
			t.Fatalf("ScanDue from bucket %d after an entry not in the index:\n got %v\nwant %v", start, got, want)
		}
		// Some buckets only, from start.
		some := store.DueQuery{Until: store.MaxTime, Start: start, Buckets: 1 + start%buckets, Limit: 3}
		want = slices.DeleteFunc(slices.Clone(listing), func(e store.DueEntry) bool { return some.Offset(e.Bucket, buckets) >= some.Buckets })
		if got := f.scanDue(t, di, some); !sameEntries(got, want) {
			t.Fatalf("ScanDue of %d buckets from %d:\n got %v\nwant %v", some.Buckets, start, got, want)
		}
	}

	// From bounds the times from below.
	got := f.scanDue(t, di, store.DueQuery{From: dueT0.Add(2 * time.Second), Until: dueT0.Add(3 * time.Second), Limit: 2})
	if !sameEntries(byTime(got), all[1:4]) {
		t.Fatalf("ScanDue of [2000, 3000]:\n got %v\nwant %v", byTime(got), all[1:4])
	}
	if got := f.scanDue(t, di, store.DueQuery{From: dueT0.Add(3001 * time.Millisecond), Until: dueT0.Add(3 * time.Second), Limit: 2}); len(got) != 0 {
		t.Fatalf("ScanDue of an empty time range: %v", got)
	}

	// PerBucket: the first entries of each bucket.
	es, err := di.ScanDue(f.ctx, store.DueQuery{Until: store.MaxTime, Limit: 100, PerBucket: 1})
	noErr(t, err, "ScanDue with PerBucket 1")
	firsts := map[int]store.DueEntry{}
	for _, e := range f.scanDue(t, di, store.DueQuery{Until: store.MaxTime, Limit: 100}) {
		if _, ok := firsts[e.Bucket]; !ok {
			firsts[e.Bucket] = e
		}
	}
	if len(es) != len(firsts) {
		t.Fatalf("ScanDue with PerBucket 1 listed %v, want one entry of each of %d buckets", es, len(firsts))
	}
	for _, e := range es {
		if w := firsts[e.Bucket]; !sameEntries([]store.DueEntry{e}, []store.DueEntry{w}) {
			t.Fatalf("ScanDue with PerBucket 1 listed %v in bucket %d, want its first entry %v", e, e.Bucket, w)
		}
	}

	for name, q := range map[string]store.DueQuery{
		"limit 0":                     {Until: dueT0.Add(10 * time.Millisecond)},
		"negative per-bucket limit":   {Until: dueT0.Add(10 * time.Millisecond), Limit: 1, PerBucket: -1},
		"start past the last bucket":  {Until: dueT0.Add(10 * time.Millisecond), Limit: 1, Start: buckets},
		"negative start":              {Until: dueT0.Add(10 * time.Millisecond), Limit: 1, Start: -1},
		"more buckets than the index": {Until: dueT0.Add(10 * time.Millisecond), Limit: 1, Buckets: buckets + 1},
		"after in an unlisted bucket": {Until: dueT0.Add(10 * time.Millisecond), Limit: 1, Buckets: 1, After: &store.DueEntry{Bucket: 1, At: dueT0.Add(time.Millisecond)}},
		"after in no bucket":          {Until: dueT0.Add(10 * time.Millisecond), Limit: 1, After: &store.DueEntry{Bucket: buckets, At: dueT0.Add(time.Millisecond)}},
	} {
		if name == "after in an unlisted bucket" && buckets == 1 {
			continue
		}
		_, err := di.ScanDue(f.ctx, q)
		wantSentinel(t, err, store.ErrInvalid, "ScanDue with "+name)
	}
}

// testScanDueFollowsWakeChanges: once a wake time is lowered, raised or
// cleared, the index lists the partition at its new time only (no entry
// left at the old one) or not at all.
func testScanDueFollowsChanges(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	ps, _ := dueFixturePartitions(t, f)
	f.apply(t, ps["due-e"], store.NewBatch().WakeAt(dueT0.Add(500*time.Millisecond)), store.Committed, "lowering due-e to 500")
	f.apply(t, ps["due-d"], store.NewBatch().SetWake(dueT0.Add(2*time.Second), time.Time{}), store.Committed, "clearing due-d")
	f.apply(t, ps["due-c"], store.NewBatch().SetWake(dueT0.Add(time.Second), dueT0.Add(4*time.Second)), store.Committed, "raising due-c to 4000")
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{
		dueEntry(t, ps["due-e"], dueT0.Add(500*time.Millisecond)), dueEntry(t, ps["due-a"], dueT0.Add(3*time.Second)),
		dueEntry(t, ps["due-b"], dueT0.Add(3*time.Second)), dueEntry(t, ps["due-c"], dueT0.Add(4*time.Second)),
	})
	f.wantWake(t, di, ps["due-d"], time.Time{})
}

// testConcurrentWakeAt: racing WakeAt batches on one partition, each
// worker lowering its times as it goes, leave the earliest of all times
// and one index entry for it; a reader polling meanwhile never sees the
// wake time rise. The race runs in rounds, each ending with that check
// and each handing its earliest time to another worker: a store that
// reads the wake time and sets it unguarded keeps the earliest only when
// that worker happens to write last, round after round.
func testConcurrentWakeAt(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	const rounds, workers, each = 6, 8, 8
	rng := rand.New(rand.NewPCG(5, 8))
	var (
		done atomic.Bool
		wg   sync.WaitGroup
	)
	polled := make(chan int)
	go func() {
		n, last := 0, store.MaxTime
		defer func() { polled <- n }()
		for !done.Load() {
			wake, ok, err := di.NextWake(f.ctx, f.p)
			if err != nil {
				t.Errorf("NextWake: %v", err)
				return
			}
			at := wake
			if ok && at.After(last) {
				t.Errorf("wake time rose from %v to %v under WakeAt alone", last, at)
				return
			}
			if ok {
				last = at
			}
			n++
		}
	}()
	defer func() {
		done.Store(true)
		t.Logf("%d wake time polls during the race", <-polled)
	}()
	next := dueT0.Add(1_000 * time.Second)
	for round := range rounds {
		// Each worker's times fall; the round's earliest goes to worker
		// round%workers.
		times := make([][]time.Time, workers)
		for range each {
			for w := range workers {
				next = next.Add(-time.Duration(10+rng.IntN(10)) * time.Millisecond)
				times[(w+round+1)%workers] = append(times[(w+round+1)%workers], next)
			}
		}
		least := next
		for w := range workers {
			wg.Go(func() {
				for i, at := range times[w] {
					k := store.Key(fmt.Sprintf("timer/%d/%d/%d", round, w, i))
					out, err := f.s.Apply(f.ctx, f.p, store.NewBatch().Put(k, store.Value("t")).WakeAt(at))
					if err != nil || !out.Committed() {
						t.Errorf("round %d worker %d WakeAt(%v): %v, %v", round, w, at, out, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		f.wantWake(t, di, f.p, least)
		f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, f.p, least)})
	}
}

// testConcurrentSetWake races guarded SetWake advances (read the wake
// time, replace it with one more, retry on a failed guard): the final
// wake time counts exactly the committed advances.
func testConcurrentSetWake(t *testing.T, f *fixture) {
	di := f.dueIndex(t)
	const workers, each, maxAttempts = 8, 20, 100_000
	start := dueT0.Add(time.Second)
	f.apply(t, f.p, store.NewBatch().SetWake(time.Time{}, start), store.Committed, "initial wake time")
	var committed, unknown atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				for attempt := 0; ; attempt++ {
					if attempt == maxAttempts {
						t.Errorf("worker %d: no commit in %d attempts", w, maxAttempts)
						return
					}
					wake, _, err := di.NextWake(f.ctx, f.p)
					if err != nil {
						t.Errorf("worker %d: NextWake: %v", w, err)
						return
					}
					at := wake
					out, err := f.s.Apply(f.ctx, f.p, store.NewBatch().SetWake(at, at.Add(time.Millisecond)))
					if errors.Is(err, store.ErrUnknownResult) {
						unknown.Add(1)
						break
					}
					if err != nil || (!out.Committed() && out.Failed.Op != store.MustWakeAt) {
						t.Errorf("worker %d: SetWake(%v, %v): %v, %v", w, at, at.Add(time.Millisecond), out, err)
						return
					}
					if out.Committed() {
						committed.Add(1)
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	final, c, u := int64(f.wake(t, di, f.p).Sub(start)/time.Millisecond), committed.Load(), unknown.Load()
	if c+u != workers*each {
		t.Fatalf("%d committed + %d unknown advances, want %d", c, u, workers*each)
	}
	if final < c || final > c+u {
		t.Fatalf("wake time advanced %d for %d committed advances (%d unknown)", final, c, u)
	}
}

// samePrecondition reports whether a and b are the same precondition.
func samePrecondition(a, b store.Precondition) bool {
	return a.Op == b.Op && bytes.Equal(a.Key, b.Key) && sameValue(a.Value, b.Value) && a.Wake.Equal(b.Wake)
}
