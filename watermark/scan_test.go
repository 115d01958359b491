package watermark_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/dispatch/dispatchgen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/watermark"
)

// putLeases writes n leases (queues 0..n-1) with watermarks from
// rng, in batches the store accepts, and returns their minimum.
func (e *env) putLeases(t testing.TB, n int, rng *rand.Rand) time.Time {
	t.Helper()
	least := uint64(1 << 63)
	b := store.NewBatch()
	for i := range n {
		w := 1_000 + rng.Uint64N(1_000_000)
		least = min(least, w)
		b.Put(leaseKey(i), lease(t, w, 2_000_000))
		if b.Ops() == 100 || i == n-1 {
			e.apply(t, coordinator, b)
			b = store.NewBatch()
		}
	}
	return store.DecodeTime(least)
}

// TestWatermarkIsTheMinimumOverEveryPage: over several pages, the
// watermark is the least lease watermark, capped by now, and Step's
// pages give the same as Watermark's whatever the page size.
func TestWatermarkIsTheMinimumOverEveryPage(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		if got, err := table.Watermark(e.ctx, e.s, coordinator, t0.Add(500*time.Millisecond)); err != nil || !got.Equal(t0.Add(500*time.Millisecond)) {
			t.Fatalf("empty table: %v, %v; want now, 500ms after the epoch", got, err)
		}
		least := e.putLeases(t, 3*watermark.PageSize+5, rand.New(rand.NewPCG(1, 2)))
		scans := e.s.Calls(storetest.MethodScan)
		got, err := table.Watermark(e.ctx, e.s, coordinator, t0.Add(5000*time.Second))
		if err != nil || !got.Equal(least) {
			t.Fatalf("watermark %v, %v; want the least lease watermark %v", got, err, least)
		}
		if pages := e.s.Calls(storetest.MethodScan) - scans; pages != 4 {
			t.Fatalf("%d pages of %d rows for %d leases; want 4", pages, watermark.PageSize, 3*watermark.PageSize+5)
		}
		if got, err := table.Watermark(e.ctx, e.s, coordinator, least.Add(-time.Millisecond)); err != nil || !got.Equal(least.Add(-time.Millisecond)) {
			t.Fatalf("now below every lease: %v, %v; want %v", got, err, least.Add(-time.Millisecond))
		}
		for _, limit := range []int{-1, 0, 1, 7, 1000} {
			t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
				var cp *checkpoint
				steps := 0
				for {
					next, value, err := e.step(t0.Add(5000*time.Second), cp, limit)
					if err != nil {
						t.Fatal(err)
					}
					steps++
					if next == nil {
						if !value.Equal(least) {
							t.Fatalf("watermark %v; want %v", value, least)
						}
						break
					}
					cp = next
				}
				if want := (3*watermark.PageSize + 5 + max(limit, 1) - 1) / max(limit, 1); steps != want && steps != want+1 {
					t.Fatalf("%d steps at limit %d; want %d (or one more for an empty last page)", steps, limit, want)
				}
			})
		}
	})
}

// TestActiveShardsListsEveryShardOnce: paging through ActiveShards lists
// every leased shard once, in key order, as the table's Shard makes them
// (queues of the dispatcher's region); expired leases are listed too.
func TestActiveShardsListsEveryShardOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		const n = 23
		want := map[dispatchgen.QueuePartition]bool{}
		for i := range n {
			e.putLease(t, i, 10, uint64(i)) // expiries long past
			want[queue(i)] = true
		}
		var cursor store.Cursor
		var last []byte
		seen := 0
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("the listing does not end")
			}
			page, err := table.ActiveShards(e.ctx, e.s, coordinator, cursor, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Shards) > 5 {
				t.Fatalf("page of %d shards at limit 5", len(page.Shards))
			}
			for _, p := range page.Shards {
				if !want[p] {
					t.Fatalf("listed %s: not a leased shard, or listed twice", p)
				}
				delete(want, p)
				seen++
				k := leaseKey(int(p.Queue))
				if string(k) <= string(last) {
					t.Fatalf("%s listed out of key order", p)
				}
				last = k
			}
			if page.Next == nil {
				break
			}
			cursor = page.Next
		}
		if seen != n || len(want) != 0 {
			t.Fatalf("listed %d shards, missed %v", seen, want)
		}
	})
}

// TestScansFailClosed: a lease row whose key or value does not decode
// fails Step and ActiveShards with store.ErrCorrupt, wherever in the
// scan it is; a recovering table fails them with ErrRecovering.
func TestScansFailClosed(t *testing.T) {
	start, _ := dispatchgen.ClassRange(dispatchgen.TagQueueLeaseKey)
	cases := []struct {
		name  string
		key   store.Key
		value func(t testing.TB) store.Value
		says  []string
	}{
		{"key with its field missing", append([]byte{}, start...), func(t testing.TB) store.Value { return lease(t, 1, 1) }, []string{"QueueLeaseKey"}},
		{"key of a queue out of range", tuple.AppendUint(append([]byte{}, start...), 1<<32), func(t testing.TB) store.Value { return lease(t, 1, 1) }, []string{"QueueLeaseKey", "Queue"}},
		{"key of a field of another type", tuple.AppendString(append([]byte{}, start...), "q5"), func(t testing.TB) store.Value { return lease(t, 1, 1) }, []string{"QueueLeaseKey"}},
		{"value of another record", nil, func(t testing.TB) store.Value { return reconciled(t, 1) }, []string{"QueueLeaseV1", "shard queue(north,5)"}},
		{"value truncated", nil, func(t testing.TB) store.Value { v := lease(t, 1, 1); return v[:len(v)-1] }, []string{"truncated", "shard queue(north,5)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			e.putLeases(t, 10, rand.New(rand.NewPCG(3, 4)))
			key := c.key
			if key == nil {
				key = leaseKey(5)
			}
			e.apply(t, coordinator, store.NewBatch().Put(key, c.value(t)))
			_, err := table.Watermark(e.ctx, e.s, coordinator, t0.Add(100*time.Millisecond))
			requireErr(t, err, []error{store.ErrCorrupt}, append([]string{"lease table of dispatcher(north)"}, c.says...)...)
			var cursor store.Cursor
			for {
				page, err := table.ActiveShards(e.ctx, e.s, coordinator, cursor, 3)
				if err != nil {
					requireErr(t, err, []error{store.ErrCorrupt}, c.says...)
					break
				}
				if page.Next == nil {
					t.Fatal("ActiveShards listed every page past a corrupt row")
				}
				cursor = page.Next
			}
		})
	}
	t.Run("recovering", func(t *testing.T) {
		e := newEnv(t, testengine.Memory)
		e.putLeases(t, 10, rand.New(rand.NewPCG(5, 6)))
		e.apply(t, coordinator, store.NewBatch().Put(recoveryKey, recovery(t, 100)))
		scans := e.s.Calls(storetest.MethodScan)
		_, _, err := e.step(t0.Add(200*time.Millisecond), nil, 3)
		requireErr(t, err, []error{watermark.ErrRecovering})
		_, err = table.ActiveShards(e.ctx, e.s, coordinator, nil, 3)
		requireErr(t, err, []error{watermark.ErrRecovering})
		if e.s.Calls(storetest.MethodScan) != scans {
			t.Fatal("a recovering table was scanned")
		}
	})
}

// TestStepRejectsAForgedCursor: a checkpoint whose cursor the store did
// not issue for this table fails with store.ErrInvalid: the scan never
// restarts silently.
func TestStepRejectsAForgedCursor(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		e.putLease(t, 0, 40, 200)
		e.putLease(t, 1, 50, 200)
		rec, err := gen.DecodeWatermarkCheckpoint(mustEncode(t, e.mustPending(t, t0.Add(100*time.Millisecond), nil, 1)))
		if err != nil {
			t.Fatal(err)
		}
		rec.Cursor[len(rec.Cursor)-1] ^= 1 // the record aliases mustEncode's bytes, no one else's
		_, _, err = e.step(t0.Add(100*time.Millisecond), mustDecode(t, encodeRecord(t, rec)), 1)
		requireErr(t, err, []error{store.ErrInvalid}, "scan lease table of dispatcher(north)")
	})
}

// TestStepPassesStoreFailuresOn: a failed read fails the step with the
// store's error, at each of its reads.
func TestStepPassesStoreFailuresOn(t *testing.T) {
	for _, c := range []struct {
		name string
		m    storetest.Method
		nth  int
	}{
		{"markers", storetest.MethodGetMany, 1},
		{"page", storetest.MethodScan, 1},
		{"markers after the last page", storetest.MethodGetMany, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testengine.Memory)
			e.putLease(t, 0, 40, 200)
			e.s.FailNth(c.m, c.nth, nil)
			next, value, err := e.step(t0.Add(100*time.Millisecond), nil, 10)
			if next != nil || !value.IsZero() {
				t.Fatalf("failed step returned %v, %v", next, value)
			}
			requireErr(t, err, []error{storetest.ErrInjected, store.ErrUnavailable})
		})
	}
}

// TestACheckpointIsSafeToShare: goroutines resuming one Checkpoint at once,
// while another writes leases behind and ahead of its cursor, each finish
// the scan, and none reads below the scan's ceiling a row written behind
// the cursor. Run with -race.
func TestACheckpointIsSafeToShare(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		const shards = 40
		e.putLeases(t, shards, rand.New(rand.NewPCG(7, 8)))
		e.putLease(t, 20, 50, 200) // the least, ahead of the cursor
		checkpoint := e.mustPending(t, t0.Add(100*time.Millisecond), nil, 10)
		var wg sync.WaitGroup
		results := make([]time.Time, 8)
		errs := make([]error, len(results))
		for i := range results {
			wg.Go(func() {
				cp := checkpoint
				for {
					next, value, err := table.Step(e.ctx, e.s, coordinator, t0.Add(time.Second), cp, 7)
					if err != nil || next == nil {
						results[i], errs[i] = value, err
						return
					}
					cp = next
				}
			})
		}
		// Behind the cursor, never read: the first page of 10 rows is, in
		// key order, queues 0 to 9.
		behind := store.NewBatch()
		for _, n := range []int{0, 1, 5, 8, 9} {
			behind.Put(leaseKey(n), lease(t, 10, 200))
		}
		wg.Go(func() {
			if out, err := e.s.Inner().Apply(e.ctx, coordinator, behind); err != nil || !out.Committed() {
				t.Errorf("write behind the cursor: %v, %v", out, err)
			}
		})
		wg.Wait()
		for i, got := range results {
			if errs[i] != nil || !got.Equal(t0.Add(50*time.Millisecond)) {
				t.Errorf("goroutine %d: watermark %v, %v; want 50ms after the epoch", i, got, errs[i])
			}
		}
	})
}
