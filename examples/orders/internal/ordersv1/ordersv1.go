// Package ordersv1 is the orders service as its binary was released
// before OrderV2: package orders (examples/orders) with the schema's
// OrderKey family of OrderV1 alone (./schema, generated into ./ordersgen
// without registering itself). It reads an order through the family
// (Values), so that an order of a newer version fails with
// store.ErrNewerVersion and is held, never taken for corrupt, and writes
// OrderV1. It exists for the mixed-version test of package orders, which
// runs it and the current service on one store as the older and the newer
// binary of a rolling deploy: it stands for code already deployed, so it
// changes only as a released binary would have.
package ordersv1

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mkit-dev/mkitfdb/examples/orders/internal/ordersv1/ordersgen"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// KindShip is the kind of the timer that ships an order: a service's kind,
// from timers.MinUserKind up. Its reference is the order's placement time
// in decimal; its value is empty.
const KindShip timers.Kind = 1000

// ErrExists is returned by Place for an order already placed.
var ErrExists = errors.New("orders: order already placed")

// Values reads an order in every version of its family (OrderV1 alone).
var Values = ordersgen.NewOrderKeyValues(struct{}{})

// ServiceConfig configures a Service. Store is required.
type ServiceConfig struct {
	// Store holds the service's partitions.
	Store store.Store
	// ShipDelay is how long after placement an order ships (default: at
	// once).
	ShipDelay time.Duration
}

// Service places orders. It is safe for concurrent use.
type Service struct {
	store     store.Store
	shipDelay time.Duration
}

// NewService returns the service c configures. It fails with an error
// wrapping store.ErrInvalid for a nil Store or a negative ShipDelay.
func NewService(c ServiceConfig) (*Service, error) {
	switch {
	case c.Store == nil:
		return nil, fmt.Errorf("orders: ServiceConfig.Store is nil: %w", store.ErrInvalid)
	case c.ShipDelay < 0:
		return nil, fmt.Errorf("orders: ServiceConfig.ShipDelay %v is negative: %w", c.ShipDelay, store.ErrInvalid)
	}
	return &Service{store: c.Store, shipDelay: c.ShipDelay}, nil
}

// Place places an open order of customer, placed at placedAt (to the
// millisecond: the order's key holds the time as stored data does, see
// store.EncodeTime), for order.Region: in one batch of the customer's
// shard, the order (guarded absent), its KindShip timer, due
// ServiceConfig.ShipDelay later, and a relay row that puts the order's
// index entry into the region's shard. It fails with ErrExists when the
// order is already placed (a retried Place after an unknown result finds
// its own order and fails the same way), with an error wrapping
// store.ErrInvalid for an order that breaks the schema or a placedAt not
// after the Unix epoch, and with the store's errors.
func (s *Service) Place(ctx context.Context, customer ordersgen.CustomerID, placedAt time.Time, order ordersgen.OrderV1) error {
	placedAtMs, err := store.EncodeTime(placedAt)
	if err == nil && placedAtMs == 0 {
		err = fmt.Errorf("%w: the zero Time or the epoch", store.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("orders: placed at %v: %w", placedAt, err)
	}
	placedAt = store.DecodeTime(placedAtMs)
	shard := ordersgen.CustomerShard{Customer: customer}
	order.Status = ordersgen.StatusOpen
	key, value, err := encodeOrder(customer, placedAtMs, order)
	if err != nil {
		return err
	}
	caps := s.store.Capabilities()
	exists := false
	_, err = store.Transact(ctx, s.store, shard, func(ctx context.Context, r store.Reader) (*store.Batch, error) {
		if _, ok, err := r.Get(ctx, key); err != nil || ok {
			exists = ok
			return nil, err
		}
		observed, err := outbox.Read(ctx, r)
		if err != nil {
			return nil, err
		}
		b := store.NewBatch().Require(store.Absent(key)).Put(key, value)
		if err := relayIndex(ctx, s.store, observed, customer, placedAtMs, order, placedAt, b); err != nil {
			return nil, err
		}
		ship := timers.Timer{Kind: KindShip, Reference: reference(placedAtMs), DueAt: placedAt.Add(s.shipDelay)}
		if err := timers.Schedule(b, caps, nil, ship); err != nil {
			return nil, err
		}
		return b, nil
	}, store.TransactConfig{})
	if err == nil && exists {
		return fmt.Errorf("%w: %s at %v", ErrExists, customer, placedAt)
	}
	return err
}

// ShippedEvent is the payload of an order's "order.shipped" outcome.
type ShippedEvent struct {
	Customer   string `json:"customer"`
	PlacedAtMs uint64 `json:"placed_at_ms"`
	Region     uint16 `json:"region"`
	Lines      []Line `json:"lines"`
}

// Line is one line of a shipped order.
type Line struct {
	SKU      string `json:"sku"`
	Quantity uint32 `json:"quantity"`
}

// Shipped is the outcome source of shipped orders ("orders.shipped"): an
// order becomes terminal when it ships, its outcome is "order.shipped"
// (id "ord_<customer>_<placed at ms>", timestamp the time it shipped,
// data a ShippedEvent), and the order stays once the outcome is
// acknowledged. Register it in the outcome.Delivery that pushes the
// service's outcomes.
var Shipped = must(outcome.NewSource(outcome.SourceConfig[ordersgen.OrderKey, ordersgen.OrderV1]{
	Name:      "orders.shipped",
	Namespace: ordersgen.SchemaNamespace,
	ParseKey:  ordersgen.ParseOrderKey,
	Decode:    Values.Decode,
	Encode:    outcome.OneVersion(ordersgen.EncodeOrderV1),
	Terminal:  func(o ordersgen.OrderV1) bool { return o.Status == ordersgen.StatusShipped },
	ID: func(k ordersgen.OrderKey, _ ordersgen.OrderV1) string {
		return "ord_" + k.Customer.String() + "_" + reference(k.PlacedAtMs)
	},
	Event: func(k ordersgen.OrderKey, o ordersgen.OrderV1) (outcome.Event, error) {
		e := ShippedEvent{Customer: k.Customer.String(), PlacedAtMs: k.PlacedAtMs, Region: o.Region, Lines: make([]Line, len(o.Lines))}
		for i, l := range o.Lines {
			e.Lines[i] = Line{SKU: l.SKU, Quantity: l.Quantity}
		}
		// No time: the outcome's is when it was queued, as the order shipped.
		return outcome.Event{Type: "order.shipped", Data: e}, nil
	},
	OnAck: outcome.KeepRecord,
}))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Shipper fires KindShip timers: it marks the order shipped, queues its
// outcome (Shipped) and relays its new status to the region's index, in
// the batch that completes the timer.
type Shipper struct{}

// Kind is KindShip.
func (Shipper) Kind() timers.Kind { return KindShip }

// Fire ships the order the timer names. An order already shipped or
// cancelled completes the timer with nothing written. A missing order, an
// order or reference that does not decode, or a partition that is not a
// customer shard is corrupt data (store.ErrCorrupt): the timer stays for
// a later run and the run reports it. An order of a newer version
// (store.ErrNewerVersion) is held for a binary that reads it.
func (Shipper) Fire(ctx context.Context, c *timers.Ctx, t timers.DueTimer) (timers.Fired, error) {
	customer, err := customerOf(c.Partition)
	if err != nil {
		return nil, err
	}
	placedAtMs, err := strconv.ParseUint(t.Reference, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("orders: ship timer reference %q: %w", t.Reference, store.ErrCorrupt)
	}
	key, err := ordersgen.AppendOrderKey(nil, customer, placedAtMs)
	if err != nil {
		return nil, fmt.Errorf("orders: ship timer %q: %w: %w", t.Reference, store.ErrCorrupt, err)
	}
	stored, ok, err := c.Store.Get(ctx, c.Partition, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("orders: ship timer %q: no order %s at %d: %w", t.Reference, customer, placedAtMs, store.ErrCorrupt)
	}
	order, err := Values.Decode(stored)
	switch {
	case errors.Is(err, store.ErrNewerVersion):
		return nil, fmt.Errorf("orders: order %s at %d: %w", customer, placedAtMs, err)
	case err != nil:
		return nil, fmt.Errorf("orders: order %s at %d: %w: %w", customer, placedAtMs, store.ErrCorrupt, err)
	}
	if order.Status != ordersgen.StatusOpen {
		return timers.Done{}, nil
	}
	order.Status = ordersgen.StatusShipped
	// The outcome rewrites the order, guarded by the order as read.
	ship := func(ob *outbox.Builder) error {
		_, err := Shipped.Append(ctx, ob, ordersgen.OrderKey{Customer: customer, PlacedAtMs: placedAtMs}, stored, order)
		return err
	}
	observed, err := outbox.Read(ctx, store.ReaderOf(c.Store, c.Partition))
	if err != nil {
		return nil, err
	}
	b := store.NewBatch()
	if err := relayIndex(ctx, c.Store, observed, customer, placedAtMs, order, c.Now, b, ship); err != nil {
		return nil, err
	}
	return timers.Done{Batch: b}, nil
}

// relayIndex adds to b, a batch of the customer's shard, a relay row that
// writes the order's index entry into its region's shard, and the rows
// more appends to the same outbox, with the outbox guards that make the
// append atomic: observed is the shard's outbox state as the batch's
// builder read it from s (a concurrent append fails the batch's guards).
// The rows carry the trace context of ctx's span.
func relayIndex(ctx context.Context, s store.Store, observed outbox.Observed, customer ordersgen.CustomerID, placedAtMs uint64, order ordersgen.OrderV1, now time.Time, b *store.Batch, more ...func(*outbox.Builder) error) error {
	indexKey, err := ordersgen.AppendRegionOrderKey(nil, customer, placedAtMs)
	if err != nil {
		return fmt.Errorf("orders: index key: %w", err)
	}
	entry, err := ordersgen.EncodeIndexEntryV1(ordersgen.IndexEntryV1{Status: order.Status, Lines: uint32(len(order.Lines))})
	if err != nil {
		return fmt.Errorf("orders: index entry: %w", err)
	}
	ob, err := outbox.NewBuilder(s, now, observed)
	if err != nil {
		return err
	}
	region := ordersgen.RegionShard{Region: order.Region}
	if _, err := ob.Relay(ctx, region, []gen.RelayPut{{Key: indexKey, Value: entry}}, nil); err != nil {
		return err
	}
	for _, add := range more {
		if err := add(ob); err != nil {
			return err
		}
	}
	return ob.Finish(b)
}

// encodeOrder returns the order's key and value, failing with an error
// wrapping store.ErrInvalid when either breaks the schema.
func encodeOrder(customer ordersgen.CustomerID, placedAtMs uint64, order ordersgen.OrderV1) (store.Key, store.Value, error) {
	key, err := ordersgen.AppendOrderKey(nil, customer, placedAtMs)
	if err != nil {
		return nil, nil, fmt.Errorf("orders: order key: %w: %w", store.ErrInvalid, err)
	}
	value, err := ordersgen.EncodeOrderV1(order)
	if err != nil {
		return nil, nil, fmt.Errorf("orders: order: %w: %w", store.ErrInvalid, err)
	}
	return key, value, nil
}

// customerOf returns the customer of a customer shard, which the
// scheduler hands a handler as the generated partition (with
// SchedulerConfig.ParsePartition set to ParsePartition) or as its identity.
func customerOf(p store.Partition) (ordersgen.CustomerID, error) {
	if id, ok := p.(store.Identity); ok {
		raw, err := id.AppendTuple(nil)
		if err != nil {
			return ordersgen.CustomerID{}, fmt.Errorf("orders: partition %s: %w", store.PartitionName(p), store.ErrCorrupt)
		}
		parsed, err := ordersgen.ParseShard(raw)
		if err != nil {
			return ordersgen.CustomerID{}, fmt.Errorf("orders: partition %s: %w: %w", store.PartitionName(p), store.ErrCorrupt, err)
		}
		p = parsed
	}
	shard, ok := p.(ordersgen.CustomerShard)
	if !ok {
		return ordersgen.CustomerID{}, fmt.Errorf("orders: a ship timer in %s, not a customer shard: %w", store.PartitionName(p), store.ErrCorrupt)
	}
	return shard.Customer, nil
}

// reference is a ship timer's reference: the placement time in decimal.
func reference(placedAtMs uint64) string { return strconv.FormatUint(placedAtMs, 10) }

// ParsePartition parses an identity of the orders schema, for
// timers.SchedulerConfig.ParsePartition (names in logs and metrics);
// identities of other schemas fail, and the scheduler fires them as
// store.Identity values.
var ParsePartition = timers.PartitionParser(ordersgen.ParseShard)
