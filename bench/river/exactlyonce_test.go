package riverbench

import (
	"testing"
)

// The harness fires every timer and works every job exactly once, durably
// (each side's run checks it: every item counted once, no timer left, every
// job completed), at 1 and at 16 workers, on a size that keeps make test
// short.
// The shapes: 10 timers a partition, and a partition a timer.
func TestEachFiresEveryItemExactlyOnce(t *testing.T) {
	const n = 100
	for _, parts := range []int{10, n} {
		for _, workers := range []int{1, 16} {
			o := newOursOp(t, t.TempDir(), n, parts)
			if d := o.run(t, workers); d <= 0 {
				t.Fatalf("ours, %d partitions, at %d workers: elapsed %v", parts, workers, d)
			}
			r := newRiverOp(t, t.TempDir(), n, workers)
			if d := r.run(t); d <= 0 {
				t.Fatalf("river at %d workers: elapsed %v", workers, d)
			}
		}
	}
}

// The inserts store every timer and job, in batches of insertBatch: a
// commit of as many partitions when each timer has its own, and of
// partitions' batches of a third of MaxBatchOps timers (a partition named
// by two commits) when they share partitions.
func TestEachInsertsEveryItem(t *testing.T) {
	const n = 250
	for _, parts := range []int{3, 10, n} {
		o := openOurs(t, t.TempDir(), n, parts)
		if d := o.insert(t); d <= 0 {
			t.Fatalf("ours, %d partitions: elapsed %v", parts, d)
		}
		o.checkInserted(t)
		o.close(t)
	}
	r := openRiver(t, t.TempDir(), n, 1)
	if d := r.insert(t); d <= 0 {
		t.Fatalf("river: elapsed %v", d)
	}
	r.checkInserted(t)
	r.close(t)
}

// The counter the harness checks with catches a second firing and a
// missing one.
func TestCounterCatchesDuplicatesAndMisses(t *testing.T) {
	c := newCounter(3)
	for _, i := range []int{0, 1, 2} {
		if err := c.fire(i); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-c.done:
	default:
		t.Fatal("done not closed after every item fired")
	}
	if err := c.fire(1); err != nil {
		t.Fatal(err)
	}
	ft := &fakeTB{TB: t}
	ft.run(func() { c.check(ft, "test") })
	if !ft.failed {
		t.Fatal("a second firing passed the check")
	}
	c = newCounter(2)
	if err := c.fire(0); err != nil {
		t.Fatal(err)
	}
	ft = &fakeTB{TB: t}
	ft.run(func() { c.check(ft, "test") })
	if !ft.failed {
		t.Fatal("a missing firing passed the check")
	}
	if err := c.fire(5); err == nil {
		t.Fatal("an item out of range was counted")
	}
}

// fakeTB records a Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	failed bool
}

type fatal struct{}

func (f *fakeTB) Fatalf(string, ...any) { f.failed = true; panic(fatal{}) }
func (f *fakeTB) Helper()               {}

func (f *fakeTB) run(fn func()) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
	}()
	fn()
}
