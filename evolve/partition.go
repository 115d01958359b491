package evolve

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/store"
)

// Partition is the library's own partition of a store: the rows about
// the store itself (its formats, the processes that run against it, the
// migrations' checkpoints), which package evolve alone writes. Its
// identity is the tuple (null, "mkitfdb", "store"), which starts with a
// tuple null, as no schema's partition identity does (they start with
// their namespace), so it shares the store with every schema's
// partitions; it never holds a timer.
var Partition store.Partition = mustPartition()

func mustPartition() store.Identity {
	id := tuple.AppendString(tuple.AppendString(tuple.AppendNull(nil), "mkitfdb"), "store")
	p, err := store.ParseIdentity(id)
	if err != nil {
		panic(fmt.Sprintf("evolve: store partition: %v", err))
	}
	return p
}
