// Package storetest holds what every store.Store implementation and every
// handler test shares: the conformance suite ([Run]), a test partition
// identity ([Partition]), and a fault-injecting wrapper ([Faults]).
//
// An implementation passes the whole contract with one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
//			s := open(t, clk) // fresh and empty, reading time from clk
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Design note: the suite reports with plain testing calls rather than an
// assertion library so that importing it adds no dependency to the
// implementation's tests.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// NewStore opens a fresh, empty store that reads time from clk. It registers
// the store's cleanup with t.Cleanup and fails t if it cannot open one. Run
// calls it once per subtest, concurrently from parallel subtests.
type NewStore func(t *testing.T, clk clock.Clock) store.Store

// suiteEpoch is where every subtest's manual clock starts: a fixed,
// millisecond-aligned time far from the wall clock, so a store that reads
// the wall clock instead of its clock fails the deadline tests.
var suiteEpoch = time.UnixMilli(1_500_000_000_000)

// check is one conformance subtest.
type check struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// group is a named set of checks, run as one level of subtests.
type group struct {
	name   string
	checks []check
}

// Run runs the conformance suite against the stores newStore opens: one
// subtest per behaviour of the store.Store contract, named "Group/Behaviour"
// (for example "Apply/PreconditionFailedWritesNothing"), each on its own
// fresh store and manual clock, in parallel. A store that implements
// store.DueIndex is held to it ("Due/..."); one that does not must reject
// batches carrying a Wakeup or a WakeIs. A store that implements
// store.Transactor is held to it ("Transact/..."), and one that
// implements store.Prefetcher to that ("Prefetch/..."), and one that
// implements store.Committer to that ("Commit/...").
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	groups := []group{
		{"Read", readChecks},
		{"Apply", applyChecks},
		{"Concurrency", concurrencyChecks},
		{"Scan", scanChecks},
		{"Cursor", cursorChecks},
		{"Partition", partitionChecks},
		{"Limits", limitChecks},
		{"Deadline", deadlineChecks},
		{"Stats", statsChecks},
		{"Probe", probeChecks},
		{"Context", contextChecks},
		{"Errors", errorChecks},
		{"Due", dueChecks},
		{"Transact", transactChecks},
		{"Prefetch", prefetchChecks},
		{"Commit", commitChecks},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.checks {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newFixture(t, newStore))
				})
			}
		})
	}
}

// fixture is what one subtest works with: a fresh store, the manual clock
// it reads, and two partitions of that store.
type fixture struct {
	s     store.Store
	clk   *clock.Manual
	ctx   context.Context
	p     Partition
	other Partition
}

func newFixture(t *testing.T, newStore NewStore) *fixture {
	t.Helper()
	clk := clock.NewManual(suiteEpoch)
	s := newStore(t, clk)
	if s == nil {
		t.Fatal("NewStore returned a nil store")
	}
	return &fixture{
		s:     s,
		clk:   clk,
		ctx:   t.Context(),
		p:     Partition{Name: "suite"},
		other: Partition{Name: "suite-other"},
	}
}

// sentinels are the errors every store error wraps exactly one of.
var sentinels = []struct {
	err  error
	name string
}{
	{store.ErrInvalid, "ErrInvalid"},
	{store.ErrCorrupt, "ErrCorrupt"},
	{store.ErrUnavailable, "ErrUnavailable"},
	{store.ErrUnknownResult, "ErrUnknownResult"},
}

// sentinelsOf names the store sentinels err wraps.
func sentinelsOf(err error) []string {
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	return names
}

// wantSentinel fails t unless err wraps want and no other store sentinel.
func wantSentinel(t testing.TB, err, want error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want one wrapping %v", what, want)
	}
	got := sentinelsOf(err)
	if !errors.Is(err, want) || len(got) != 1 {
		t.Fatalf("%s: error %q wraps store sentinels %v, want exactly %v", what, err, got, want)
	}
}

func noErr(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

// apply applies b and fails t unless it reports want without an error.
func (f *fixture) apply(t testing.TB, p store.Partition, b *store.Batch, want store.Outcome, what string) store.BatchOutcome {
	t.Helper()
	out, err := f.s.Apply(f.ctx, p, b)
	noErr(t, err, what)
	if out.Outcome != want {
		t.Fatalf("%s: outcome %v, want %v", what, out, want)
	}
	return out
}

// put commits unguarded puts of alternating keys and values, in as many
// batches as the store's limits require.
func (f *fixture) put(t testing.TB, p store.Partition, kvs ...string) {
	t.Helper()
	caps := f.s.Capabilities()
	b := store.NewBatch()
	for i := 0; i+1 < len(kvs); i += 2 {
		w := store.Put(store.Key(kvs[i]), store.Value(kvs[i+1]))
		if b.Ops() > 0 && (b.Ops()+1 > opsLimit(caps) || b.Bytes()+len(w.Key)+len(w.Value) > caps.MaxBatchBytes) {
			f.apply(t, p, b, store.Committed, fmt.Sprintf("put of %d rows", b.Ops()))
			b = store.NewBatch()
		}
		b.Add(w)
	}
	f.apply(t, p, b, store.Committed, fmt.Sprintf("put of %d rows", b.Ops()))
}

// get reads key and checks the Get contract: a nil value exactly when
// absent. It returns nil for an absent key.
func (f *fixture) get(t testing.TB, p store.Partition, key store.Key) store.Value {
	t.Helper()
	v, ok, err := f.s.Get(f.ctx, p, key)
	noErr(t, err, fmt.Sprintf("Get(%q)", key))
	if ok && v == nil {
		t.Fatalf("Get(%q): ok with a nil value; a present value is never nil", key)
	}
	if !ok && v != nil {
		t.Fatalf("Get(%q): absent but returned value %q", key, v)
	}
	return v
}

// wantValue fails t unless key holds exactly want (nil: absent).
func (f *fixture) wantValue(t testing.TB, p store.Partition, key store.Key, want store.Value) {
	t.Helper()
	got := f.get(t, p, key)
	if !sameValue(got, want) {
		t.Fatalf("Get(%q) = %s, want %s", key, showValue(got), showValue(want))
	}
}

// wantAbsent fails t unless every key is absent.
func (f *fixture) wantAbsent(t testing.TB, p store.Partition, keys ...store.Key) {
	t.Helper()
	for _, k := range keys {
		f.wantValue(t, p, k, nil)
	}
}

// wantRows fails t unless a full scan of p returns exactly want.
func (f *fixture) wantRows(t testing.TB, p store.Partition, want []store.KeyValue) {
	t.Helper()
	got := scanAll(t, f, p, fullStart, fullEnd, 1000)
	if !sameRows(got, want) {
		t.Fatalf("rows of %v:\n got %s\nwant %s", p, showRows(got), showRows(want))
	}
}

// sameValue compares values, telling absent (nil) from empty.
func sameValue(a, b store.Value) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func sameRows(a, b []store.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !sameValue(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func showValue(v store.Value) string {
	switch {
	case v == nil:
		return "<absent>"
	case len(v) > 48:
		return fmt.Sprintf("<%d bytes %q...>", len(v), []byte(v[:16]))
	}
	return fmt.Sprintf("%q", []byte(v))
}

func showKey(k store.Key) string {
	if len(k) > 48 {
		return fmt.Sprintf("<%d-byte key %q...>", len(k), []byte(k[:16]))
	}
	return fmt.Sprintf("%q", []byte(k))
}

func showRows(rows []store.KeyValue) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", showKey(r.Key), showValue(r.Value))
	}
	b.WriteByte(']')
	return b.String()
}

// keys converts strings to keys.
func keys(ss ...string) []store.Key {
	out := make([]store.Key, len(ss))
	for i, s := range ss {
		out[i] = store.Key(s)
	}
	return out
}

// rows builds rows from alternating keys and values.
func rows(kvs ...string) []store.KeyValue {
	var out []store.KeyValue
	for i := 0; i+1 < len(kvs); i += 2 {
		v := store.Value(kvs[i+1])
		if v == nil {
			v = store.Value{}
		}
		out = append(out, store.KeyValue{Key: store.Key(kvs[i]), Value: v})
	}
	return out
}

// cancelledContext returns a context that has already been cancelled.
func cancelledContext(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	cancel()
	return ctx
}
