// Package schema is an example of an importing project's own schema: a
// small order book declared the way mkitfdb declares its own, generated
// into ../ordersgen by the same generator.
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
	Region *RegionShard `mk:"tag=1,kind=region"`
}

// RegionShard is one region's order book.
type RegionShard struct {
	Region uint16
}

// OrderKey holds one order, ordered by customer then placement time.
//
//mk:key tag=1
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
