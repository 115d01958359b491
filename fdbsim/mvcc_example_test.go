package fdbsim_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
	"github.com/mkit-dev/mkitfdb/fdbsim"
)

// Two transactions of an MVCCEngine overlap: both read the key, both
// write it, and the second to commit fails with not_committed (1020), as
// on FoundationDB. OnError waits its backoff and starts it over on the
// later version, where it commits.
func ExampleNewMVCCEngine() {
	ctx := context.Background()
	e := fdbsim.NewMVCCEngine(fdbsim.MVCCConfig{Seed: 1})
	defer e.Close()
	key := []byte("\x02counter\x00")

	a, _ := e.Begin(ctx)
	defer a.Close()
	b, _ := e.Begin(ctx)
	defer b.Close()
	for _, t := range []kv.Txn{a, b} {
		if _, err := t.GetMany(nil, [][]byte{key}); err != nil {
			panic(err)
		}
		t.Set(key, []byte("1"))
	}
	fmt.Println("a:", a.Commit())
	err := b.Commit()
	var fe fdbsim.FDBError
	fmt.Println("b:", errors.As(err, &fe), fe.Code)

	if err := b.OnError(err); err != nil {
		panic(err)
	}
	vals, _ := b.GetMany(nil, [][]byte{key})
	b.Set(key, append(vals[0], '+'))
	fmt.Println("b retried:", b.Commit())
	fmt.Printf("%+v\n", e.Stats())
	// Output:
	// a: <nil>
	// b: true 1020
	// b retried: <nil>
	// {Begun:2 Reads:3 KeysRead:3 Commits:2 Conflicts:1 Retries:1 TooOld:0 Unknown:0}
}
