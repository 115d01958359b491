package relay_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

// rowSources is a hook that records the source and target of every row it
// is shown.
type rowSources struct {
	relay.NoHook
	mu               sync.Mutex
	sources, targets []string
}

func (h *rowSources) BeforeApply(_ context.Context, target store.Partition, rows []relay.Row, _ []store.KeyValue, _ *store.Batch) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rows {
		h.sources = append(h.sources, store.PartitionName(r.Source))
		h.targets = append(h.targets, store.PartitionName(target))
	}
	return nil
}

// The relay delivers from and to the partitions of a schema that is not
// the library's (examples/orders' ordersgen), with no parse: a row names
// its target by its tuple identity, the source's high-water key names the
// source by its own, and a source addressed only by its identity (as the
// scheduler finds it in the due index) is the same source. Rows of the
// library's own partitions share the store and the fire.
func TestRelaysBetweenAServicesOwnPartitions(t *testing.T) {
	region := ordersgen.RegionShard{Region: 7}
	acme := ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("acme")}
	acmeID, err := store.IdentityOf(acme)
	require.NoError(t, err)
	regionID, err := store.IdentityOf(region)
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		source store.Partition // as the timer run is given it
	}{
		{"generated source", region},
		{"source by identity", regionID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, eng := range testengine.All {
				t.Run(eng.Name, func(t *testing.T) {
					ctx := context.Background()
					clk := clock.NewManual(start)
					s := openLayer(t, eng.Open(t, "orders.bbolt"), clk)

					o, err := outbox.Read(ctx, store.ReaderOf(s, region))
					require.NoError(t, err)
					ob, err := outbox.NewBuilder(s, start, o)
					require.NoError(t, err)
					for _, target := range []store.Partition{acme, acmeID, ta} {
						_, err := ob.Relay(context.Background(), target, []gen.RelayPut{{Key: []byte("latest"), Value: []byte(store.PartitionName(target))}}, nil)
						require.NoError(t, err)
					}
					b := store.NewBatch()
					require.NoError(t, ob.Finish(b))
					out, err := s.Apply(ctx, region, b)
					require.NoError(t, err)
					require.True(t, out.Committed(), "%v", out)

					hook := &rowSources{}
					rh, err := relay.NewHandler(relay.HandlerConfig{Target: s, Hook: hook})
					require.NoError(t, err)
					reg, err := timers.NewRegistry(rh)
					require.NoError(t, err)
					rep, err := timers.RunDue(ctx, s, tc.source, reg, start, timers.RunConfig{Clock: clk})
					require.NoError(t, err)
					require.Equal(t, 1, rep.Fired)

					// acme and its identity are one target: its rows 1 and 2 land
					// in order, in one batch; ta (the library's) gets row 3.
					v, _, err := s.Get(ctx, acme, store.Key("latest"))
					require.NoError(t, err)
					assert.Equal(t, store.PartitionName(acmeID), string(v), "the later row wins")
					v, _, err = s.Get(ctx, ta, store.Key("latest"))
					require.NoError(t, err)
					assert.Equal(t, store.PartitionName(ta), string(v))
					for target, want := range map[store.Partition]uint64{acme: 2, ta: 3} {
						hw, err := gen.AppendRelayHighWaterKey(nil, ids(region)[0])
						require.NoError(t, err)
						v, ok, err := s.Get(ctx, target, hw)
						require.NoError(t, err)
						require.True(t, ok, "high-water mark of %s in %s", region, target)
						mark, err := gen.DecodeU64Value(v)
						require.NoError(t, err)
						assert.Equal(t, want, mark.Value, "high-water mark in %s", target)
					}
					assert.Equal(t, []string{store.PartitionName(tc.source), store.PartitionName(tc.source), store.PartitionName(tc.source)}, hook.sources, "Row.Source")
					// Targets are delivered concurrently: their order is not the rows'.
					slices.Sort(hook.targets)
					want := []string{store.PartitionName(acmeID), store.PartitionName(acmeID), store.PartitionName(identity(t, ta))}
					slices.Sort(want)
					assert.Equal(t, want, hook.targets, "targets by identity")

					// Nothing is left queued in the service's source.
					page, err := s.Scan(ctx, region, nil, nil, nil, 10)
					require.NoError(t, err)
					for _, kv := range page.Entries {
						_, err := gen.ParseRelayKey(kv.Key)
						assert.Error(t, err, "a relay row left queued: %x", []byte(kv.Key))
					}
				})
			}
		})
	}
}

// identity returns p's store.Identity.
func identity(t testing.TB, p store.Partition) store.Identity {
	id, err := store.IdentityOf(p)
	require.NoError(t, err)
	return id
}
