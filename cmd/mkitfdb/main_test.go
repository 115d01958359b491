package main

import (
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/registry"
	"github.com/mkit-dev/mkitfdb/gen"
)

// TestLinksTheLibrarysOwnSchemaOnly: the generic command decodes the
// library's rows and no service's; a service's command links its own
// schemas (examples/orders/cmd/orders-admin, refdomain/cmd/refdomain-admin).
func TestLinksTheLibrarysOwnSchemaOnly(t *testing.T) {
	var linked []string
	for _, s := range registry.All() {
		linked = append(linked, s.Namespace)
	}
	if len(linked) != 1 || linked[0] != gen.SchemaNamespace {
		t.Fatalf("linked schemas %q; want the library's own, %q, alone", linked, gen.SchemaNamespace)
	}
}
