package storetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

var concurrencyChecks = []check{
	{"GuardedIncrements", testGuardedIncrements},
	{"GetManyReadsOneSnapshot", testGetManyReadsOneSnapshot},
}

// cancelTiming says when testCancelRacingCommit cancels Apply's context.
type cancelTiming int

const (
	cancelBefore   cancelTiming = iota // before Apply is called
	cancelAfter                        // after Apply returned
	cancelYielding                     // from a goroutine, after some yields
	cancelSleeping                     // from a goroutine, after a short sleep
	cancelSpinning                     // from a goroutine, after a busy loop
	cancelTimingCount
)

// testCancelRacingCommit cancels Apply's context at varying points around
// the commit, many times (fixed seed). Whatever the timing: a Committed
// outcome means the batch is visible; an error other than
// ErrUnknownResult means it is not, then or later; ErrUnknownResult may
// be either. Every timing is exercised, so both of the first two rules are.
func testCancelRacingCommit(t *testing.T, f *fixture) {
	rng := rand.New(rand.NewPCG(20240601, 7))
	const iterations = 400
	var (
		neverLanded []store.Key
		tally       = map[string]int{}
	)
	for i := range iterations {
		k := store.Key(fmt.Sprintf("race/%04d", i))
		v := store.Value(fmt.Sprintf("value-%d", i))
		timing := cancelTiming(i % int(cancelTimingCount))
		n := rng.IntN(200)

		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan struct{})
		switch timing {
		case cancelBefore:
			cancel()
			close(done)
		case cancelAfter:
			close(done)
		default:
			go func() {
				defer close(done)
				switch timing {
				case cancelYielding:
					for range n {
						runtime.Gosched()
					}
				case cancelSleeping:
					time.Sleep(time.Duration(n) * time.Microsecond)
				case cancelSpinning:
					spin(n * 50)
				}
				cancel()
			}()
		}
		b := store.NewBatch().Require(store.Absent(k)).Put(k, v)
		out, err := f.s.Apply(ctx, f.p, b)
		<-done
		cancel()

		visible := f.get(t, f.p, k)
		switch {
		case err == nil:
			if out.Outcome != store.Committed {
				t.Fatalf("iteration %d (timing %d): outcome %v for a fresh key, want committed or an error", i, timing, out)
			}
			if !sameValue(visible, v) {
				t.Fatalf("iteration %d (timing %d): Apply reported committed but Get returns %s", i, timing, showValue(visible))
			}
			tally["committed"]++
		case errors.Is(err, store.ErrUnknownResult):
			tally["unknown"]++
		default:
			if visible != nil {
				t.Fatalf("iteration %d (timing %d): Apply failed with %q (not ErrUnknownResult) but the batch is visible", i, timing, err)
			}
			if timing == cancelAfter {
				t.Fatalf("iteration %d: Apply failed with %q though its context was never cancelled during the call", i, err)
			}
			neverLanded = append(neverLanded, k)
			tally["failed"]++
		}
	}
	if tally["committed"] == 0 || tally["failed"]+tally["unknown"] == 0 {
		t.Fatalf("outcomes %v: want some committed and some failed batches", tally)
	}
	// A failed batch must not land later either.
	got, err := f.s.GetMany(f.ctx, f.p, neverLanded)
	noErr(t, err, "GetMany of failed batches' keys")
	for i, v := range got {
		if v != nil {
			t.Fatalf("key %q of a batch that failed without ErrUnknownResult landed later", neverLanded[i])
		}
	}
	t.Logf("outcomes over %d iterations: %v", iterations, tally)
}

// spinSink keeps spin's loop from being optimised away.
var spinSink atomic.Uint64

func spin(n int) {
	x := uint64(n)
	for i := range n {
		x = x*6364136223846793005 + uint64(i)
	}
	spinSink.Add(x)
}

func encodeCounter(n uint64) store.Value { return binary.BigEndian.AppendUint64(store.Value{}, n) }

// testGuardedIncrements races guarded read-modify-write increments of one
// counter: each worker reads it, then applies Guard(observed) + Put(n+1),
// retrying on PreconditionFailed. The final value must equal the number of
// committed batches (within the batches whose result was unknown).
func testGuardedIncrements(t *testing.T, f *fixture) {
	const workers, perWorker, maxAttempts = 16, 50, 100_000
	counter := store.Key("counter")
	var committed, unknown, conflicts atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := range perWorker {
				for attempt := 0; ; attempt++ {
					if attempt == maxAttempts {
						t.Errorf("worker %d increment %d: no commit in %d attempts", w, j, maxAttempts)
						return
					}
					cur, ok, err := f.s.Get(f.ctx, f.p, counter)
					if err != nil {
						t.Errorf("worker %d: Get: %v", w, err)
						return
					}
					var n uint64
					if ok {
						if len(cur) != 8 {
							t.Errorf("worker %d: counter holds %d bytes, want 8", w, len(cur))
							return
						}
						n = binary.BigEndian.Uint64(cur)
					} else {
						cur = nil
					}
					b := store.NewBatch().Require(store.Guard(counter, cur)).Put(counter, encodeCounter(n+1))
					out, err := f.s.Apply(f.ctx, f.p, b)
					if errors.Is(err, store.ErrUnknownResult) {
						unknown.Add(1)
						break
					}
					if err != nil {
						t.Errorf("worker %d: Apply: %v", w, err)
						return
					}
					if out.Committed() {
						committed.Add(1)
						break
					}
					if out.Outcome != store.PreconditionFailed {
						t.Errorf("worker %d: outcome %v, want committed or precondition failed", w, out)
						return
					}
					conflicts.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	v := f.get(t, f.p, counter)
	if len(v) != 8 {
		t.Fatalf("counter holds %s, want 8 bytes", showValue(v))
	}
	final, c, u := int64(binary.BigEndian.Uint64(v)), committed.Load(), unknown.Load()
	if c+u != workers*perWorker {
		t.Fatalf("%d committed + %d unknown increments, want %d", c, u, workers*perWorker)
	}
	if final < c || final > c+u {
		t.Fatalf("counter = %d after %d committed increments (%d unknown): lost or phantom updates", final, c, u)
	}
	t.Logf("counter %d: %d committed, %d unknown, %d precondition failures retried", final, c, u, conflicts.Load())
}

// testGetManyReadsOneSnapshot: a writer keeps two keys equal, updating both
// in every batch; GetMany of both, in either order, never sees them differ.
// The writer keeps writing until the readers have read many times, so
// reads overlap writes.
func testGetManyReadsOneSnapshot(t *testing.T, f *fixture) {
	const minWrites, minReads, maxWrites, readers = 300, 2000, 1_000_000, 4
	a, b := store.Key("pair/a"), store.Key("pair/b")
	var (
		stop, readerFailed atomic.Bool
		reads              atomic.Int64
		wg                 sync.WaitGroup
	)
	wg.Go(func() {
		defer stop.Store(true)
		for i := uint64(0); i < maxWrites && !readerFailed.Load(); i++ {
			if i >= minWrites && reads.Load() >= minReads {
				return
			}
			v := encodeCounter(i)
			out, err := f.s.Apply(f.ctx, f.p, store.NewBatch().Put(a, v).Put(b, v))
			if err != nil || !out.Committed() {
				t.Errorf("writer batch %d: %v, %v", i, out, err)
				return
			}
		}
	})
	for r := range readers {
		wg.Go(func() {
			ks := []store.Key{a, b}
			if r%2 == 1 {
				ks = []store.Key{b, a}
			}
			for !stop.Load() {
				got, err := f.s.GetMany(f.ctx, f.p, ks)
				if err != nil {
					t.Errorf("reader %d: GetMany: %v", r, err)
					readerFailed.Store(true)
					return
				}
				if len(got) != 2 {
					t.Errorf("reader %d: GetMany of 2 keys returned %d entries", r, len(got))
					readerFailed.Store(true)
					return
				}
				if !sameValue(got[0], got[1]) {
					t.Errorf("reader %d: GetMany(%q) = %s, %s: a torn read of one batch", r, ks, showValue(got[0]), showValue(got[1]))
					readerFailed.Store(true)
					return
				}
				reads.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d consistent GetMany reads during the writes", reads.Load())
}
