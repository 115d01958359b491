// Package schema is the schema of a small ledger whose entries changed
// layout once, the rows the library's migration tests rewrite: a book
// partition holds entries of two versions (EntryV2 adds a note, in format
// 2 of the namespace) under one key class. Generated into ../ledgergen.
//
//mk:namespace ledger
package schema

//go:generate go run ../../../../cmd/codegen -schema . -out ../ledgergen -pkg ledgergen

// Partition is a ledger partition.
//
//mk:union partition
type Partition struct {
	Book *BookPartition `mk:"tag=1,kind=book"`
}

// BookPartition holds one book's entries.
type BookPartition struct {
	Book uint32
}

// EntryKey holds one entry of a book, an EntryV1 or an EntryV2.
//
//mk:key tag=100 value=EntryV1,EntryV2
type EntryKey struct {
	N uint64
}

// EntryV1 is an entry as first written: an amount.
//
//mk:record version=1
type EntryV1 struct {
	Amount uint64
}

// EntryV2 is an entry with a note, of format 2 of the namespace: a
// process that reads only EntryV1 predates it.
//
//mk:record version=2 format=2
type EntryV2 struct {
	Amount uint64
	Note   string `mk:"max=64"`
}
