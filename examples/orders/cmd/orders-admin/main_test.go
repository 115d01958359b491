package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/examples/orders"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/boltengine"
)

// TestDecodesTheServicesOwnKeysAndRecordsByName: the service's admin
// command, built with package admin and the service's schema linked,
// shows an order placed by the service as its own key and record, by
// name, and its timer by the kind's name.
func TestDecodesTheServicesOwnKeysAndRecordsByName(t *testing.T) {
	if _, ok := registry.Lookup(ordersgen.SchemaNamespace); !ok {
		t.Fatal("the orders schema is not linked into the command")
	}
	db := filepath.Join(t.TempDir(), "orders.db")
	e, err := boltengine.Open(db, boltengine.Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fdblayer.Open(e, fdblayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := orders.NewService(orders.ServiceConfig{Store: s, ShipDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	order := ordersgen.OrderV2{Status: ordersgen.StatusOpen, Region: 3, Lines: []ordersgen.Line{{SKU: "teapot", Quantity: 2}}, Gift: true}
	if err := svc.Place(context.Background(), ordersgen.MustCustomerID("ada"), time.UnixMilli(1_700_000_000_000), order); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	code := run([]string{"scan", "-db", db, "-partition", `("orders", 2, "ada")`}, strings.NewReader(""), &out, &errOut)
	if code != 0 {
		t.Fatalf("scan: exit %d: %s", code, errOut.String())
	}
	for _, want := range [][]string{
		{`(100, "ada", 1700000000000)`, "OrderKey", `OrderV2{Status: Open, Region: 3, Lines: [Line{SKU: "teapot", Quantity: 2}], Note: "", Gift: true}`},
		{"(16, 1)", "RelayKey", `RelayV1{Target: ("orders", 1, 3), Puts: [RelayPut{Key: (101, "ada", 1700000000000)`},
	} {
		if !hasLine(out.String(), want...) {
			t.Errorf("scan lacks a line with %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"timers", "-db", db}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("timers: exit %d: %s", code, errOut.String())
	}
	if !hasLine(out.String(), `("orders", 2, "ada")`, " ship ", `"1700000000000"`) {
		t.Errorf("timers does not name the ship timer:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"partitions", "-db", db}, strings.NewReader(""), &out, &errOut); code != 0 ||
		!hasLine(out.String(), `("orders", 2, "ada")`, " customer ", "relay:1,ship:1") {
		t.Errorf("partitions: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
}

// hasLine reports whether a line of text holds every one of words.
func hasLine(text string, words ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		n := 0
		for _, w := range words {
			if strings.Contains(line, w) {
				n++
			}
		}
		if n == len(words) {
			return true
		}
	}
	return false
}

// TestMigratesOrdersToV2: the command links the service's migration. On a
// store whose orders an OrderV1-only binary wrote (its gate knows orders
// format 1), migrate refuses before the raise (nothing rewritten); after
// formats raise, it rewrites every order as an OrderV2, and migrations
// shows it done.
func TestMigratesOrdersToV2(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orders.db")
	open := func(cfg fdblayer.Config) *fdblayer.Layer {
		t.Helper()
		e, err := boltengine.Open(db, boltengine.Config{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		l, err := fdblayer.Open(e, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	s := open(fdblayer.Config{Gate: evolve.GateConfig{Known: map[string]uint32{ordersgen.SchemaNamespace: 1}}})
	svc, err := orders.NewService(orders.ServiceConfig{Store: s, ShipDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"ada", "bo", "cy"} {
		order := ordersgen.OrderV2{Region: uint16(i + 1), Lines: []ordersgen.Line{{SKU: "teapot", Quantity: 2}}}
		if err := svc.Place(context.Background(), ordersgen.MustCustomerID(name), time.UnixMilli(1_700_000_000_000), order); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"migrate", "-db", db, "-yes", orders.MigrationOrderV2}, strings.NewReader(""), &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "format") {
		t.Fatalf("migrate at format 1: exit %d, want a refusal naming the format:\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"formats", "raise", "-db", db, "-namespace", "orders", "-to", "2", "-by", "test", "-reason", "gift orders", "-yes"},
		strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("formats raise: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"migrate", "-db", db, "-yes", orders.MigrationOrderV2}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("migrate: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"migrations", "-db", db}, strings.NewReader(""), &out, &errOut); code != 0 ||
		!hasLine(out.String(), orders.MigrationOrderV2, "yes", "done", " 3 ") {
		t.Errorf("migrations: exit %d, want %s done with 3 rows rewritten:\n%s%s", code, orders.MigrationOrderV2, out.String(), errOut.String())
	}

	s = open(fdblayer.Config{Gate: evolve.GateConfig{ReadOnly: true}})
	defer s.Close()
	for _, name := range []string{"ada", "bo", "cy"} {
		key, err := ordersgen.AppendOrderKey(nil, ordersgen.MustCustomerID(name), 1_700_000_000_000)
		if err != nil {
			t.Fatal(err)
		}
		v, ok, err := s.Get(context.Background(), ordersgen.CustomerShard{Customer: ordersgen.MustCustomerID(name)}, key)
		if err != nil || !ok || v[0] != ordersgen.VersionOrderV2 {
			t.Errorf("order of %s after migrate: %x, %v, %v; want an OrderV2", name, v, ok, err)
		}
	}
}
