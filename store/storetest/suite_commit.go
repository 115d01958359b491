package storetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// The commit checks run against stores that implement store.Committer;
// others skip them.
var commitChecks = []check{
	{"EveryBatchLands", testCommitEveryBatch},
	{"FailedGuardInAnyBatchWritesNothing", testCommitFailedGuard},
	{"DeadlineInAnyBatchWritesNothing", testCommitDeadline},
	{"LimitsInvalid", testCommitLimits},
	{"WakeupsPerPartition", testCommitWakeups},
	{"TransactManyReadsAndCommits", testTransactMany},
	{"ConcurrentTransfersConserve", testCommitConcurrent},
}

// committer returns the store's Committer, skipping t when it has none.
func (f *fixture) committer(t testing.TB) store.Committer {
	t.Helper()
	c, ok := f.s.(store.Committer)
	if !ok {
		t.Skip("the store is not a store.Committer")
	}
	return c
}

// commitParts returns n partitions of the fixture's store, distinct from
// f.p and f.other.
func commitParts(n int) []store.Partition {
	ps := make([]store.Partition, n)
	for i := range ps {
		ps[i] = Partition{Name: fmt.Sprintf("commit-%03d", i)}
	}
	return ps
}

// testCommitEveryBatch: a commit whose guards all hold lands every batch,
// puts and deletes, each in its own partition.
func testCommitEveryBatch(t *testing.T, f *fixture) {
	c := f.committer(t)
	ps := commitParts(3)
	f.put(t, ps[1], "old", "v0")
	out, err := c.Commit(f.ctx, []store.PartitionBatch{
		{Partition: ps[0], Batch: store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("k"), store.Value("a"))},
		{Partition: ps[1], Batch: store.NewBatch().Require(store.Equals(store.Key("old"), store.Value("v0"))).Delete(store.Key("old")).Put(store.Key("new"), store.Value{})},
		{Partition: ps[2], Batch: store.NewBatch().Put(store.Key("k"), store.Value("c")).Put(store.Key("k"), store.Value("last"))},
	})
	noErr(t, err, "Commit")
	if !out.Committed() {
		t.Fatalf("Commit: outcome %v, want committed", out)
	}
	f.wantRows(t, ps[0], rows("k", "a"))
	f.wantRows(t, ps[1], rows("new", ""))
	f.wantRows(t, ps[2], rows("k", "last"))
}

// testCommitFailedGuard: a failed precondition in any batch, the first,
// a middle or the last, fails the whole commit, naming that batch, its
// partition and its precondition, and nothing of any batch lands.
func testCommitFailedGuard(t *testing.T, f *fixture) {
	c := f.committer(t)
	ps := commitParts(3)
	for _, p := range ps {
		f.put(t, p, "guard", "g")
	}
	for failing := range ps {
		batches := make([]store.PartitionBatch, len(ps))
		for i, p := range ps {
			b := store.NewBatch().Require(store.Absent(store.Key("fresh")), store.Equals(store.Key("guard"), store.Value("g"))).
				Put(store.Key("fresh"), store.Value("x")).Delete(store.Key("guard"))
			if i == failing {
				b.Preconditions[1] = store.Equals(store.Key("guard"), store.Value("not-g"))
			}
			batches[i] = store.PartitionBatch{Partition: p, Batch: b}
		}
		out, err := c.Commit(f.ctx, batches)
		noErr(t, err, fmt.Sprintf("Commit failing batch %d", failing))
		if out.Outcome != store.PreconditionFailed || out.Index != failing || out.Partition != batches[failing].Partition {
			t.Fatalf("Commit failing batch %d: outcome %v (index %d, partition %v), want batch %d's precondition failed",
				failing, out, out.Index, out.Partition, failing)
		}
		wantFailedAt(t, out.BatchOutcome, batches[failing].Batch, 1)
		for _, p := range ps {
			f.wantRows(t, p, rows("guard", "g"))
		}
	}
}

// testCommitDeadline: a batch whose deadline passed, wherever it stands,
// fails the whole commit with DeadlinePassed naming it.
func testCommitDeadline(t *testing.T, f *fixture) {
	c := f.committer(t)
	ps := commitParts(2)
	out, err := c.Commit(f.ctx, []store.PartitionBatch{
		{Partition: ps[0], Batch: store.NewBatch().Put(store.Key("k"), store.Value("v")).WithDeadline(suiteEpoch.Add(time.Hour))},
		{Partition: ps[1], Batch: store.NewBatch().Put(store.Key("k"), store.Value("v")).WithDeadline(suiteEpoch.Add(-time.Millisecond))},
	})
	noErr(t, err, "Commit with a past deadline")
	if out.Outcome != store.DeadlinePassed || out.Index != 1 || out.Partition != ps[1] {
		t.Fatalf("Commit with batch 1's deadline passed: outcome %v (index %d), want deadline passed in batch 1", out, out.Index)
	}
	f.wantRows(t, ps[0], nil)
	f.wantRows(t, ps[1], nil)
}

// testCommitLimits: a commit of several batches is bounded by
// MaxCommitBatches, MaxCommitOps and MaxCommitBytes, each inclusive;
// past one, or empty, or naming a partition twice, or holding an invalid
// batch, it fails with ErrInvalid and writes nothing.
func testCommitLimits(t *testing.T, f *fixture) {
	c := f.committer(t)
	caps := f.s.Capabilities()
	if caps.MaxCommitBatches < 2 {
		t.Skip("the store commits one partition at a time (MaxCommitBatches < 2)")
	}
	one := func() *store.Batch { return store.NewBatch().Put(store.Key("k"), store.Value("v")) }
	many := func(n int) []store.PartitionBatch {
		var bs []store.PartitionBatch
		for _, p := range commitParts(n) {
			bs = append(bs, store.PartitionBatch{Partition: p, Batch: one()})
		}
		return bs
	}
	rejects := func(bs []store.PartitionBatch, what string) {
		t.Helper()
		out, err := c.Commit(f.ctx, bs)
		wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("Commit of %s (outcome %v)", what, out))
	}
	if caps.MaxCommitOps >= caps.MaxCommitBatches {
		out, err := c.Commit(f.ctx, many(caps.MaxCommitBatches))
		noErr(t, err, fmt.Sprintf("Commit of MaxCommitBatches (%d) batches", caps.MaxCommitBatches))
		if !out.Committed() {
			t.Fatalf("Commit of MaxCommitBatches batches: %v", out)
		}
		for _, pb := range many(caps.MaxCommitBatches) {
			f.wantRows(t, pb.Partition, rows("k", "v"))
		}
	}
	fresh := Partition{Name: "commit-fresh"}
	over := append(many(caps.MaxCommitBatches), store.PartitionBatch{Partition: fresh, Batch: one()})
	rejects(over, fmt.Sprintf("MaxCommitBatches+1 (%d) batches", len(over)))
	// MaxCommitOps+1 operations in two batches.
	opsBatches := func(total int) []store.PartitionBatch {
		var bs []store.PartitionBatch
		for i := 0; total > 0; i++ {
			b := store.NewBatch()
			for j := 0; j < opsLimit(caps)-caps.ReservedBatchOps && total > 0; j, total = j+1, total-1 {
				b.Put(store.Key(fmt.Sprintf("o/%04d", j)), store.Value{})
			}
			bs = append(bs, store.PartitionBatch{Partition: Partition{Name: fmt.Sprintf("commit-ops-%03d", i)}, Batch: b})
		}
		return bs
	}
	if bs := opsBatches(caps.MaxCommitOps + 1); bs != nil && len(bs) > 1 && len(bs) <= caps.MaxCommitBatches {
		rejects(bs, fmt.Sprintf("MaxCommitOps+1 (%d) operations", caps.MaxCommitOps+1))
	}
	// MaxCommitBytes+1 bytes in batches of values as large as allowed.
	if bs := bytesBatches(caps, caps.MaxCommitBytes+1); len(bs) > 1 && len(bs) <= caps.MaxCommitBatches {
		rejects(bs, fmt.Sprintf("MaxCommitBytes+1 (%d) bytes", caps.MaxCommitBytes+1))
		exact := bytesBatches(caps, caps.MaxCommitBytes)
		out, err := c.Commit(f.ctx, exact)
		noErr(t, err, fmt.Sprintf("Commit of MaxCommitBytes (%d) bytes", caps.MaxCommitBytes))
		if !out.Committed() {
			t.Fatalf("Commit of MaxCommitBytes bytes: %v", out)
		}
	}
	rejects(nil, "no batch")
	rejects([]store.PartitionBatch{{Partition: fresh, Batch: one()}, {Partition: Partition{Name: "commit-fresh"}, Batch: one()}}, "one partition twice")
	rejects([]store.PartitionBatch{{Partition: fresh, Batch: one()}, {Partition: Partition{Name: "commit-fresh-2"}, Batch: store.NewBatch()}}, "an empty batch")
	rejects([]store.PartitionBatch{{Partition: fresh, Batch: one()}, {Partition: Partition{Name: "commit-fresh-2"}, Batch: nil}}, "a nil batch")
	f.wantRows(t, fresh, nil)
	f.wantRows(t, Partition{Name: "commit-fresh-2"}, nil)
}

// bytesBatches returns batches of puts whose Bytes sum to total, in as
// few batches as the per-batch limits allow (nil when more than
// MaxCommitBatches would be needed, or MaxCommitOps passed).
func bytesBatches(caps store.Capabilities, total int) []store.PartitionBatch {
	const keyLen = 6 // "b/%04d"
	vmax := min(caps.MaxValueBytes, caps.MaxBatchBytes-keyLen)
	// At least two batches: half the total each, at most.
	perBatch := min(caps.MaxBatchBytes, (total+1)/2)
	var bs []store.PartitionBatch
	ops := 0
	for n := 0; total > 0; n++ {
		if n >= caps.MaxCommitBatches {
			return nil
		}
		b := store.NewBatch()
		for j := 0; total > 0 && b.Ops() < opsLimit(caps)-caps.ReservedBatchOps; j++ {
			room := perBatch - b.Bytes() - keyLen
			if room < 1 {
				break
			}
			v := min(vmax, room, total-keyLen)
			if v < 0 {
				// Fewer bytes left than a key: a shorter key takes them.
				b.Put(store.Key(strings.Repeat("k", total)), store.Value{})
				total = 0
				break
			}
			b.Put(store.Key(fmt.Sprintf("b/%04d", j)), make(store.Value, v))
			total -= keyLen + v
		}
		ops += b.Ops()
		bs = append(bs, store.PartitionBatch{Partition: Partition{Name: fmt.Sprintf("commit-bytes-%03d", n)}, Batch: b})
	}
	if ops > caps.MaxCommitOps {
		return nil
	}
	return bs
}

// testCommitWakeups: each batch's Wakeup changes its own partition's wake
// time and due index entry, as Apply's would, and a failed WakeIs in one
// batch leaves every partition's wake time as it was.
func testCommitWakeups(t *testing.T, f *fixture) {
	c := f.committer(t)
	di := f.dueIndex(t)
	ps := commitParts(2)
	at0, at1 := dueT0.Add(5*time.Second), dueT0.Add(9*time.Second)
	out, err := c.Commit(f.ctx, []store.PartitionBatch{
		{Partition: ps[0], Batch: store.NewBatch().Put(store.Key("t"), store.Value("x")).WakeAt(at0)},
		{Partition: ps[1], Batch: store.NewBatch().Put(store.Key("t"), store.Value("y")).WakeAt(at1)},
	})
	noErr(t, err, "Commit with wakeups")
	if !out.Committed() {
		t.Fatalf("Commit with wakeups: %v", out)
	}
	f.wantWake(t, di, ps[0], at0)
	f.wantWake(t, di, ps[1], at1)
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, ps[0], at0), dueEntry(t, ps[1], at1)})
	out, err = c.Commit(f.ctx, []store.PartitionBatch{
		{Partition: ps[0], Batch: store.NewBatch().SetWake(at0, dueT0.Add(time.Minute))},
		{Partition: ps[1], Batch: store.NewBatch().SetWake(at0, time.Time{})}, // its wake time is at1
	})
	noErr(t, err, "Commit with a failing WakeIs")
	if out.Outcome != store.PreconditionFailed || out.Index != 1 || out.Failed.Op != store.MustWakeAt {
		t.Fatalf("Commit with batch 1's WakeIs failing: %v (index %d), want batch 1's wake guard failed", out, out.Index)
	}
	f.wantWake(t, di, ps[0], at0)
	f.wantWake(t, di, ps[1], at1)
	f.wantDue(t, di, store.MaxTime, []store.DueEntry{dueEntry(t, ps[0], at0), dueEntry(t, ps[1], at1)})
}

// testTransactMany: TransactManyOnce hands the function a Reader bound to
// each partition, in order, and commits the batches it builds from what
// it read together; a nil batch leaves its partition alone; a failed
// guard is named by its partition's index among those given.
func testTransactMany(t *testing.T, f *fixture) {
	c := f.committer(t)
	ps := commitParts(3)
	f.put(t, ps[0], "n", "1")
	f.put(t, ps[2], "n", "3")
	out, err := c.TransactManyOnce(f.ctx, ps, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
		if len(rs) != len(ps) {
			return nil, fmt.Errorf("%d readers for %d partitions", len(rs), len(ps))
		}
		bs := make([]*store.Batch, len(ps))
		for i, r := range rs {
			if r.Partition() != ps[i] {
				return nil, fmt.Errorf("reader %d of %v, want %v", i, r.Partition(), ps[i])
			}
			v, ok, err := r.Get(ctx, store.Key("n"))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // nothing to write here
			}
			bs[i] = store.NewBatch().Require(store.Equals(store.Key("n"), v)).Put(store.Key("n"), append(v, '+'))
		}
		return bs, nil
	})
	noErr(t, err, "TransactManyOnce")
	if !out.Committed() {
		t.Fatalf("TransactManyOnce: %v", out)
	}
	f.wantRows(t, ps[0], rows("n", "1+"))
	f.wantRows(t, ps[1], nil)
	f.wantRows(t, ps[2], rows("n", "3+"))
	out, err = c.TransactManyOnce(f.ctx, ps, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
		return []*store.Batch{nil, nil, store.NewBatch().Require(store.Absent(store.Key("n"))).Put(store.Key("n"), store.Value("x"))}, nil
	})
	noErr(t, err, "TransactManyOnce with a failing guard")
	if out.Outcome != store.PreconditionFailed || out.Index != 2 || out.Partition != ps[2] {
		t.Fatalf("TransactManyOnce failing the third partition's guard: %v (index %d), want index 2", out, out.Index)
	}
	out, err = c.TransactManyOnce(f.ctx, ps, func(context.Context, []store.Reader) ([]*store.Batch, error) { return nil, nil })
	noErr(t, err, "TransactManyOnce with nothing to write")
	if out.Outcome != 0 {
		t.Fatalf("TransactManyOnce with nothing to write: outcome %v, want the zero outcome", out)
	}
	f.wantRows(t, ps[2], rows("n", "3+"))
}

// testCommitConcurrent: concurrent TransactMany calls, each moving one
// unit from one partition's counter to another's in one commit, never
// lose or make a unit: the counters' sum stays what it was.
func testCommitConcurrent(t *testing.T, f *fixture) {
	f.committer(t)
	const parts, workers, moves, start = 4, 8, 15, 1000
	ps := commitParts(parts)
	enc := func(n uint64) store.Value { return binary.BigEndian.AppendUint64(nil, n) }
	for _, p := range ps {
		f.put(t, p, "n", string(enc(start)))
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range moves {
				from, to := ps[(w+j)%parts], ps[(w+j+1)%parts]
				_, err := store.TransactMany(f.ctx, f.s, []store.Partition{from, to}, func(ctx context.Context, rs []store.Reader) ([]*store.Batch, error) {
					bs := make([]*store.Batch, 2)
					for i, d := range []int64{-1, 1} {
						v, ok, err := rs[i].Get(ctx, store.Key("n"))
						if err != nil {
							return nil, err
						}
						if !ok || len(v) != 8 {
							return nil, fmt.Errorf("counter of %v: %q", rs[i].Partition(), v)
						}
						bs[i] = store.NewBatch().Require(store.Equals(store.Key("n"), v)).Put(store.Key("n"), enc(uint64(int64(binary.BigEndian.Uint64(v))+d)))
					}
					return bs, nil
				}, store.TransactConfig{Retries: 1000, MinBackoff: -1})
				if err != nil {
					t.Errorf("worker %d move %d: %v", w, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var sum uint64
	for _, p := range ps {
		v := f.get(t, p, store.Key("n"))
		sum += binary.BigEndian.Uint64(v)
	}
	if sum != parts*start {
		t.Fatalf("the counters sum to %d after the transfers, want %d", sum, parts*start)
	}
}
