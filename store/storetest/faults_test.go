package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// faultsFixture is a Faults over a fresh reference model with a due
// index, with partition p holding k = "v" and waking at 5000.
type faultsFixture struct {
	f   *Faults
	ctx context.Context
	p   Partition
}

func newFaultsFixture(t *testing.T) *faultsFixture {
	t.Helper()
	ff := &faultsFixture{f: NewFaults(newDueModel(clock.NewManual(suiteEpoch), fdbLikeCaps)), ctx: t.Context(), p: Partition{Name: "faults"}}
	_, err := ff.f.Inner().Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("k"), store.Value("v")).WakeAt(dueT0.Add(5*time.Second)))
	noErr(t, err, "seeding the store")
	return ff
}

// call makes one call of m through the Faults and returns its error. An
// Apply writes key "w<n>" for its call number n.
func (ff *faultsFixture) call(m Method) error {
	var err error
	switch m {
	case MethodGet:
		_, _, err = ff.f.Get(ff.ctx, ff.p, store.Key("k"))
	case MethodGetMany:
		_, err = ff.f.GetMany(ff.ctx, ff.p, keys("k", "x"))
	case MethodScan:
		_, err = ff.f.Scan(ff.ctx, ff.p, fullStart, fullEnd, nil, 10)
	case MethodApply:
		n := ff.f.Calls(MethodApply) + 1
		_, err = ff.f.Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("w"+string(rune('0'+n))), store.Value("x")))
	case MethodStats:
		_, err = ff.f.Stats(ff.ctx, ff.p)
	case MethodProbe:
		err = ff.f.Probe(ff.ctx)
	case MethodScanDue:
		_, err = ff.f.ScanDue(ff.ctx, store.DueQuery{Until: dueT0.Add(10 * time.Second), Limit: 10})
	case MethodNextWake:
		_, _, err = ff.f.NextWake(ff.ctx, ff.p)
	case MethodTransact:
		n := ff.f.Calls(MethodTransact) + 1
		_, err = ff.f.TransactOnce(ff.ctx, ff.p, func(context.Context, store.Reader) (*store.Batch, error) {
			return store.NewBatch().Put(store.Key("t"+string(rune('0'+n))), store.Value("x")), nil
		})
	}
	return err
}

// innerHas reports whether the inner store holds key.
func (ff *faultsFixture) innerHas(t *testing.T, key string) bool {
	t.Helper()
	_, ok, err := ff.f.Inner().Get(ff.ctx, ff.p, store.Key(key))
	noErr(t, err, "inner Get")
	return ok
}

var allMethods = []Method{MethodGet, MethodGetMany, MethodScan, MethodApply, MethodStats, MethodProbe, MethodScanDue, MethodNextWake, MethodTransact}

func TestFaultsFailNth(t *testing.T) {
	for _, m := range allMethods {
		t.Run(m.String(), func(t *testing.T) {
			ff := newFaultsFixture(t)
			ff.f.FailNth(m, 2, nil)
			noErr(t, ff.call(m), "call 1")
			err := ff.call(m)
			if !errors.Is(err, ErrInjected) || !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("call 2: error %v, want ErrInjected wrapping store.ErrUnavailable", err)
			}
			if want := m.String() + " call 2"; !strings.Contains(err.Error(), want) {
				t.Fatalf("call 2: error %q does not name %q", err, want)
			}
			noErr(t, ff.call(m), "call 3")
			if got := ff.f.Calls(m); got != 3 {
				t.Fatalf("Calls(%v) = %d, want 3", m, got)
			}
			if m == MethodApply && (!ff.innerHas(t, "w1") || ff.innerHas(t, "w2") || !ff.innerHas(t, "w3")) {
				t.Fatal("a failed Apply reached the inner store, or a passing one did not")
			}
			if m == MethodTransact && (!ff.innerHas(t, "t1") || ff.innerHas(t, "t2") || !ff.innerHas(t, "t3")) {
				t.Fatal("a failed TransactOnce wrote, or a passing one did not")
			}
		})
	}
}

func TestFaultsFailNextCustomError(t *testing.T) {
	ff := newFaultsFixture(t)
	custom := errors.New("disk on fire")
	noErr(t, ff.call(MethodGet), "call 1")
	ff.f.FailNext(MethodGet, custom)
	if err := ff.call(MethodGet); !errors.Is(err, custom) {
		t.Fatalf("call 2: error %v, want one wrapping %v", err, custom)
	}
	noErr(t, ff.call(MethodGet), "call 3")
	noErr(t, ff.call(MethodGetMany), "GetMany is another method")
}

func TestFaultsFailWhen(t *testing.T) {
	ff := newFaultsFixture(t)
	other := Partition{Name: "other"}
	ff.f.FailWhen(MethodGet, func(c Call) bool { return c.Partition == other }, nil)
	ff.f.FailWhen(MethodApply, func(c Call) bool {
		for _, w := range c.Batch.Writes {
			if string(w.Key) == "poison" {
				return true
			}
		}
		return false
	}, nil)
	for range 3 {
		_, _, err := ff.f.Get(ff.ctx, other, store.Key("k"))
		wantSentinel(t, err, store.ErrUnavailable, "Get on the matching partition")
		noErr(t, ff.call(MethodGet), "Get on another partition")
	}
	_, err := ff.f.Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("a"), store.Value("1")).Put(store.Key("poison"), store.Value("x")))
	wantSentinel(t, err, store.ErrUnavailable, "Apply of a matching batch")
	if ff.innerHas(t, "a") {
		t.Fatal("a failed Apply wrote")
	}
	_, err = ff.f.Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("a"), store.Value("1")))
	noErr(t, err, "Apply of another batch")
}

func TestFaultsCommitThenFail(t *testing.T) {
	ff := newFaultsFixture(t)
	ff.f.CommitThenFailNth(2)
	noErr(t, ff.call(MethodApply), "Apply 1")
	err := ff.call(MethodApply)
	wantSentinel(t, err, store.ErrUnknownResult, "Apply 2")
	if !ff.innerHas(t, "w2") {
		t.Fatal("Apply 2 reported an unknown result but did not commit")
	}
	noErr(t, ff.call(MethodApply), "Apply 3")

	// A batch that does not commit reports its outcome as usual.
	ff.f.CommitThenFailNext()
	out, err := ff.f.Apply(ff.ctx, ff.p, store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("z"), store.Value("z")))
	noErr(t, err, "Apply of a failing guard")
	if out.Outcome != store.PreconditionFailed {
		t.Fatalf("outcome %v, want precondition failed", out)
	}
}

// TestFaultsCommitThenFailWhen shows the replay a caller makes after an
// unknown result: its guard, re-evaluated, fails because the batch landed.
func TestFaultsCommitThenFailWhen(t *testing.T) {
	ff := newFaultsFixture(t)
	ff.f.CommitThenFailWhen(func(c Call) bool { return len(c.Batch.Preconditions) > 0 })
	b := store.NewBatch().Require(store.Equals(store.Key("k"), store.Value("v"))).Put(store.Key("k"), store.Value("v2"))
	_, err := ff.f.Apply(ff.ctx, ff.p, b)
	wantSentinel(t, err, store.ErrUnknownResult, "guarded Apply")
	out, err := ff.f.Apply(ff.ctx, ff.p, b)
	noErr(t, err, "replay")
	if out.Outcome != store.PreconditionFailed {
		t.Fatalf("replay outcome %v, want precondition failed", out)
	}
	out, err = ff.f.Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("u"), store.Value("1")))
	if err != nil || !out.Committed() {
		t.Fatalf("unguarded Apply: %v, %v; want committed", out, err)
	}
}

func TestFaultsDelay(t *testing.T) {
	// Faults over Faults: the inner one counts the calls that got through.
	model := newModel(clock.NewManual(suiteEpoch), fdbLikeCaps)
	counter := NewFaults(model)
	f := NewFaults(counter)
	p := Partition{Name: "delay"}

	f.Delay(MethodGet, time.Hour).Delay(MethodApply, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := f.Get(ctx, p, store.Key("k"))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("delayed Get past its context: error %v, want DeadlineExceeded and ErrUnavailable", err)
	}
	_, err = f.Apply(ctx, p, store.NewBatch().Put(store.Key("k"), store.Value("v")))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("delayed Apply past its context: error %v, want DeadlineExceeded and ErrUnavailable", err)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("the delay outlived the context")
	}
	if counter.Calls(MethodGet) != 0 || counter.Calls(MethodApply) != 0 {
		t.Fatal("a call whose context ended during its delay reached the inner store")
	}

	f.Delay(MethodGet, 2*time.Millisecond).Delay(MethodApply, 0)
	start = time.Now()
	_, _, err = f.Get(t.Context(), p, store.Key("k"))
	noErr(t, err, "Get within its context")
	if time.Since(start) < 2*time.Millisecond {
		t.Fatal("Get returned before its delay")
	}
	_, err = f.Apply(t.Context(), p, store.NewBatch().Put(store.Key("k"), store.Value("v")))
	noErr(t, err, "Apply with its delay removed")
	if counter.Calls(MethodGet) != 1 || counter.Calls(MethodApply) != 1 {
		t.Fatalf("inner calls Get %d, Apply %d; want 1, 1", counter.Calls(MethodGet), counter.Calls(MethodApply))
	}
}

// TestFaultsBeforeApply changes the store between a caller's read and its
// guarded write, so the write's guard fails.
func TestFaultsBeforeApply(t *testing.T) {
	ff := newFaultsFixture(t)
	var seen []string
	ff.f.BeforeApply(func(ctx context.Context, p store.Partition, b *store.Batch) error {
		seen = append(seen, store.PartitionName(p))
		if len(seen) > 1 {
			return nil
		}
		_, err := ff.f.Inner().Apply(ctx, p, store.NewBatch().Put(store.Key("k"), store.Value("changed")))
		return err
	})
	v, _, err := ff.f.Get(ff.ctx, ff.p, store.Key("k"))
	noErr(t, err, "read")
	b := store.NewBatch().Require(store.Guard(store.Key("k"), v)).Put(store.Key("k"), store.Value("mine"))
	out, err := ff.f.Apply(ff.ctx, ff.p, b)
	noErr(t, err, "guarded write")
	if out.Outcome != store.PreconditionFailed {
		t.Fatalf("outcome %v, want precondition failed after the hook changed the row", out)
	}
	if len(seen) != 1 || seen[0] != "test:faults" {
		t.Fatalf("hook saw %v, want one call on test:faults", seen)
	}

	hookErr := errors.New("hook says no")
	ff.f.Clear()
	ff.f.BeforeApply(func(context.Context, store.Partition, *store.Batch) error { return hookErr })
	_, err = ff.f.Apply(ff.ctx, ff.p, store.NewBatch().Put(store.Key("h"), store.Value("x")))
	if !errors.Is(err, hookErr) {
		t.Fatalf("error %v, want the hook's", err)
	}
	if ff.innerHas(t, "h") {
		t.Fatal("Apply reached the inner store after its hook failed")
	}
}

func TestFaultsAfterRead(t *testing.T) {
	ff := newFaultsFixture(t)
	var calls []Call
	ff.f.AfterRead(func(_ context.Context, c Call) error {
		calls = append(calls, c)
		if c.Method == MethodScan {
			return errors.New("scan vetoed")
		}
		return nil
	})
	noErr(t, ff.call(MethodGet), "Get")
	noErr(t, ff.call(MethodGetMany), "GetMany")
	page, err := ff.f.Scan(ff.ctx, ff.p, store.Key("a"), store.Key("z"), nil, 7)
	if err == nil || !strings.Contains(err.Error(), "scan vetoed") || page.Entries != nil {
		t.Fatalf("Scan = %v, %v; want the hook's error and no rows", page, err)
	}
	noErr(t, ff.call(MethodApply), "Apply runs no read hook")
	noErr(t, ff.call(MethodNextWake), "NextWake")
	if len(calls) != 4 {
		t.Fatalf("hook ran %d times, want 4", len(calls))
	}
	if c := calls[0]; c.Method != MethodGet || c.N != 1 || string(c.Key) != "k" || c.Partition != ff.p {
		t.Fatalf("Get call seen as %+v", c)
	}
	if c := calls[1]; c.Method != MethodGetMany || len(c.Keys) != 2 {
		t.Fatalf("GetMany call seen as %+v", c)
	}
	if c := calls[2]; c.Method != MethodScan || string(c.Start) != "a" || string(c.End) != "z" || c.Limit != 7 {
		t.Fatalf("Scan call seen as %+v", c)
	}
	if c := calls[3]; c.Method != MethodNextWake || c.Partition != ff.p {
		t.Fatalf("NextWake call seen as %+v", c)
	}
}

// TestFaultsDueIndex: the due index is forwarded, and faulted like any
// method; over a store without one it is ErrInvalid.
func TestFaultsDueIndex(t *testing.T) {
	ff := newFaultsFixture(t)
	at, ok, err := ff.f.NextWake(ff.ctx, ff.p)
	if err != nil || !ok || !at.Equal(dueT0.Add(5*time.Second)) {
		t.Fatalf("NextWake = %v, %v, %v; want 5000 through the wrapper", at, ok, err)
	}
	ff.f.FailWhen(MethodScanDue, func(c Call) bool { return c.Until.Before(dueT0.Add(5 * time.Second)) }, nil)
	es, err := ff.f.ScanDue(ff.ctx, store.DueQuery{Until: dueT0.Add(5 * time.Second), Limit: 10})
	if err != nil || len(es) != 1 || !es[0].At.Equal(dueT0.Add(5*time.Second)) {
		t.Fatalf("ScanDue until 5000 = %v, %v; want the fixture's entry", es, err)
	}
	_, err = ff.f.ScanDue(ff.ctx, store.DueQuery{Until: dueT0.Add(4999 * time.Millisecond), Limit: 10})
	wantSentinel(t, err, store.ErrUnavailable, "ScanDue matching the failure rule")

	plain := NewFaults(newModel(clock.NewManual(suiteEpoch), fdbLikeCaps))
	_, _, err = plain.NextWake(ff.ctx, ff.p)
	wantSentinel(t, err, store.ErrInvalid, "NextWake over a store without a due index")
	_, err = plain.ScanDue(ff.ctx, store.DueQuery{Until: dueT0.Add(time.Millisecond), Limit: 1})
	wantSentinel(t, err, store.ErrInvalid, "ScanDue over a store without a due index")
}

// TestFaultsConcurrent counts and numbers concurrent calls exactly.
func TestFaultsConcurrent(t *testing.T) {
	ff := newFaultsFixture(t)
	const goroutines, each = 8, 100
	ff.f.FailNth(MethodGet, 500, nil)
	var mu sync.Mutex
	failures := 0
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				if err := ff.call(MethodGet); err != nil {
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if got := ff.f.Calls(MethodGet); got != goroutines*each {
		t.Fatalf("Calls(Get) = %d, want %d", got, goroutines*each)
	}
	if failures != 1 {
		t.Fatalf("%d failures, want exactly the 500th call", failures)
	}
}

func TestFaultsClear(t *testing.T) {
	ff := newFaultsFixture(t)
	ff.f.FailWhen(MethodProbe, nil, nil).CommitThenFailWhen(nil).Delay(MethodStats, time.Hour)
	if ff.call(MethodProbe) == nil {
		t.Fatal("Probe did not fail")
	}
	ff.f.Clear()
	for _, m := range allMethods {
		noErr(t, ff.call(m), m.String()+" after Clear")
	}
	if got := ff.f.Calls(MethodProbe); got != 2 {
		t.Fatalf("Calls(Probe) = %d after Clear, want 2", got)
	}
	if caps := ff.f.Capabilities(); caps != fdbLikeCaps {
		t.Fatalf("Capabilities = %+v, want the inner store's", caps)
	}
}

func TestFaultsRejectsBadConfiguration(t *testing.T) {
	f := NewFaults(newModel(clock.NewManual(suiteEpoch), fdbLikeCaps))
	for name, configure := range map[string]func(){
		"FailNth(Get, 0)":      func() { f.FailNth(MethodGet, 0, nil) },
		"FailNth(Method(0))":   func() { f.FailNth(Method(0), 1, nil) },
		"FailWhen(Method(99))": func() { f.FailWhen(Method(99), nil, nil) },
		"CommitThenFailNth(0)": func() { f.CommitThenFailNth(0) },
		"Delay(Method(0))":     func() { f.Delay(Method(0), time.Second) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			configure()
		}()
	}
	if got := Method(42).String(); got != "Method(42)" {
		t.Fatalf("Method(42).String() = %q", got)
	}
}

// TestFaultsAppendScanIsAScan: AppendScan is counted and faulted as a Scan,
// so a test that fails the Nth scan fails it whichever method reads, and
// it appends what Scan reads.
func TestFaultsAppendScanIsAScan(t *testing.T) {
	ff := newFaultsFixture(t)
	injected := errors.New("injected")
	ff.f.FailNth(MethodScan, 2, injected)
	noErr(t, ff.call(MethodScan), "Scan 1")
	buf := []byte("held")
	page, out, err := ff.f.AppendScan(ff.ctx, ff.p, fullStart, fullEnd, nil, 10, nil, buf)
	if !errors.Is(err, injected) || page.Entries != nil || string(out) != "held" {
		t.Fatalf("AppendScan as scan 2 = %v, %q, %v; want the injected error, no rows, buf as passed", page, out, err)
	}
	page, out, err = ff.f.AppendScan(ff.ctx, ff.p, fullStart, fullEnd, nil, 10, nil, buf)
	noErr(t, err, "AppendScan as scan 3")
	if !sameRows(page.Entries, rows("k", "v")) || string(out) != "heldkv" {
		t.Fatalf("AppendScan = %s, buf %q; want k=v appended to buf", showRows(page.Entries), out)
	}
	if n := ff.f.Calls(MethodScan); n != 3 {
		t.Fatalf("%d scans counted, want 3", n)
	}
}
