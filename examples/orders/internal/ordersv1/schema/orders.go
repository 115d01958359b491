// Package schema is the orders example's schema as it was released before
// OrderV2: OrderKey's family holds OrderV1 alone, and the namespace knows
// format 1. Its lock is the lock of that release. It is generated, without
// registering itself (codegen -unregistered), into ../ordersgen: the codecs
// of the older binary, which a test links beside the service's own
// (examples/orders/ordersgen) to run both binaries on one store. Never edit
// it: it stands for code already deployed.
//
//mk:namespace orders
package schema

//go:generate go run github.com/mkit-dev/mkitfdb/cmd/codegen -schema . -out ../ordersgen -pkg ordersgen -unregistered

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

// OrderKey holds one order, ordered by customer then placement time.
//
//mk:key tag=100 value=OrderV1
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
