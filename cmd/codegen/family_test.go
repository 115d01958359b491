package main

import (
	"strings"
	"testing"
)

// familySchema is a schema whose key class holds the family list; records
// are the record declarations. ~ stands for a backquote.
func familySchema(list, records string) []byte {
	src := "//mk:namespace shop\npackage schema\n\n" +
		"//go:generate go run github.com/mkit-dev/mkitfdb/cmd/codegen -schema . -out ../shopgen -pkg shopgen\n\n" +
		"//mk:key tag=100 value=" + list + "\ntype OrderKey struct {\n\tID uint64\n}\n\n" + records
	return []byte(strings.ReplaceAll(src, "~", "`"))
}

const (
	familyOrderV1 = "//mk:record version=1\ntype OrderV1 struct {\n\tTotal uint64\n}\n\n"
	familyOrderV2 = "//mk:record version=2\ntype OrderV2 struct {\n\tTotal uint64\n\tGift  bool\n}\n\n"
	// familyOrderV2Gated is OrderV2 of format 2: a store must be raised
	// to it before it is written, so the family needs its downgrade.
	familyOrderV2Gated = "//mk:record version=2 format=2\ntype OrderV2 struct {\n\tTotal uint64\n\tGift  bool\n}\n\n"
)

// familyOwner is the package that owns the rows: it builds the family's
// Values with its own conversions, methods.
func familyOwner(methods string) []byte {
	return []byte(`package orders

import "example.com/shop/shopgen"

// versions converts the orders' values between versions.
type versions struct{}
` + methods + `
// Values reads and writes the orders' values.
var Values = shopgen.NewOrderKeyValues(versions{})
`)
}

const (
	familyUpgrade   = "\nfunc (versions) UpgradeOrderV1(v shopgen.OrderV1) (shopgen.OrderV2, error) {\n\treturn shopgen.OrderV2{Total: v.Total}, nil\n}\n"
	familyDowngrade = "\nfunc (versions) DowngradeOrderV2(v shopgen.OrderV2) (shopgen.OrderV1, error) {\n\treturn shopgen.OrderV1{Total: v.Total}, nil\n}\n"
)

// TestAddingAVersionBreaksTheOwnersBuild plays a service whose key class
// gains a version: with one version its owner passes a type without
// methods to NewOrderKeyValues and builds; once OrderV2 joins the family
// (go generate), the owner's package no longer compiles, and the error
// names the upgrade it lacks; with the upgrade written it builds again;
// once OrderV2 takes format 2, the error names the downgrade it lacks.
// Then the generated tests of the family pass.
func TestAddingAVersionBreaksTheOwnersBuild(t *testing.T) {
	m := newTempModule(t, "example.com/shop")
	m.write("schema/schema.go", familySchema("OrderV1", familyOrderV1))
	m.run("mod", "tidy")
	m.run("generate", "./...")
	m.write("orders/orders.go", familyOwner(""))
	m.run("mod", "tidy")
	m.run("build", "./...")

	m.write("schema/schema.go", familySchema("OrderV1,OrderV2", familyOrderV1+familyOrderV2))
	m.run("generate", "./...")
	out, err := m.output("build", "./...")
	if err == nil {
		t.Fatalf("the owner builds without an upgrade to OrderV2:\n%s", out)
	}
	t.Logf("go build: %s", out)
	if !strings.Contains(out, "orders/orders.go:") || !strings.Contains(out, "missing method UpgradeOrderV1") {
		t.Errorf("the build does not fail at the owner's NewOrderKeyValues naming UpgradeOrderV1:\n%s", out)
	}
	m.write("orders/orders.go", familyOwner(familyUpgrade))
	m.run("build", "./...")

	m.write("schema/schema.go", familySchema("OrderV1,OrderV2", familyOrderV1+familyOrderV2Gated))
	m.run("generate", "./...")
	out, err = m.output("build", "./...")
	if err == nil {
		t.Fatalf("the owner builds without a downgrade of OrderV2, format 2:\n%s", out)
	}
	t.Logf("go build: %s", out)
	if !strings.Contains(out, "missing method DowngradeOrderV2") {
		t.Errorf("the build does not name DowngradeOrderV2:\n%s", out)
	}
	m.write("orders/orders.go", familyOwner(familyUpgrade+familyDowngrade))
	m.run("build", "./...")
	m.run("test", "-count=1", "./shopgen")
}
