package main

import (
	"flag"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/fdblayer.txt from fdblayer's exported identifiers")

// TestFDBLayerSurface holds fdblayer's exported identifiers to the list in
// testdata/fdblayer.txt, so that adding one is a decision: what
// production code needs belongs in fdblayer, what only tests and
// benchmarks need in fdbsim (or fdblayer's export_test.go).
func TestFDBLayerSurface(t *testing.T) {
	s, err := count(&build.Default, filepath.Join("..", "..", "..", "fdblayer"))
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Concat(s.decls, s.methods, s.members)
	golden := filepath.Join("testdata", "fdblayer.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(b))
	for _, n := range got {
		if !slices.Contains(want, n) {
			t.Errorf("fdblayer exports %s, which %s does not list: production API goes there (go test ./internal/checks/apisurface -update), test hooks go to fdbsim", n, golden)
		}
	}
	for _, n := range want {
		if !slices.Contains(got, n) {
			t.Errorf("%s lists %s, which fdblayer no longer exports (go test ./internal/checks/apisurface -update)", golden, n)
		}
	}
}
