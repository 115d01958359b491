package store_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// A guarded batch lands whole or not at all: the first Apply creates the
// account, the second finds it present and writes nothing; a batch guarded
// by the value it read moves the balance only if no one else did.
func ExampleBatch() {
	ctx := context.Background()
	var s store.Store
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("bank")}
	key := store.Key("balance/ada")

	create := store.NewBatch().Require(store.Absent(key)).Put(key, store.Value("100"))
	for range 2 {
		out, err := s.Apply(ctx, p, create)
		if err != nil {
			panic(err)
		}
		fmt.Println("create:", out.Outcome)
	}

	read, _, err := s.Get(ctx, p, key)
	if err != nil {
		panic(err)
	}
	move := store.NewBatch().Require(store.Equals(key, read)).Put(key, store.Value("70"))
	out, err := s.Apply(ctx, p, move)
	if err != nil {
		panic(err)
	}
	fmt.Println("move:", out.Outcome)
	out, err = s.Apply(ctx, p, move) // the balance is no longer what it read
	if err != nil {
		panic(err)
	}
	fmt.Println("move again:", out.Outcome)
	// Output:
	// create: committed
	// create: precondition failed
	// move: committed
	// move again: precondition failed
}

// Scan reads a range of one partition in pages; each page's Next resumes
// after its last row, and is nil after the last page.
func ExampleStore_scan() {
	ctx := context.Background()
	var s store.Store
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("bank")}
	b := store.NewBatch()
	for _, name := range []string{"ada", "bob", "cy", "dee", "eve"} {
		b.Put(store.Key("balance/"+name), store.Value("1"))
	}
	if _, err := s.Apply(ctx, p, b); err != nil {
		panic(err)
	}

	var after store.Cursor
	for page := 1; ; page++ {
		got, err := s.Scan(ctx, p, store.Key("balance/"), store.Key("balance0"), after, 2)
		if err != nil {
			panic(err)
		}
		fmt.Print("page ", page, ":")
		for _, row := range got.Entries {
			fmt.Printf(" %s", row.Key)
		}
		fmt.Println()
		if got.Next == nil {
			break
		}
		after = got.Next
	}
	// Output:
	// page 1: balance/ada balance/bob
	// page 2: balance/cy balance/dee
	// page 3: balance/eve
}

// Every error of a Store wraps one of the contract's sentinels, which say
// what the caller may assume: ErrInvalid means nothing was written and
// retrying the same input will not help.
func ExampleErrInvalid() {
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{})
	if err != nil {
		panic(err)
	}
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("bank")}
	_, err = s.Apply(context.Background(), p, store.NewBatch()) // an empty batch
	fmt.Println(errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrUnavailable))
	// Output: true false
}
