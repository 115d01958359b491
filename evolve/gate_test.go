package evolve_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/ledger/ledgergen"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"

	// A namespace at format 1, linked beside mkit and ledger (both at 2).
	_ "github.com/mkit-dev/mkitfdb/refdomain"
)

var gateT0 = time.UnixMilli(1_700_000_000_000)

// ledger is the test ledger's namespace (a schema of its own, with a
// second version at format 2): this binary knows its formats 1-2.
const ledger = ledgergen.SchemaNamespace

// gateEngines are the engines the gate is tested on: memory, and the one
// with FoundationDB's transaction semantics (snapshots, conflicts).
var gateEngines = []struct {
	name string
	open func() kv.Engine
}{
	{"memory", func() kv.Engine { return memengine.New() }},
	{"mvcc", func() kv.Engine { return fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}) }},
}

// oldStore is a Layer over a fresh engine holding a row written before
// formats existed, so that every namespace is at format 1; its own gate
// is read-only and writes nothing. Gates under test open on it.
func oldStore(t *testing.T, e kv.Engine, clk clock.Clock) *fdblayer.Layer {
	t.Helper()
	l, err := fdblayer.Open(e, fdblayer.Config{Clock: clk, Logger: quiet, Gate: evolve.GateConfig{ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	p := storetest.Partition{Name: "before formats"}
	if out, err := l.Apply(context.Background(), p, store.NewBatch().Put(store.Key("k"), store.Value("v"))); err != nil || !out.Committed() {
		t.Fatalf("seed: %v %v", out, err)
	}
	return l
}

// open opens a gate named name on s knowing known (nil: what the binary
// links), failing t on error; Close runs at cleanup.
func open(t *testing.T, s store.Store, clk clock.Clock, name string, known map[string]uint32) *evolve.Gate {
	t.Helper()
	g, err := evolve.OpenGate(context.Background(), s, evolve.GateConfig{Process: name, Known: known, Clock: clk, Logger: quiet, Refresh: time.Hour})
	if err != nil {
		t.Fatalf("open gate %s: %v", name, err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// partitionRows is every row of evolve.Partition, as key=value text.
func partitionRows(t *testing.T, s store.Store) string {
	t.Helper()
	page, err := s.Scan(context.Background(), evolve.Partition, store.Key{}, store.Key{0xff}, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, kv := range page.Entries {
		fmt.Fprintf(&b, "%x=%x\n", kv.Key, kv.Value)
	}
	return b.String()
}

var raiseCfg = evolve.RaiseConfig{By: "test", Reason: "notes on entries"}

// forEachEngine runs fn as a subtest per engine, on an old store.
func forEachEngine(t *testing.T, fn func(t *testing.T, s *fdblayer.Layer, clk *clock.Manual)) {
	for _, e := range gateEngines {
		t.Run(e.name, func(t *testing.T) {
			clk := clock.NewManual(gateT0)
			fn(t, oldStore(t, e.open(), clk), clk)
		})
	}
}

// A store whose format of a linked namespace is above what the binary
// knows is refused at OpenGate, in one line naming the namespace, both
// formats and the package, wrapping ErrNewerFormat (and
// store.ErrUnavailable); the refused gate writes no process row.
func TestOpenGateRefusesANewerStore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *fdblayer.Layer, clk *clock.Manual) {
		ctx := context.Background()
		g := open(t, s, clk, "new", nil)
		if err := g.Raise(ctx, ledger, 2, raiseCfg); err != nil {
			t.Fatal(err)
		}
		before := partitionRows(t, s)
		old, err := evolve.OpenGate(ctx, s, evolve.GateConfig{Process: "old", Known: map[string]uint32{ledger: 1}, Clock: clk, Logger: quiet})
		if err == nil {
			_ = old.Close()
			t.Fatal("a binary that knows ledger format 1 opened a store at format 2")
		}
		var nf *evolve.NewerFormatError
		if !errors.As(err, &nf) || !errors.Is(err, evolve.ErrNewerFormat) || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("err = %v, want a *NewerFormatError wrapping ErrNewerFormat and store.ErrUnavailable", err)
		}
		if nf.Namespace != ledger || nf.Format != 2 || nf.Known != 1 || nf.Fenced {
			t.Errorf("NewerFormatError = %+v", nf)
		}
		msg := err.Error()
		for _, want := range []string{`namespace "ledger" is 2`, "knows format 1", "internal/testkit/ledger/ledgergen", "deploy a binary that knows 2"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("not one line: %q", msg)
		}
		if after := partitionRows(t, s); after != before {
			t.Errorf("a refused gate wrote:\n%s\nwas:\n%s", after, before)
		}
		// A read-only gate is refused alike.
		if _, err := evolve.OpenGate(ctx, s, evolve.GateConfig{ReadOnly: true, Known: map[string]uint32{ledger: 1}}); !errors.Is(err, evolve.ErrNewerFormat) {
			t.Errorf("read-only gate of an older binary: %v", err)
		}
		// A binary that knows 2 opens it.
		open(t, s, clk, "new-2", nil)
	})
}

// Raise refuses a format at or below the store's (a format is raised
// once and never lowered), one that skips a format, and one the binary
// does not know; each refusal writes nothing.
func TestRaiseRefusesALowerOrEqualFormat(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *fdblayer.Layer, clk *clock.Manual) {
		ctx := context.Background()
		g := open(t, s, clk, "p", nil)
		if err := g.Raise(ctx, ledger, 2, raiseCfg); err != nil {
			t.Fatal(err)
		}
		before := partitionRows(t, s)
		var re *evolve.RaiseError
		err := g.Raise(ctx, ledger, 2, raiseCfg)
		if !errors.As(err, &re) || !errors.Is(err, evolve.ErrRaiseRefused) || re.Format != 2 || re.To != 2 || !strings.Contains(err.Error(), "never lowered") {
			t.Errorf("raise to the store's format: %v", err)
		}
		for _, tc := range []struct {
			ns   string
			to   uint32
			want string
		}{
			{ledger, 1, "every namespace starts at format 1"},
			{ledger, 0, "every namespace starts at format 1"},
			{ledger, 3, "knows formats 1-2"},
			{"elsewhere", 2, "does not link the namespace"},
		} {
			if err := g.Raise(ctx, tc.ns, tc.to, raiseCfg); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("raise %s to %d: %v, want store.ErrInvalid and %q", tc.ns, tc.to, err, tc.want)
			}
		}
		for _, cfg := range []evolve.RaiseConfig{{Reason: "r"}, {By: "b"}} {
			if err := g.Raise(ctx, gen.SchemaNamespace, 2, cfg); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("raise with %+v: %v, want store.ErrInvalid", cfg, err)
			}
		}
		if after := partitionRows(t, s); after != before {
			t.Errorf("a refused raise wrote:\n%s\nwas:\n%s", after, before)
		}
		if f := g.Format(ledger); f != 2 {
			t.Errorf("Format(ledger) = %d after refused raises, want 2", f)
		}
	})
}

// A live process whose binary does not know the format holds a raise
// back, named, and nothing is written; Force goes past it (recorded in the
// history), and the process's gate fences its writes at its next refresh.
// A process that closed its gate, or whose row expired, holds nothing back.
func TestRaiseRefusesALiveProcessThatDoesNotKnowTheFormat(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *fdblayer.Layer, clk *clock.Manual) {
		ctx := context.Background()
		old := open(t, s, clk, "old-1", map[string]uint32{ledger: 1})
		newer := open(t, s, clk, "new-1", nil)
		before := partitionRows(t, s)
		err := newer.Raise(ctx, ledger, 2, raiseCfg)
		var re *evolve.RaiseError
		if !errors.As(err, &re) || !errors.Is(err, evolve.ErrRaiseRefused) {
			t.Fatalf("raise past a live process that knows 1: %v", err)
		}
		if len(re.Unaware) != 1 || re.Unaware[0].Name != "old-1" || re.Unaware[0].Known[ledger] != 1 {
			t.Errorf("Unaware = %+v, want old-1 knowing 1", re.Unaware)
		}
		if !strings.Contains(err.Error(), "old-1") || strings.Contains(err.Error(), "new-1") {
			t.Errorf("the refusal does not name old-1 alone: %v", err)
		}
		if after := partitionRows(t, s); after != before {
			t.Errorf("a refused raise wrote:\n%s\nwas:\n%s", after, before)
		}
		if err := old.Fenced(); err != nil {
			t.Fatalf("fenced before any raise: %v", err)
		}

		forced := raiseCfg
		forced.Force = true
		if err := newer.Raise(ctx, ledger, 2, forced); err != nil {
			t.Fatal(err)
		}
		st, err := evolve.ReadStatus(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		var steps []evolve.Step
		for _, ns := range st.Namespaces {
			if ns.Name == ledger {
				steps = ns.Steps
				if ns.Format != 2 {
					t.Errorf("store format of ledger = %d, want 2", ns.Format)
				}
			}
		}
		if len(steps) != 1 || steps[0].Format != 2 || steps[0].By != "test" || len(steps[0].Forced) != 1 || steps[0].Forced[0] != "old-1" {
			t.Errorf("history = %+v, want one forced step past old-1", steps)
		}
		if err := old.Sync(ctx); !errors.Is(err, evolve.ErrNewerFormat) {
			t.Fatalf("the old process's refresh: %v, want ErrNewerFormat", err)
		}
		var nf *evolve.NewerFormatError
		if err := old.Fenced(); !errors.As(err, &nf) || !nf.Fenced || nf.Format != 2 || nf.Known != 1 {
			t.Errorf("Fenced = %v", err)
		}
		if _, err := s.Apply(ctx, storetest.Partition{Name: "x"}, store.NewBatch().Put(store.Key("k"), store.Value("v"))); err != nil {
			t.Errorf("the store's own (read-only) gate is not fenced: %v", err)
		}

		// mkit: a closed gate and an expired row hold nothing back.
		closing := open(t, s, clk, "closing", map[string]uint32{gen.SchemaNamespace: 1})
		expired := open(t, s, clk, "expired", map[string]uint32{gen.SchemaNamespace: 1})
		if err := newer.Raise(ctx, gen.SchemaNamespace, 2, raiseCfg); !errors.Is(err, evolve.ErrRaiseRefused) {
			t.Fatalf("raise mkit past closing and expired: %v", err)
		}
		if err := closing.Close(); err != nil {
			t.Fatal(err)
		}
		_ = expired // never closed: it ends without deleting its row
		clk.Advance(4*time.Hour + time.Second)
		if err := newer.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := newer.Raise(ctx, gen.SchemaNamespace, 2, raiseCfg); err != nil {
			t.Errorf("raise mkit once closing closed and expired's row expired: %v", err)
		}
	})
}

// A raise racing a process start never lets both win: either the raise
// lands first and the process, whose binary knows only the older format,
// is refused at OpenGate, or the process's row lands first and the raise
// is refused naming it. Run many times, on memory and MVCC engines.
func TestARaiseRacingAProcessStart(t *testing.T) {
	for _, e := range gateEngines {
		t.Run(e.name, func(t *testing.T) {
			raised, refused := 0, 0
			for i := range 40 {
				ctx := context.Background()
				clk := clock.NewManual(gateT0)
				s := oldStore(t, e.open(), clk)
				newer := open(t, s, clk, "new", nil)
				var (
					wg       sync.WaitGroup
					raiseErr error
					old      *evolve.Gate
					openErr  error
				)
				wg.Add(2)
				go func() {
					defer wg.Done()
					raiseErr = newer.Raise(ctx, ledger, 2, raiseCfg)
				}()
				go func() {
					defer wg.Done()
					old, openErr = evolve.OpenGate(ctx, s, evolve.GateConfig{Process: "old", Known: map[string]uint32{ledger: 1}, Clock: clk, Logger: quiet, Refresh: time.Hour})
				}()
				wg.Wait()
				switch {
				case raiseErr == nil && openErr == nil:
					t.Fatalf("run %d: both the raise and the older process's start succeeded", i)
				case raiseErr == nil:
					raised++
					if !errors.Is(openErr, evolve.ErrNewerFormat) {
						t.Fatalf("run %d: raised, and the start failed with %v, want ErrNewerFormat", i, openErr)
					}
				case openErr == nil:
					refused++
					var re *evolve.RaiseError
					if !errors.As(raiseErr, &re) || len(re.Unaware) != 1 || re.Unaware[0].Name != "old" {
						t.Fatalf("run %d: started, and the raise failed with %v, want a refusal naming old", i, raiseErr)
					}
					if f := old.Format(ledger); f != 1 {
						t.Fatalf("run %d: the started process sees format %d", i, f)
					}
					_ = old.Close()
				default:
					t.Fatalf("run %d: both failed: raise %v; start %v", i, raiseErr, openErr)
				}
				if f := formatOf(t, s); (f == 2) != (raiseErr == nil) {
					t.Fatalf("run %d: the store is at %d, raise %v", i, f, raiseErr)
				}
			}
			t.Logf("%d raised first, %d started first", raised, refused)
		})
	}
}

// formatOf is s's format of ledger as ReadStatus reads it.
func formatOf(t *testing.T, s store.Store) uint32 {
	t.Helper()
	st, err := evolve.ReadStatus(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range st.Namespaces {
		if ns.Name == ledger {
			return ns.Format
		}
	}
	return 1
}

// A read-only gate writes nothing, at open, at an explicit Sync or at
// close: no process row, so a raise does not wait for it, and no
// background refresh, so a raise does not fence it; a new store is not
// recorded by it.
func TestAReadOnlyGateWritesNothing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *fdblayer.Layer, clk *clock.Manual) {
		ctx := context.Background()
		before := partitionRows(t, s)
		ro, err := evolve.OpenGate(ctx, s, evolve.GateConfig{ReadOnly: true, NewStore: true, Known: map[string]uint32{ledger: 1}, Clock: clk, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := ro.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if after := partitionRows(t, s); after != before {
			t.Fatalf("a read-only gate wrote:\n%s\nwas:\n%s", after, before)
		}
		if f := ro.Format(ledger); f != 1 {
			t.Errorf("read-only gate's Format(ledger) = %d, want 1 (NewStore ignored)", f)
		}
		g := open(t, s, clk, "writer", nil)
		if err := g.Raise(ctx, ledger, 2, raiseCfg); err != nil {
			t.Errorf("a read-only gate held a raise back: %v", err)
		}
		if err := ro.Fenced(); err != nil {
			t.Errorf("a read-only gate (no refresh) after a raise past it: Fenced %v", err)
		}
		raised := partitionRows(t, s)
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		if after := partitionRows(t, s); after != raised {
			t.Errorf("closing a read-only gate wrote:\n%s\nwas:\n%s", after, raised)
		}
	})
}

// A new store starts at the formats its binary knows (mkit and ledger at
// 2 here, refdomain at 1), in the batch that registers the process, even
// on a store whose batches hold no more operations than those writes
// need: the guards of the format rows it only reads are left to the
// transaction, which covers them.
func TestANewStoreStartsAtItsBinarysFormatsInASmallBatch(t *testing.T) {
	for _, e := range gateEngines {
		t.Run(e.name, func(t *testing.T) {
			// Each namespace of a format above 1 (mkit, ledger): a
			// guard, a history guard and two puts; the process row: a
			// guard and a put. The namespaces at 1 (refdomain, ...) only
			// read do not fit.
			ops, atOne := 2, 0
			for _, sc := range registry.All() {
				if sc.Format > 1 {
					ops += 4
				} else {
					atOne++
				}
			}
			if atOne == 0 {
				t.Fatal("no linked namespace at format 1: the test needs one")
			}
			l, err := fdblayer.Open(e.open(), fdblayer.Config{MaxBatchOps: ops, Logger: quiet, Gate: evolve.GateConfig{Process: "first"}})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for ns, want := range map[string]uint32{gen.SchemaNamespace: 2, ledger: 2, "refdomain": 1} {
				if f := l.Format(ns); f != want {
					t.Errorf("format of %s = %d, want %d", ns, f, want)
				}
			}
		})
	}
}
