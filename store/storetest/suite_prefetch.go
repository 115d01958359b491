package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// The prefetch checks run against stores that implement
// store.Prefetcher; others skip them.
var prefetchChecks = []check{
	{"ApplyDecidesOnTheStateItCommitsOn", testPrefetchDecidesOnCommit},
	{"HoldsNothingAWriterWaitsFor", testPrefetchHoldsNothing},
	{"AppliesOnce", testPrefetchAppliesOnce},
	{"CloseWritesNothing", testPrefetchClose},
	{"InvalidKeyFails", testPrefetchInvalid},
}

// prefetcher returns the store's Prefetcher, skipping t when it has none.
func (f *fixture) prefetcher(t testing.TB) store.Prefetcher {
	t.Helper()
	pf, ok := f.s.(store.Prefetcher)
	if !ok {
		t.Skip("the store is not a store.Prefetcher")
	}
	return pf
}

// prefetch prefetches keys of f.p and fails t on an error; the prefetch
// is closed when t ends.
func (f *fixture) prefetch(t testing.TB, pfr store.Prefetcher, ks ...string) store.Prefetched {
	t.Helper()
	pf, err := pfr.Prefetch(f.ctx, f.p, keys(ks...))
	noErr(t, err, "Prefetch")
	if pf == nil {
		t.Fatal("Prefetch returned nothing and no error")
	}
	t.Cleanup(pf.Close)
	return pf
}

// testPrefetchDecidesOnCommit: a batch applied with a prefetch lands as
// Apply's would: a writer that changes a prefetched key in between makes
// a guard on the value prefetched fail, with nothing written, and one on
// the value written hold; the guards on keys not prefetched are decided
// too.
func testPrefetchDecidesOnCommit(t *testing.T, f *fixture) {
	pfr := f.prefetcher(t)
	f.put(t, f.p, "a", "1", "b", "1")
	pf := f.prefetch(t, pfr, "a", "b")
	f.put(t, f.p, "a", "2")
	b := store.NewBatch().Require(store.Equals(store.Key("a"), store.Value("1"))).Put(store.Key("c"), store.Value("stale"))
	out, err := pf.Apply(f.ctx, b)
	noErr(t, err, "Apply on a stale prefetch")
	if out.Outcome != store.PreconditionFailed || out.FailedIndex != 0 {
		t.Fatalf("Apply guarded on the value prefetched, changed since: %v, want PreconditionFailed at 0", out)
	}
	f.wantAbsent(t, f.p, store.Key("c"))

	pf = f.prefetch(t, pfr, "a", "b")
	f.put(t, f.p, "b", "2")
	b = store.NewBatch().Require(store.Equals(store.Key("a"), store.Value("2")), store.Equals(store.Key("b"), store.Value("2")),
		store.Absent(store.Key("c"))).Put(store.Key("c"), store.Value("fresh")).Put(store.Key("a"), store.Value("3"))
	out, err = pf.Apply(f.ctx, b)
	noErr(t, err, "Apply")
	if !out.Committed() {
		t.Fatalf("Apply guarded on the values written since the prefetch: %v, want Committed", out)
	}
	f.wantRows(t, f.p, rows("a", "3", "b", "2", "c", "fresh"))
}

// testPrefetchHoldsNothing: while a prefetch is open, another writer of
// the same keys commits (a prefetch that held a lock or a transaction the
// writer waits for would keep it waiting), and the prefetched batch is
// then decided on what the writer left.
func testPrefetchHoldsNothing(t *testing.T, f *fixture) {
	pfr := f.prefetcher(t)
	f.put(t, f.p, "k", "1")
	pf := f.prefetch(t, pfr, "k")
	done := f.startWriter(t, f.p, store.NewBatch().Put(store.Key("k"), store.Value("2")).Put(store.Key("w"), store.Value("x")))
	if !waitOverlap(done) {
		pf.Close()
		<-done
		t.Fatalf("a writer waited over %v for an open prefetch: a prefetch must hold nothing other transactions wait for", overlapWait)
	}
	out, err := pf.Apply(f.ctx, store.NewBatch().Require(store.Equals(store.Key("k"), store.Value("2"))).Put(store.Key("k"), store.Value("3")))
	noErr(t, err, "Apply after the writer")
	if !out.Committed() {
		t.Fatalf("Apply guarded on the writer's value: %v, want Committed", out)
	}
	f.wantRows(t, f.p, rows("k", "3", "w", "x"))
}

// testPrefetchAppliesOnce: a second Apply fails with ErrInvalid and writes
// nothing; Close after it is safe.
func testPrefetchAppliesOnce(t *testing.T, f *fixture) {
	pfr := f.prefetcher(t)
	pf := f.prefetch(t, pfr, "k")
	out, err := pf.Apply(f.ctx, store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("k"), store.Value("1")))
	noErr(t, err, "Apply")
	if !out.Committed() {
		t.Fatalf("Apply: %v, want Committed", out)
	}
	_, err = pf.Apply(f.ctx, store.NewBatch().Put(store.Key("again"), store.Value("1")))
	wantSentinel(t, err, store.ErrInvalid, "a second Apply")
	pf.Close()
	pf.Close()
	f.wantRows(t, f.p, rows("k", "1"))
}

// testPrefetchClose: a prefetch closed without Apply writes nothing, and
// leaves nothing that keeps a later writer waiting.
func testPrefetchClose(t *testing.T, f *fixture) {
	pfr := f.prefetcher(t)
	f.put(t, f.p, "k", "1")
	pf := f.prefetch(t, pfr, "k")
	pf.Close()
	pf.Close()
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	out, err := f.s.Apply(ctx, f.p, store.NewBatch().Put(store.Key("k"), store.Value("2")))
	noErr(t, err, "Apply after Close")
	if !out.Committed() {
		t.Fatalf("Apply after Close: %v, want Committed", out)
	}
	f.wantRows(t, f.p, rows("k", "2"))
}

// testPrefetchInvalid: a key Get would refuse fails the prefetch with
// ErrInvalid.
func testPrefetchInvalid(t *testing.T, f *fixture) {
	pfr := f.prefetcher(t)
	_, err := pfr.Prefetch(f.ctx, f.p, []store.Key{store.Key("k"), {}})
	wantSentinel(t, err, store.ErrInvalid, "Prefetch of an empty key")
}
