package fdbsim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdbsim"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// A service's tests run its code on a Layer over an MVCCEngine, as it runs
// over FoundationDB: transactions that overlap conflict and retry, and
// commits may be slowed or report unknown results. The engine counts the
// round trips a cluster would serve.
func Example_layer() {
	ctx := context.Background()
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{
		Latency:       time.Millisecond, // on every Begin, read and commit
		UnknownLanded: 0.01,             // commits that land and report 1021
		Seed:          1,
	})
	l, err := fdblayer.Open(e, fdblayer.Config{}) // a store.Store; l.Close closes e
	if err != nil {
		panic(err)
	}
	defer l.Close()

	p := storetest.Partition{Name: "accounts"}
	b := store.NewBatch().Require(store.Absent(store.Key("alice"))).Put(store.Key("alice"), store.Value("100"))
	out, err := l.Apply(ctx, p, b)
	fmt.Println(out.Outcome, err)
	v, _, _ := l.Get(ctx, p, store.Key("alice"))
	// Open's own round trips among them: it looked for rows under its
	// root, read the store's formats and wrote this process's row (its
	// gate, package evolve): 2 transactions, 4 reads, 1 commit.
	fmt.Printf("%s %+v\n", v, e.Stats())
	// Output:
	// committed <nil>
	// 100 {Begun:4 Reads:6 KeysRead:5 Commits:2 Conflicts:0 Retries:0 TooOld:0 Unknown:0}
}
