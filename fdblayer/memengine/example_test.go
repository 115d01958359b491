package memengine_test

import (
	"context"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// A Layer over a memory engine: a store for a test, gone with the engine.
func ExampleNew() {
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close() // closes the engine too

	ctx := context.Background()
	p := storetest.Partition{Name: "orders"}
	out, err := s.Apply(ctx, p, store.NewBatch().Put(store.Key("seq"), store.Value("1")))
	fmt.Println(out, err)
	v, ok, err := s.Get(ctx, p, store.Key("seq"))
	fmt.Printf("seq=%s %v %v\n", v, ok, err)
	// Output:
	// committed <nil>
	// seq=1 true <nil>
}
