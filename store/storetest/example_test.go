package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// An implementation's conformance test is one call to Run with an opener
// of fresh, empty stores that read time from the suite's clock. The
// opener registers the store's Close with t.Cleanup when it has one.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
			return storetest.NewReferenceStore(clk)
		})
	}
	// In an implementation's package this is func TestConformance.
	_ = testConformance
}

// A commit whose result is lost: the caller sees ErrUnknownResult, replays
// its guarded batch, and the guard keeps the replay from applying twice.
func ExampleFaults_CommitThenFailNext() {
	ctx := context.Background()
	faults := storetest.NewFaults(storetest.NewReferenceStore(clock.NewManual(time.UnixMilli(0))))
	p := storetest.Partition{Name: "orders"}
	key := store.Key("order/1")

	faults.CommitThenFailNext()
	b := store.NewBatch().Require(store.Absent(key)).Put(key, store.Value("placed"))
	_, err := faults.Apply(ctx, p, b)
	fmt.Println("first attempt unknown:", errors.Is(err, store.ErrUnknownResult))

	out, err := faults.Apply(ctx, p, b)
	fmt.Println("replay:", out, err)

	v, _, _ := faults.Inner().Get(ctx, p, key)
	fmt.Println("stored:", string(v))
	fmt.Println("Apply calls:", faults.Calls(storetest.MethodApply))
	// Output:
	// first attempt unknown: true
	// replay: precondition 0 failed: absent(6f726465722f31) <nil>
	// stored: placed
	// Apply calls: 2
}
