// Package schema is an example of an importing project's own schema: a
// small order book declared the way mkitfdb declares its own, generated
// into ../ordersgen by the same generator.
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
// the library's NamespacePartition (variant tag 2, one string) only by
// the namespace, which is what keeps their rows apart.
type CustomerShard struct {
	Customer CustomerID
}

// OrderKey holds one order, ordered by customer then placement time.
//
//mk:key tag=100
type OrderKey struct {
	Customer   CustomerID
	PlacedAtMs uint64
}

// OrderV1 is an order.
//
//mk:record version=1
type OrderV1 struct {
	Status Status
	Lines  []Line `mk:"max=50"`
	Note   string `mk:"max=200"`
}

// Line is one line of an order.
type Line struct {
	SKU      string `mk:"max=32"`
	Quantity uint32 `mk:"min=1"`
}
