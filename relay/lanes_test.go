package relay

import (
	"testing"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A fire delivers to its targets concurrently on a target store that
// overlaps calls made side by side (the MVCC engine, standing for
// FoundationDB) and one after another on one that runs one writer at a
// time (the memory engine); a test's lane runner forces lanes; a budget
// of 1 is always sequential.
func TestConcurrencyFollowsTheTargetStore(t *testing.T) {
	open := func(e kv.Engine) *fdblayer.Layer {
		l, err := fdblayer.Open(e, fdblayer.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	memory, mvcc := open(memengine.New()), open(fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{}))
	c := &timers.Ctx{Store: memory, Partition: refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("src")}}
	for _, tc := range []struct {
		name   string
		target store.Store
		budget int
		forced bool
		want   int
	}{
		{"overlapping calls", mvcc, 0, false, DefaultConcurrency},
		{"overlapping calls, a bound", mvcc, 4, false, 4},
		{"one writer", memory, 0, false, 1},
		{"one writer, lanes forced by a test", memory, 0, true, DefaultConcurrency},
		{"one lane", mvcc, 1, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHandler(HandlerConfig{Target: tc.target, Budget: Budget{Concurrency: tc.budget}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.forced {
				h.newLanes = func() laneRunner { return &goRunner{done: make(chan int, 8)} }
			}
			f, err := h.newFire(c)
			if err != nil {
				t.Fatal(err)
			}
			defer f.release()
			if f.budget.Concurrency != tc.want {
				t.Fatalf("concurrency %d, want %d", f.budget.Concurrency, tc.want)
			}
		})
	}
}
