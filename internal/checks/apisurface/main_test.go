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

var update = flag.Bool("update", false, "rewrite testdata/*.txt from the packages' exported identifiers")

// surfaces are the packages (from the module root) whose exported
// identifiers TestSurface holds to a list: the Layer, the engine contract
// and the engines.
var surfaces = []string{"fdblayer", "fdblayer/kv", "fdblayer/memengine", "fdblayer/boltengine", "fdblayer/fdbengine"}

// TestSurface holds each package's exported identifiers to the list in
// testdata/<package path, slashes as underscores>.txt, so that adding one
// is a decision: what production code needs belongs in the package, what
// only tests and benchmarks need in fdbsim (or an export_test.go).
func TestSurface(t *testing.T) {
	for _, pkg := range surfaces {
		t.Run(pkg, func(t *testing.T) {
			s, err := count(&build.Default, filepath.Join("..", "..", "..", filepath.FromSlash(pkg)))
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Concat(s.decls, s.methods, s.members)
			golden := filepath.Join("testdata", strings.ReplaceAll(pkg, "/", "_")+".txt")
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
					t.Errorf("%s exports %s, which %s does not list: production API goes there (go test ./internal/checks/apisurface -update), test hooks go to fdbsim", pkg, n, golden)
				}
			}
			for _, n := range want {
				if !slices.Contains(got, n) {
					t.Errorf("%s lists %s, which %s no longer exports (go test ./internal/checks/apisurface -update)", golden, n, pkg)
				}
			}
		})
	}
}
