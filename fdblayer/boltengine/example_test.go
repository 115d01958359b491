package boltengine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// A Layer over a bbolt file: what it commits is there when the file is
// opened again, and a second handle on an open file is refused at once
// under NoLockWait.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "boltengine-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.bbolt")
	ctx := context.Background()
	p := storetest.Partition{Name: "orders"}

	e, err := boltengine.Open(path, boltengine.Config{})
	if err != nil {
		panic(err)
	}
	s, err := fdblayer.Open(e, fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	out, err := s.Apply(ctx, p, store.NewBatch().Put(store.Key("seq"), store.Value("1")))
	fmt.Println(out, err)

	_, err = boltengine.Open(path, boltengine.Config{LockTimeout: boltengine.NoLockWait})
	fmt.Println("locked:", errors.Is(err, boltengine.ErrLocked), errors.Is(err, store.ErrUnavailable))
	s.Close()

	e, err = boltengine.Open(path, boltengine.Config{MustExist: true, ReadOnly: true})
	if err != nil {
		panic(err)
	}
	s, err = fdblayer.Open(e, fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	v, ok, err := s.Get(ctx, p, store.Key("seq"))
	fmt.Printf("seq=%s %v %v\n", v, ok, err)
	// Output:
	// committed <nil>
	// locked: true true
	// seq=1 true <nil>
}
