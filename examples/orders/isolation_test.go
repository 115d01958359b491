// Package orders_test shows that the partitions of two schemas, an
// importing service's (examples/orders, namespace "orders") and the
// reference domain's (refdomain, namespace "refdomain"), share a store
// without ever sharing a row, while the library's key classes live in
// both.
package orders_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/testengine"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// partitions are the reference domain's partitions and the orders schema's, with
// the same names ("acme", region 1) and the same variant tags: without
// namespaces ordersgen.CustomerShard{acme} and refdomain.NamespacePartition{acme}
// would be one partition (TestIsolationCasesCollideWithoutNamespaces).
func partitions() []store.Partition {
	ns := refdomain.MustNamespaceKey("acme")
	return []store.Partition{
		refdomain.RefPartition{NS: ns, Repo: refdomain.MustRepoName("acme"), ShardRef: refdomain.MustShardRef("acme")},
		refdomain.NamespacePartition{NS: ns},
		refdomain.CoordinatorPartition{NS: ns},
		refdomain.RepoIndexPartition{NS: ns, Repo: refdomain.MustRepoName("acme")},
		refdomain.RefIndexPartition{NS: ns, Repo: refdomain.MustRepoName("acme"), ShardRef: refdomain.MustShardRef("acme")},
		refdomain.ContentShardPartition{NS: ns, Shard: 1},
		ordersgen.RegionShard{Region: 1},
		ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("acme")},
	}
}

// sharedKeys are the keys every partition holds: library key classes
// (tags 1 and 16, which live in any partition), the first key class of
// each schema (tag 100 in both: the orders schema's OrderKey and the
// reference domain's ReservationKey) and raw keys, the same bytes in every
// partition.
func sharedKeys(t *testing.T) []store.Key {
	t.Helper()
	order, err := ordersgen.AppendOrderKey(nil, ordersgen.MustCustomerID("acme"), 1)
	if err != nil {
		t.Fatal(err)
	}
	reservation, err := refdomain.AppendReservationKey(nil, refdomain.MustReservationID("acme"))
	if err != nil {
		t.Fatal(err)
	}
	return []store.Key{
		gen.AppendOutboxSequenceKey(nil),
		gen.AppendRelayKey(nil, 1),
		gen.AppendRelayKey(nil, 2),
		order,
		reservation,
		store.Key("acme"),
		store.Key{0x00},
	}
}

// value is what partition p holds at key: it names both.
func value(p store.Partition, key store.Key) store.Value {
	return store.Value(fmt.Sprintf("%s:%x", store.PartitionName(p), key))
}

// fill writes every shared key into each of parts, its own value at each.
func fill(t *testing.T, s store.Store, parts []store.Partition, keys []store.Key) {
	t.Helper()
	for _, p := range parts {
		b := store.NewBatch()
		for _, k := range keys {
			b.Put(k, value(p, k))
		}
		if out, err := s.Apply(context.Background(), p, b); err != nil || !out.Committed() {
			t.Fatalf("fill %s: %v, %v", store.PartitionName(p), out, err)
		}
	}
}

func open(t *testing.T, e testengine.Engine, file string) store.Store {
	t.Helper()
	s, err := fdblayer.Open(e.Open(t, file), fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPartitionsOfTwoSchemasNeverShareRows fills the reference domain's partitions
// and the orders schema's with the same keys in one store, then shows that
// every read of one partition sees its own rows only: a whole scan, a
// class range scan, a scan page by page, Get, and Stats (equal to the
// partition's Stats in a store holding it alone); and that a cursor of
// one partition is refused by every other with store.ErrInvalid.
func TestPartitionsOfTwoSchemasNeverShareRows(t *testing.T) {
	ctx := context.Background()
	for _, e := range testengine.All {
		t.Run(e.Name, func(t *testing.T) {
			parts, keys := partitions(), sharedKeys(t)
			s := open(t, e, "shared.db")
			fill(t, s, parts, keys)
			for i, p := range parts {
				name := store.PartitionName(p)
				want := ownRows(p, keys)

				page, err := s.Scan(ctx, p, nil, nil, nil, 1000)
				if err != nil {
					t.Fatalf("scan %s: %v", name, err)
				}
				if page.Next != nil {
					t.Errorf("scan %s: a cursor after %d rows, want the range exhausted", name, len(page.Entries))
				}
				sameRows(t, name+" whole scan", page.Entries, want)

				start, end := ordersgen.ClassRange(ordersgen.TagOrderKey)
				page, err = s.Scan(ctx, p, start, end, nil, 1000)
				if err != nil {
					t.Fatalf("class scan %s: %v", name, err)
				}
				var inClass []store.KeyValue
				for _, kv := range want {
					if bytes.Compare(kv.Key, start) >= 0 && bytes.Compare(kv.Key, end) < 0 {
						inClass = append(inClass, kv)
					}
				}
				// Tag 100 is both schemas' first key class (OrderKey and
				// ReservationKey): two shared keys, the partition's own rows.
				if len(inClass) != 2 {
					t.Fatalf("%d shared keys of tag 100, want 2", len(inClass))
				}
				sameRows(t, name+" order class scan", page.Entries, inClass)

				var paged []store.KeyValue
				var after store.Cursor
				for {
					page, err := s.Scan(ctx, p, nil, nil, after, 1)
					if err != nil {
						t.Fatalf("scan %s after %x: %v", name, after, err)
					}
					paged = append(paged, page.Entries...)
					if page.Next == nil {
						break
					}
					after = page.Next
					for j, other := range parts {
						if j == i {
							continue
						}
						if _, err := s.Scan(ctx, other, nil, nil, after, 1); !errors.Is(err, store.ErrInvalid) {
							t.Errorf("a cursor of %s passed to %s: error %v, want store.ErrInvalid", name, store.PartitionName(other), err)
						}
					}
				}
				sameRows(t, name+" paged scan", paged, want)

				for _, k := range keys {
					v, ok, err := s.Get(ctx, p, k)
					if err != nil || !ok || !bytes.Equal(v, value(p, k)) {
						t.Errorf("get %s %x = %q, %v, %v; want %q", name, k, v, ok, err, value(p, k))
					}
				}

				alone := open(t, e, fmt.Sprintf("alone%d.db", i))
				fill(t, alone, []store.Partition{p}, keys)
				got, err := s.Stats(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				solo, err := alone.Stats(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if got != solo || got.ApproximateBytes <= 0 {
					t.Errorf("stats %s = %+v beside the other partitions, %+v alone; want equal and positive", name, got, solo)
				}
			}
		})
	}
}

// ownRows are the rows fill writes into p, in key order.
func ownRows(p store.Partition, keys []store.Key) []store.KeyValue {
	var rows []store.KeyValue
	for _, k := range keys {
		rows = append(rows, store.KeyValue{Key: k, Value: value(p, k)})
	}
	slices.SortFunc(rows, func(a, b store.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return rows
}

func sameRows(t *testing.T, what string, got, want []store.KeyValue) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d: %q", what, len(got), len(want), got)
		return
	}
	for i := range got {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Errorf("%s: row %d = %x=%q, want %x=%q", what, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// TestIsolationCasesCollideWithoutNamespaces keeps the test above honest:
// with their namespace element taken off, an orders identity equals a
// refdomain identity, so only the namespace keeps those partitions apart;
// and each schema's ParsePartition refuses the other's identities, naming
// the namespace it found.
func TestIsolationCasesCollideWithoutNamespaces(t *testing.T) {
	lib := mustIdentity(t, refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("acme")})
	app := mustIdentity(t, ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("acme")})
	if bytes.Equal(lib, app) {
		t.Fatalf("identities equal with their namespaces: %x", lib)
	}
	if !bytes.Equal(withoutNamespace(t, lib, refdomain.SchemaNamespace), withoutNamespace(t, app, ordersgen.SchemaNamespace)) {
		t.Errorf("without namespaces %x and %x differ; the isolation test would prove nothing", lib, app)
	}
	if _, err := refdomain.ParsePartition(app); !errors.Is(err, wire.ErrCorrupt) || !strings.Contains(err.Error(), `"orders"`) {
		t.Errorf("refdomain.ParsePartition(an orders identity) error %v, want one wrapping ErrCorrupt naming \"orders\"", err)
	}
	if _, err := ordersgen.ParseShard(lib); !errors.Is(err, wire.ErrCorrupt) || !strings.Contains(err.Error(), `"refdomain"`) {
		t.Errorf("ordersgen.ParseShard(a refdomain identity) error %v, want one wrapping ErrCorrupt naming \"refdomain\"", err)
	}
}

func mustIdentity(t *testing.T, p store.Partition) []byte {
	t.Helper()
	b, err := p.AppendTuple(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withoutNamespace returns identity after its first element, which must
// be ns.
func withoutNamespace(t *testing.T, identity []byte, ns string) []byte {
	t.Helper()
	r := tuple.NewReader(identity)
	got, err := r.ReadString()
	if err != nil || got != ns {
		t.Fatalf("identity %x starts with %q, %v; want namespace %q", identity, got, err, ns)
	}
	return r.Rest()
}
