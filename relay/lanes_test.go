package relay

import (
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/timers"
)

// A fire delivers to its targets concurrently while the target store's
// calls wait (or none was measured yet) and one after another once they
// average under LaneWait; a test's lane runner forces lanes; a budget of
// 1 is always sequential.
func TestConcurrencyFollowsTheTargetCallsLatency(t *testing.T) {
	l, err := fdblayer.Open(fdblayer.NewMemoryEngine())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := &timers.Ctx{Store: l, Partition: refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("src")}}
	for _, tc := range []struct {
		name   string
		budget int
		callNs time.Duration
		forced bool
		want   int
	}{
		{"nothing measured", 0, 0, false, DefaultConcurrency},
		{"calls that wait", 0, 2 * LaneWait, false, DefaultConcurrency},
		{"calls at the bound", 4, LaneWait, false, 4},
		{"fast calls", 0, LaneWait - 1, false, 1},
		{"fast calls, lanes forced by a test", 0, time.Microsecond, true, DefaultConcurrency},
		{"one lane", 1, 2 * LaneWait, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Handler{Target: l, Budget: Budget{Concurrency: tc.budget}}
			h.callNs.Store(int64(tc.callNs))
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

// observe keeps a moving average that follows the calls' latency.
func TestObserveFollowsTheCallsLatency(t *testing.T) {
	h := &Handler{}
	h.observe(time.Millisecond)
	if got := time.Duration(h.callNs.Load()); got != time.Millisecond {
		t.Fatalf("first sample: %v", got)
	}
	for range 100 {
		h.observe(10 * time.Microsecond)
	}
	if got := time.Duration(h.callNs.Load()); got >= LaneWait || got < 10*time.Microsecond {
		t.Fatalf("after fast calls: %v", got)
	}
	h.observe(0)
	if h.callNs.Load() <= 0 {
		t.Fatal("the average fell to 0, which means nothing measured")
	}
}
