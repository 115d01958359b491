package fdblayer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// A Layer over the embedded bbolt engine: a guarded batch, a read, and a
// paged scan.
func Example() {
	dir, err := os.MkdirTemp("", "fdblayer-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	engine, err := boltengine.Open(filepath.Join(dir, "state.bbolt"), boltengine.Config{})
	if err != nil {
		panic(err)
	}
	s, err := fdblayer.Open(engine, fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	ctx := context.Background()
	p := storetest.Partition{Name: "orders"}
	b := store.NewBatch().Require(store.Absent(store.Key("seq"))).
		Put(store.Key("seq"), store.Value("1")).
		Put(store.Key("row/1"), store.Value("first")).
		Put(store.Key("row/2"), store.Value("second"))
	out, err := s.Apply(ctx, p, b)
	fmt.Println(out, err)

	out, _ = s.Apply(ctx, p, b) // the same guard again
	fmt.Println(out)

	v, ok, _ := s.Get(ctx, p, store.Key("seq"))
	fmt.Printf("seq=%s %v\n", v, ok)

	var after store.Cursor
	for {
		page, err := s.Scan(ctx, p, store.Key("row/"), store.Key("row0"), after, 1)
		if err != nil {
			panic(err)
		}
		for _, e := range page.Entries {
			fmt.Printf("%s=%s\n", e.Key, e.Value)
		}
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	// Output:
	// committed <nil>
	// precondition 0 failed: absent(736571)
	// seq=1 true
	// row/1=first
	// row/2=second
}
