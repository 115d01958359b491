package evolve

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Partition is the partition that holds the store's evolution rows: each
// namespace's store format (gen.StoreFormatKey) and how it got there
// (gen.FormatRaisedKey), the live processes and the formats they know
// (gen.ProcessKey), and the migrations' checkpoints. Its identity is the
// tuple (null, "mkitfdb", "store"), which no schema's partition identity
// starts with (they start with their namespace), so it shares the store
// with every schema's partitions. It never holds a timer.
var Partition store.Partition = mustPartition()

func mustPartition() store.Identity {
	id := tuple.AppendString(tuple.AppendString(tuple.AppendNull(nil), "mkitfdb"), "store")
	p, err := store.ParseIdentity(id)
	if err != nil {
		panic(fmt.Sprintf("evolve: partition: %v", err))
	}
	return p
}

// The value families of the evolution rows, read in every version this
// binary knows: a row of a newer version is gen's ErrNewerVersion.
var (
	formatValues  = gen.NewStoreFormatKeyValues(struct{}{})
	raisedValues  = gen.NewFormatRaisedKeyValues(struct{}{})
	processValues = gen.NewProcessKeyValues(struct{}{})
)

// formatKey is the key of namespace ns's store format row.
func formatKey(ns string) (store.Key, error) {
	k, err := gen.AppendStoreFormatKey(nil, ns)
	if err != nil {
		return nil, fmt.Errorf("evolve: format key of namespace %q: %w", ns, err)
	}
	return k, nil
}

// raisedKey is the key of the history row of namespace ns at format f.
func raisedKey(ns string, f uint32) (store.Key, error) {
	k, err := gen.AppendFormatRaisedKey(nil, ns, f)
	if err != nil {
		return nil, fmt.Errorf("evolve: history key of namespace %q: %w", ns, err)
	}
	return k, nil
}

// processKey is the key of process name's row.
func processKey(name string) (store.Key, error) {
	k, err := gen.AppendProcessKey(nil, name)
	if err != nil {
		return nil, fmt.Errorf("evolve: process key %q: %w", name, err)
	}
	return k, nil
}
