package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// The transaction checks run against stores that implement
// store.Transactor; others skip them.
var transactChecks = []check{
	{"ReadsAndBatchInOneTransaction", testTransactReadsAndBatch},
	{"ReadsAreOneSnapshot", testTransactSnapshot},
	{"WriterBetweenReadAndCommitRerunsFn", testTransactRerun},
	{"FnErrorWritesNothing", testTransactFnError},
	{"NothingToWrite", testTransactNothing},
	{"PreconditionFailedWritesNothing", testTransactPrecondition},
	{"DeadlinePassedWritesNothing", testTransactDeadline},
	{"Wakeups", testTransactWakeups},
	{"EndedContextFails", testTransactContext},
	{"NestedCallFailsNotDeadlocks", testTransactNested},
	{"InvalidBatchWritesNothing", testTransactInvalid},
	{"ReadsWithinBudget", testTransactReadBudget},
	{"ReaderEndsWithFn", testTransactReaderEnds},
	{"ConcurrentIncrementsAllLand", testTransactConcurrent},
}

// overlapWait bounds how long a transaction function waits for a writer
// it started: a store whose transactions overlap lets the writer commit
// at once; one whose writers serialize holds it until the function's
// transaction ends, and the function goes on when the wait runs out.
// Either is correct, and the checks hold the store to what it did; the
// wait only has to be long enough for an overlapping writer to commit.
const overlapWait = time.Second

// transactor returns the store's Transactor, skipping t when it has none.
func (f *fixture) transactor(t testing.TB) store.Transactor {
	t.Helper()
	tr, ok := f.s.(store.Transactor)
	if !ok {
		t.Skip("the store is not a store.Transactor")
	}
	return tr
}

// transact runs fn once through tr and fails t unless it reports want
// without an error.
func (f *fixture) transact(t testing.TB, tr store.Transactor, fn store.TransactFunc, want store.Outcome, what string) store.BatchOutcome {
	t.Helper()
	out, err := tr.TransactOnce(f.ctx, f.p, fn)
	noErr(t, err, what)
	if out.Outcome != want {
		t.Fatalf("%s: outcome %v, want %v", what, out, want)
	}
	return out
}

// testTransactReadsAndBatch: the function reads through a Reader bound to
// the partition (Get, GetMany, Scan, each as the Store's would), and the
// batch built from what it read lands whole, in the same call.
func testTransactReadsAndBatch(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	f.put(t, f.p, "a", "1", "b", "2", "c", "3")
	f.put(t, f.other, "a", "other")
	f.transact(t, tr, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		if r.Partition() != store.Partition(f.p) {
			return nil, fmt.Errorf("Reader of %v, want %v", r.Partition(), f.p)
		}
		a, ok, err := r.Get(ctx, store.Key("a"))
		if err != nil || !ok || string(a) != "1" {
			return nil, fmt.Errorf("Get(a) = %q, %v, %v", a, ok, err)
		}
		vs, err := r.GetMany(ctx, keys("b", "missing", "c"))
		if err != nil || len(vs) != 3 || string(vs[0]) != "2" || vs[1] != nil || string(vs[2]) != "3" {
			return nil, fmt.Errorf("GetMany = %q, %v", vs, err)
		}
		page, err := r.Scan(ctx, store.Key("a"), store.Key("c"), nil, 1)
		if err != nil || !sameRows(page.Entries, rows("a", "1")) || page.Next == nil {
			return nil, fmt.Errorf("Scan page 1 = %s, %x, %v", showRows(page.Entries), page.Next, err)
		}
		page, err = r.Scan(ctx, store.Key("a"), store.Key("c"), page.Next, 5)
		if err != nil || !sameRows(page.Entries, rows("b", "2")) || page.Next != nil {
			return nil, fmt.Errorf("Scan page 2 = %s, %x, %v", showRows(page.Entries), page.Next, err)
		}
		return store.NewBatch().
			Require(store.Equals(store.Key("a"), a), store.Absent(store.Key("missing"))).
			Put(store.Key("sum"), store.Value(string(a)+string(vs[0])+string(vs[2]))).
			Delete(store.Key("a")), nil
	}, store.Committed, "read a, b, c; put their sum, delete a")
	f.wantRows(t, f.p, rows("b", "2", "c", "3", "sum", "123"))
	f.wantRows(t, f.other, rows("a", "other"))
}

// startWriter applies b to p in a goroutine, after the store let it, and
// returns a channel closed when it has (its error checked on t).
func (f *fixture) startWriter(t testing.TB, p store.Partition, b *store.Batch) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, err := f.s.Apply(f.ctx, p, b)
		if err != nil || !out.Committed() {
			t.Errorf("concurrent writer: %v, %v", out, err)
		}
	}()
	return done
}

// waitOverlap waits for done at most overlapWait and reports whether it
// came: whether the writer committed during the transaction.
func waitOverlap(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-time.After(overlapWait):
		return false
	}
}

// testTransactSnapshot: every run of the function reads one snapshot: a
// writer that changes two rows together between its two reads is seen in
// both or in neither, and the batch commits only on a snapshot no writer
// changed before the commit.
func testTransactSnapshot(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	f.put(t, f.p, "x", "0", "y", "0")
	var (
		runs    int
		torn    []string
		written <-chan struct{}
	)
	f.transact(t, tr, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		runs++
		x, _, err := r.Get(ctx, store.Key("x"))
		if err != nil {
			return nil, err
		}
		if written == nil {
			written = f.startWriter(t, f.p, store.NewBatch().Put(store.Key("x"), store.Value("1")).Put(store.Key("y"), store.Value("1")))
			waitOverlap(written)
		}
		y, _, err := r.Get(ctx, store.Key("y"))
		if err != nil {
			return nil, err
		}
		if string(x) != string(y) {
			torn = append(torn, fmt.Sprintf("run %d read x=%s, y=%s", runs, x, y))
		}
		return store.NewBatch().Require(store.Equals(store.Key("x"), x)).Put(store.Key("seen"), x), nil
	}, store.Committed, "read x, a writer changes x and y, read y")
	<-written
	t.Logf("the function ran %d times", runs)
	if torn != nil {
		t.Fatalf("a run read a torn state: %v", torn)
	}
	// The writer committed x = y = 1 before or after the transaction;
	// either way the transaction saw the state its commit landed on.
	seen := f.get(t, f.p, store.Key("seen"))
	if runs == 1 && string(seen) != "0" || runs > 1 && string(seen) != "1" {
		t.Fatalf("after %d runs, seen = %q", runs, seen)
	}
}

// testTransactRerun: a writer that changes a row the function read,
// between the read and the commit, never has its change overwritten by
// a batch built on the old value: the store either holds the writer back
// until the commit (its writes serialize) or runs the function again on
// the new value (its transactions overlap). Two unguarded increments of
// one counter, the function's and the writer's, both count.
func testTransactRerun(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	f.put(t, f.p, "n", "0")
	var (
		runs    int
		seen    []string
		written <-chan struct{}
		overlap bool
	)
	f.transact(t, tr, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		runs++
		v, _, err := r.Get(ctx, store.Key("n"))
		if err != nil {
			return nil, err
		}
		seen = append(seen, string(v))
		if written == nil {
			written = f.incrementer(t)
			overlap = waitOverlap(written)
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return nil, err
		}
		return store.NewBatch().Put(store.Key("n"), store.Value(strconv.Itoa(n+1))), nil
	}, store.Committed, "read n, a writer increments n, put n+1")
	<-written
	t.Logf("the writer committed during the transaction: %v; the function ran %d times, reading %v", overlap, runs, seen)
	f.wantValue(t, f.p, store.Key("n"), store.Value("2"))
	if overlap && (runs < 2 || seen[len(seen)-1] != "1") {
		t.Fatalf("the writer committed during the transaction, but the function ran %d times, reading %v: it committed on a stale read", runs, seen)
	}
}

// incrementer starts a writer that adds one to row "n", guarded by what
// it read, retrying on a failed guard; the channel closes when it landed.
func (f *fixture) incrementer(t testing.TB) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for attempt := 0; attempt < 100; attempt++ {
			v, _, err := f.s.Get(f.ctx, f.p, store.Key("n"))
			if err != nil {
				t.Errorf("incrementer: %v", err)
				return
			}
			n, err := strconv.Atoi(string(v))
			if err != nil {
				t.Errorf("incrementer: %v", err)
				return
			}
			out, err := f.s.Apply(f.ctx, f.p, store.NewBatch().Require(store.Equals(store.Key("n"), v)).Put(store.Key("n"), store.Value(strconv.Itoa(n+1))))
			if err != nil {
				t.Errorf("incrementer: %v", err)
				return
			}
			if out.Committed() {
				return
			}
		}
		t.Errorf("incrementer: no commit in 100 attempts")
	}()
	return done
}

var errTransactFn = errors.New("transaction function says no")

// testTransactFnError: the function's error comes back as it is, and
// nothing of its batch is written.
func testTransactFnError(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	out, err := tr.TransactOnce(f.ctx, f.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		if _, _, err := r.Get(ctx, store.Key("k")); err != nil {
			return nil, err
		}
		return store.NewBatch().Put(store.Key("k"), store.Value("v")), errTransactFn
	})
	if err != errTransactFn || out.Outcome != 0 {
		t.Fatalf("TransactOnce = %v, %v; want the function's error as it is", out, err)
	}
	f.wantRows(t, f.p, nil)
}

// testTransactNothing: a nil or empty batch writes nothing and reports the
// zero outcome.
func testTransactNothing(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	for _, b := range []*store.Batch{nil, store.NewBatch()} {
		out, err := tr.TransactOnce(f.ctx, f.p, func(context.Context, store.Reader) (*store.Batch, error) { return b, nil })
		if err != nil || out.Outcome != 0 {
			t.Fatalf("TransactOnce of %v = %v, %v; want the zero outcome", b, out, err)
		}
	}
	f.wantRows(t, f.p, nil)
}

// testTransactPrecondition: the batch's preconditions are checked as
// Apply checks them, on keys the function read and keys it did not: the
// first that fails is named, nothing is written, and the store does not
// run the function again for it.
func testTransactPrecondition(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	f.put(t, f.p, "read", "r", "unread", "u")
	for i, guard := range []store.Precondition{
		store.Equals(store.Key("read"), store.Value("other")), // read, and expected otherwise
		store.Absent(store.Key("unread")),                     // not read
	} {
		runs := 0
		out := f.transact(t, tr, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			runs++
			if _, _, err := r.Get(ctx, store.Key("read")); err != nil {
				return nil, err
			}
			return store.NewBatch().Require(store.Equals(store.Key("read"), store.Value("r")), guard).Put(store.Key("w"), store.Value("x")), nil
		}, store.PreconditionFailed, fmt.Sprintf("guard %d failing", i))
		if out.FailedIndex != 1 || !samePrecondition(out.Failed, guard) {
			t.Fatalf("guard %d: failed precondition %d %v, want 1 %v", i, out.FailedIndex, out.Failed, guard)
		}
		if runs != 1 {
			t.Fatalf("guard %d: the function ran %d times for a failed guard; TransactOnce leaves that to its caller", i, runs)
		}
	}
	f.wantRows(t, f.p, rows("read", "r", "unread", "u"))
}

// testTransactDeadline: a batch past its deadline on the store's clock
// writes nothing; one before it commits.
func testTransactDeadline(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	put := func(key string, deadline time.Time) store.TransactFunc {
		return func(context.Context, store.Reader) (*store.Batch, error) {
			return store.NewBatch().Put(store.Key(key), store.Value("x")).WithDeadline(deadline), nil
		}
	}
	out := f.transact(t, tr, put("late", f.clk.Now().Add(-time.Millisecond)), store.DeadlinePassed, "past its deadline")
	if !out.Now.Equal(f.clk.Now()) {
		t.Fatalf("DeadlinePassed at %v, want the store clock's %v", out.Now, f.clk.Now())
	}
	f.transact(t, tr, put("early", f.clk.Now().Add(time.Millisecond)), store.Committed, "before its deadline")
	f.wantRows(t, f.p, rows("early", "x"))
}

// testTransactWakeups: on a store with a due index the function reads the
// wake time through its Reader (a store.WakeReader), and its batch's
// wakeups and WakeIs guards apply as Apply's do.
func testTransactWakeups(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	di := f.dueIndex(t)
	step := func(what string, want store.Outcome, build func(at time.Time, ok bool) *store.Batch) store.BatchOutcome {
		t.Helper()
		return f.transact(t, tr, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
			wr, ok := r.(store.WakeReader)
			if !ok {
				return nil, fmt.Errorf("the Reader of a store with a due index is no store.WakeReader")
			}
			at, woke, err := wr.NextWake(ctx)
			if err != nil {
				return nil, err
			}
			return build(at, woke), nil
		}, want, what)
	}
	step("WakeAt(5000) after reading none", store.Committed, func(at time.Time, ok bool) *store.Batch {
		if ok || !at.IsZero() {
			t.Errorf("wake time read %v, %v; want none", at, ok)
		}
		return store.NewBatch().Put(store.Key("timer"), store.Value("t")).WakeAt(dueT0.Add(5 * time.Second))
	})
	f.wantWake(t, di, f.p, dueT0.Add(5*time.Second))
	step("SetWake(read, 7000)", store.Committed, func(at time.Time, _ bool) *store.Batch {
		return store.NewBatch().SetWake(at, dueT0.Add(7*time.Second))
	})
	f.wantWake(t, di, f.p, dueT0.Add(7*time.Second))
	out := step("SetWake expecting another time", store.PreconditionFailed, func(at time.Time, _ bool) *store.Batch {
		return store.NewBatch().Put(store.Key("w"), store.Value("x")).SetWake(at.Add(time.Millisecond), dueT0.Add(9*time.Second))
	})
	if out.FailedIndex != 0 || out.Failed.Op != store.MustWakeAt {
		t.Fatalf("failed precondition %d %v, want the WakeIs, 0", out.FailedIndex, out.Failed)
	}
	f.wantWake(t, di, f.p, dueT0.Add(7*time.Second))
	f.wantAbsent(t, f.p, store.Key("w"))
	f.wantDue(t, di, dueT0.Add(10*time.Second), []store.DueEntry{dueEntry(t, f.p, dueT0.Add(7*time.Second))})
}

// testTransactContext: a context already ended fails the call with
// ErrUnavailable before the function runs, and writes nothing.
func testTransactContext(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	ran := false
	_, err := tr.TransactOnce(cancelledContext(f.ctx), f.p, func(context.Context, store.Reader) (*store.Batch, error) {
		ran = true
		return store.NewBatch().Put(store.Key("k"), store.Value("v")), nil
	})
	wantSentinel(t, err, store.ErrUnavailable, "TransactOnce with a cancelled context")
	if ran {
		t.Fatal("the function ran though the context had ended")
	}
	f.wantRows(t, f.p, nil)
}

// testTransactNested: a call of the store made from inside the function,
// with the context the function was given, fails with ErrInvalid rather
// than wait for the function's own transaction, whatever the method; the
// function's error, returned, writes nothing.
func testTransactNested(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	calls := map[string]func(ctx context.Context) error{
		"Get": func(ctx context.Context) error { _, _, err := f.s.Get(ctx, f.p, store.Key("k")); return err },
		"Scan": func(ctx context.Context) error {
			_, err := f.s.Scan(ctx, f.p, fullStart, fullEnd, nil, 1)
			return err
		},
		"Apply": func(ctx context.Context) error {
			_, err := f.s.Apply(ctx, f.p, store.NewBatch().Put(store.Key("nested"), store.Value("x")))
			return err
		},
		"TransactOnce": func(ctx context.Context) error {
			_, err := tr.TransactOnce(ctx, f.p, func(context.Context, store.Reader) (*store.Batch, error) { return nil, nil })
			return err
		},
	}
	if di, ok := f.s.(store.DueIndex); ok {
		calls["ScanDue"] = func(ctx context.Context) error {
			_, err := di.ScanDue(ctx, store.DueQuery{Until: dueT0.Add(time.Millisecond), Limit: 1})
			return err
		}
		calls["NextWake"] = func(ctx context.Context) error { _, _, err := di.NextWake(ctx, f.p); return err }
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() {
			_, err := tr.TransactOnce(f.ctx, f.p, func(ctx context.Context, _ store.Reader) (*store.Batch, error) {
				if err := call(ctx); err != nil {
					return nil, err
				}
				return store.NewBatch().Put(store.Key("k"), store.Value("v")), nil
			})
			done <- err
		}()
		select {
		case err := <-done:
			wantSentinel(t, err, store.ErrInvalid, "nested "+name)
		case <-time.After(5 * time.Second):
			t.Fatalf("nested %s: TransactOnce did not return in 5 s: the nested call waits for its own transaction", name)
		}
	}
	f.wantRows(t, f.p, nil)
}

// testTransactInvalid: a nil function, or a batch Apply would reject,
// fails with ErrInvalid and writes nothing.
func testTransactInvalid(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	_, err := tr.TransactOnce(f.ctx, f.p, nil)
	wantSentinel(t, err, store.ErrInvalid, "nil function")
	caps := f.s.Capabilities()
	for name, b := range map[string]*store.Batch{
		"empty key":        store.NewBatch().Put(store.Key("ok"), store.Value("x")).Put(store.Key{}, store.Value("x")),
		"key over limit":   store.NewBatch().Put(store.Key("ok"), store.Value("x")).Put(make(store.Key, caps.MaxKeyBytes+1), store.Value("x")),
		"too many ops":     tooManyOps(caps),
		"unknown op":       store.NewBatch().Put(store.Key("ok"), store.Value("x")).Add(store.Write{Op: 9, Key: store.Key("x")}),
		"wakeup at zero":   store.NewBatch().Put(store.Key("ok"), store.Value("x")).WakeAt(time.Time{}),
		"ceiling too high": store.NewBatch().Put(store.Key("ok"), store.Value("x")).SetWakeCeiling(time.Time{}, dueT0.Add(10*time.Millisecond), dueT0.Add(20*time.Millisecond)),
	} {
		_, err := tr.TransactOnce(f.ctx, f.p, func(context.Context, store.Reader) (*store.Batch, error) { return b, nil })
		wantSentinel(t, err, store.ErrInvalid, name)
	}
	f.wantRows(t, f.p, nil)
}

// tooManyOps is a batch of one operation more than Apply accepts.
func tooManyOps(caps store.Capabilities) *store.Batch {
	b := store.NewBatch()
	for i := range opsLimit(caps) + 1 {
		b.Put(store.Key(fmt.Sprintf("k%04d", i)), store.Value("x"))
	}
	return b
}

// testTransactReadBudget: the reads of one run hold at most the store's
// MaxTransactReadBytes, plus the row that reaches it: scan pages shrink
// to what earlier reads left, and a read once the budget is spent fails
// with ErrInvalid, which the function may return (nothing written).
// Stores reporting no budget skip it.
func testTransactReadBudget(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	caps := f.s.Capabilities()
	budget := caps.MaxTransactReadBytes
	if budget <= 0 {
		t.Skip("the store reports no MaxTransactReadBytes")
	}
	value := min(caps.MaxValueBytes, max(budget/8, 1))
	want := bigRows(t, f, f.p, budget/value+4, value, 0)
	var read, rowsRead int
	_, err := tr.TransactOnce(f.ctx, f.p, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		read, rowsRead = 0, 0
		var after store.Cursor
		for {
			page, err := r.Scan(ctx, fullStart, fullEnd, after, 1000)
			if err != nil {
				return nil, err
			}
			for _, e := range page.Entries {
				read += len(e.Key) + len(e.Value)
			}
			rowsRead += len(page.Entries)
			if page.Next == nil {
				return store.NewBatch().Put(store.Key("all read"), store.Value("x")), nil
			}
			after = page.Next
		}
	})
	wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("reading %d rows of %d bytes in one transaction, budget %d", len(want), value, budget))
	if last := len(want[0].Key) + value; read > budget+last {
		t.Fatalf("the transaction read %d bytes in %d rows before failing, over its budget of %d and one row", read, rowsRead, budget)
	}
	f.wantAbsent(t, f.p, store.Key("all read"))
}

// testTransactReaderEnds: the Reader fails once its function returned,
// with ErrInvalid: it reads nothing outside the transaction.
func testTransactReaderEnds(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	var kept store.Reader
	f.transact(t, tr, func(_ context.Context, r store.Reader) (*store.Batch, error) {
		kept = r
		return nil, nil
	}, 0, "keeping the Reader")
	_, _, err := kept.Get(f.ctx, store.Key("k"))
	wantSentinel(t, err, store.ErrInvalid, "Get through a Reader whose function returned")
	_, err = kept.Scan(f.ctx, fullStart, fullEnd, nil, 1)
	wantSentinel(t, err, store.ErrInvalid, "Scan through a Reader whose function returned")
}

// testTransactConcurrent races transactions incrementing one counter,
// unguarded: each that commits lands exactly once. A call that fails
// without an unknown result wrote nothing and is made again; one whose
// result is unknown may have landed.
func testTransactConcurrent(t *testing.T, f *fixture) {
	tr := f.transactor(t)
	const workers, each = 4, 10
	f.put(t, f.p, "n", "0")
	increment := func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		v, _, err := r.Get(ctx, store.Key("n"))
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return nil, err
		}
		return store.NewBatch().Put(store.Key("n"), store.Value(strconv.Itoa(n+1))), nil
	}
	var committed, unknown atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				for attempt := 0; ; attempt++ {
					out, err := tr.TransactOnce(f.ctx, f.p, increment)
					switch {
					case err == nil && out.Committed():
						committed.Add(1)
					case errors.Is(err, store.ErrUnknownResult):
						unknown.Add(1)
					case errors.Is(err, store.ErrUnavailable) && attempt < 100:
						continue
					default:
						t.Errorf("worker %d: increment: %v, %v", w, out, err)
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	n, err := strconv.Atoi(string(f.get(t, f.p, store.Key("n"))))
	noErr(t, err, "the counter")
	if c, u := int(committed.Load()), int(unknown.Load()); n < c || n > c+u {
		t.Fatalf("counter %d after %d committed increments (%d unknown)", n, c, u)
	}
}
