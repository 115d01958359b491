package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// Every generated package linked into the test registers itself, with
// what decodes its partitions, keys and records.
func TestLinkedSchemasAreRegistered(t *testing.T) {
	var got []string
	for _, s := range registry.All() {
		got = append(got, s.Namespace+"="+s.ImportPath)
	}
	want := []string{
		"bank=github.com/mkit-dev/mkitfdb/internal/testkit/bank/bankgen",
		"mkit=github.com/mkit-dev/mkitfdb/gen",
		"orders=github.com/mkit-dev/mkitfdb/examples/orders/ordersgen",
		"refdomain=github.com/mkit-dev/mkitfdb/refdomain",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("registered %q, want %q", got, want)
	}
	if _, ok := registry.Lookup("nope"); ok {
		t.Error("an unknown namespace is found")
	}

	mkit, _ := registry.Lookup(gen.SchemaNamespace)
	if len(mkit.Partitions) != 0 {
		t.Errorf("the library's schema declares no partitions, registered %d", len(mkit.Partitions))
	}
	k, ok := mkit.Key(uint32(gen.TagOutcomePendingKey))
	if !ok || k.Name != "OutcomePendingKey" {
		t.Fatalf("mkit key %d: %+v %v", gen.TagOutcomePendingKey, k, ok)
	}
	pk, err := gen.AppendOutcomePendingKey(nil, 3, gen.MustOutcomeID("x"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := k.Parse(pk)
	if err != nil || parsed != (gen.OutcomePendingKey{Seq: 3, ID: gen.MustOutcomeID("x")}) {
		t.Errorf("parse %x: %#v %v", pk, parsed, err)
	}
	if _, err := k.Parse([]byte("junk")); !errors.Is(err, wire.ErrCorrupt) {
		t.Errorf("junk key: %v", err)
	}
	if v, _ := k.Parse([]byte("junk")); v != nil {
		t.Errorf("a failed parse returns %#v, want nil", v)
	}

	ref, _ := registry.Lookup(refdomain.SchemaNamespace)
	if len(ref.Partitions) != 1 || ref.Partitions[0].Name != "Partition" {
		t.Fatalf("refdomain partitions: %+v", ref.Partitions)
	}
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("tenant")}
	id, err := p.AppendTuple(nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ref.Partitions[0].Parse(id)
	if err != nil || back != refdomain.Partition(p) {
		t.Errorf("parse partition %x: %#v %v", id, back, err)
	}
	other, err := bankgen.BranchPartition{Branch: 1}.AppendTuple(nil)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ref.Partitions[0].Parse(other); err == nil || back != nil {
		t.Errorf("refdomain parses the bank's identity: %#v %v", back, err)
	}
	var tags []uint32
	for _, k := range ref.Keys {
		tags = append(tags, k.Tag)
	}
	if len(tags) != 4 || tags[0] != uint32(refdomain.TagReservationKey) {
		t.Errorf("refdomain key tags %v", tags)
	}

	orders, _ := registry.Lookup("orders")
	rec, ok := orders.Record("OrderV1")
	if !ok || rec.Version != ordersgen.VersionOrderV1 {
		t.Fatalf("OrderV1: %+v %v", rec, ok)
	}
	v, err := ordersgen.EncodeOrderV1(ordersgen.OrderV1{Status: ordersgen.StatusOpen, Note: "n"})
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := rec.Decode(v)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := decoded.(ordersgen.OrderV1); !ok || o.Note != "n" {
		t.Errorf("decoded %#v", decoded)
	}
	if d, err := rec.Decode([]byte{0xff}); !errors.Is(err, wire.ErrCorrupt) || d != nil {
		t.Errorf("junk record: %#v %v", d, err)
	}
	if _, ok := orders.Record("Nope"); ok {
		t.Error("an unknown record is found")
	}
	if _, ok := orders.Key(7); ok {
		t.Error("an unknown key class is found")
	}
}

// A second registration of a namespace panics, naming both import paths.
func TestRegisterRefusesASecondPackageOfANamespace(t *testing.T) {
	defer func() {
		msg, _ := recover().(string)
		for _, want := range []string{`namespace "orders"`, "github.com/mkit-dev/mkitfdb/examples/orders/ordersgen", "example.com/other/ordersgen"} {
			if !strings.Contains(msg, want) {
				t.Errorf("panic %q does not say %q", msg, want)
			}
		}
	}()
	registry.Register(registry.Schema{Namespace: "orders", ImportPath: "example.com/other/ordersgen"})
}

func TestRegisterRefusesAnAnonymousSchema(t *testing.T) {
	for _, s := range []registry.Schema{{Namespace: "x"}, {ImportPath: "example.com/x"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%+v registered", s)
				}
			}()
			registry.Register(s)
		}()
	}
	if _, ok := registry.Lookup("x"); ok {
		t.Error("a refused schema is registered")
	}
}

// IdentityPrefix finds the partition a raw key starts with, by the linked
// schema of its namespace, and says how long its identity is; a key class
// names the record its rows hold where the schema says.
func TestIdentityPrefixSplitsARawKey(t *testing.T) {
	shard := ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID("ada")}
	id, err := shard.AppendTuple(nil)
	if err != nil {
		t.Fatal(err)
	}
	key := gen.AppendRelayKey(nil, 7)
	s, p, n, ns, err := registry.IdentityPrefix(append(append([]byte{}, id...), key...))
	if err != nil || ns != "orders" || s.Namespace != "orders" || n != len(id) || p != registry.Partition(shard) {
		t.Fatalf("IdentityPrefix = %q %v %d %q %v, want orders %v %d", s.Namespace, p, n, ns, err, shard, len(id))
	}
	// An identity alone parses to its end.
	if _, _, n, _, err := registry.IdentityPrefix(id); err != nil || n != len(id) {
		t.Fatalf("IdentityPrefix(identity) = %d, %v", n, err)
	}
	// A namespace no package declares names itself.
	other := append([]byte{0x02}, "nolinked\x00\x15\x01"...)
	if _, _, _, ns, err := registry.IdentityPrefix(other); !errors.Is(err, registry.ErrNotLinked) || ns != "nolinked" {
		t.Fatalf("IdentityPrefix(unlinked) = %q, %v; want nolinked, ErrNotLinked", ns, err)
	}
	// A linked namespace whose variant no union declares is corrupt.
	bad := append([]byte{0x02}, "orders\x00\x15\x63"...)
	if _, _, _, _, err := registry.IdentityPrefix(bad); !errors.Is(err, wire.ErrCorrupt) {
		t.Fatalf("IdentityPrefix(unknown variant) = %v, want wire.ErrCorrupt", err)
	}
	if _, _, _, ns, err := registry.IdentityPrefix([]byte{0x15, 1}); err == nil || ns != "" {
		t.Fatalf("IdentityPrefix(no namespace) = %q, %v", ns, err)
	}
	mkit, _ := registry.Lookup(gen.SchemaNamespace)
	if k, _ := mkit.Key(uint32(gen.TagRelayKey)); !slices.Equal(k.Values, []string{"RelayV1", "RelayV2"}) {
		t.Fatalf("RelayKey holds %q, want RelayV1, RelayV2", k.Values)
	}
	if k, _ := mkit.Key(uint32(gen.TagTimerKey)); k.Values != nil || k.ValueVersion != nil {
		t.Fatalf("TimerKey holds %q, want none (its handler's)", k.Values)
	}
}

// A schema registers its known format, each record its format, and each
// key class its value family, oldest first; ValueRecord names the
// version a stored value holds, and refuses a newer one as
// wire.ErrNewerVersion, not corrupt.
func TestValueFamiliesAndFormatsAreRegistered(t *testing.T) {
	mkit, _ := registry.Lookup(gen.SchemaNamespace)
	if mkit.Format != uint32(gen.SchemaFormat) || gen.SchemaFormat != 2 {
		t.Errorf("mkit's format is %d, want 2 (TimerRefV2's)", mkit.Format)
	}
	orders, _ := registry.Lookup("orders")
	if orders.Format != 2 {
		t.Errorf("orders' format is %d, want 2 (OrderV2's)", orders.Format)
	}
	if k, _ := orders.Key(uint32(ordersgen.TagOrderKey)); !slices.Equal(k.Values, []string{"OrderV1", "OrderV2"}) {
		t.Errorf("OrderKey's family is %q", k.Values)
	}
	if r, ok := orders.Record("OrderV2"); !ok || r.Format != 2 || r.Version != 2 {
		t.Errorf("record OrderV2: %+v %v; want version 2, format 2", r, ok)
	}
	for name, want := range map[string]uint32{"U64Value": 1, "TimerRefV2": 2} {
		if r, ok := mkit.Record(name); !ok || r.Format != want {
			t.Errorf("record %s: %+v %v; want format %d", name, r, ok, want)
		}
	}
	k, _ := mkit.Key(uint32(gen.TagTimerRefKey))
	if !slices.Equal(k.Values, []string{"U64Value", "TimerRefV2"}) {
		t.Fatalf("TimerRefKey's family is %q", k.Values)
	}
	v1, err := gen.EncodeU64Value(gen.U64Value{Value: 5})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := gen.EncodeTimerRefV2(gen.TimerRefV2{DueAtMs: 5, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		value []byte
		want  string
	}{{v1, "U64Value"}, {v2, "TimerRefV2"}} {
		r, err := mkit.ValueRecord(k, c.value)
		if err != nil || r.Name != c.want {
			t.Errorf("ValueRecord(%x) = %q, %v; want %s", c.value, r.Name, err, c.want)
			continue
		}
		if _, err := r.Decode(c.value); err != nil {
			t.Errorf("%s does not decode %x: %v", r.Name, c.value, err)
		}
	}
	newer := append([]byte{3}, v2[1:]...)
	var ve *wire.VersionError
	if _, err := mkit.ValueRecord(k, newer); !errors.As(err, &ve) || !errors.Is(err, wire.ErrNewerVersion) || errors.Is(err, wire.ErrCorrupt) || ve.Newest != 2 {
		t.Errorf("ValueRecord of version 3: %v; want a *wire.VersionError, newest 2, not corrupt", err)
	}
	for _, b := range [][]byte{nil, {0, 1}} {
		if _, err := mkit.ValueRecord(k, b); !errors.Is(err, wire.ErrCorrupt) {
			t.Errorf("ValueRecord(%x): %v; want wire.ErrCorrupt", b, err)
		}
	}
	tk, _ := mkit.Key(uint32(gen.TagTimerKey))
	if _, err := mkit.ValueRecord(tk, v1); err == nil {
		t.Error("ValueRecord of a class without a value family succeeds")
	}
}
