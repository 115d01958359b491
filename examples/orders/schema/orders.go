// Package schema is an example of an importing project's own schema: a
// small order book declared the way mkitfdb declares its own, generated
// into ../ordersgen by the same generator. Package orders (the directory
// above) is the service built on it.
//
//mk:namespace orders
package schema

//go:generate go run github.com/mkit-dev/mkitfdb/cmd/codegen -schema . -out ../ordersgen -pkg ordersgen

// CustomerID names a customer.
//
//mk:identity min=1 max=40
type CustomerID string

// Status is an order's state.
//
//mk:enum
type Status uint8

const (
	StatusOpen      Status = 1
	StatusShipped   Status = 2
	StatusCancelled Status = 3
)

// Shard identifies the partition an order book lives in.
//
//mk:union partition
type Shard struct {
	Region   *RegionShard   `mk:"tag=1,kind=region"`
	Customer *CustomerShard `mk:"tag=2,kind=customer"`
}

// RegionShard is one region's order book.
type RegionShard struct {
	Region uint16
}

// CustomerShard is one customer's order book. Its identity differs from
// the reference domain's NamespacePartition (variant tag 2, one string)
// only by the namespace, which is what keeps their rows apart.
type CustomerShard struct {
	Customer CustomerID
}

// OrderKey holds one order, ordered by customer then placement time: an
// OrderV1, or an OrderV2 once the store's format of the namespace is 2.
//
//mk:key tag=100 value=OrderV1,OrderV2
type OrderKey struct {
	Customer   CustomerID
	PlacedAtMs uint64
}

// RegionOrderKey indexes, in a region's shard, one order of a customer
// of the region (an IndexEntryV1), in the order of OrderKey.
//
//mk:key tag=101 value=IndexEntryV1
type RegionOrderKey struct {
	Customer   CustomerID
	PlacedAtMs uint64
}

// OrderV1 is an order, in its customer's shard.
//
//mk:record version=1
type OrderV1 struct {
	Status Status
	Region uint16
	Lines  []Line `mk:"max=50"`
	Note   string `mk:"max=200"`
}

// OrderV2 is an order that may be a gift (wrapped, no prices on the
// delivery note). It is of format 2 of the namespace: a process whose
// binary reads only OrderV1 predates it, so a store writes it only once
// its format is raised to 2; until then an order is written as an OrderV1,
// without Gift.
//
//mk:record version=2 format=2
type OrderV2 struct {
	Status Status
	Region uint16
	Lines  []Line `mk:"max=50"`
	Note   string `mk:"max=200"`
	Gift   bool
}

// IndexEntryV1 is what a region's index knows of an order.
//
//mk:record version=1
type IndexEntryV1 struct {
	Status Status
	Lines  uint32
}

// Line is one line of an order.
type Line struct {
	SKU      string `mk:"max=32"`
	Quantity uint32 `mk:"min=1"`
}
