// Package layering holds the tests that keep the library's packages
// apart from the services built on them, and generated folders to
// generated code.
package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mkit-dev/mkitfdb"

// The library's runtime and handlers serve every importing service: none
// of them, nor anything they import, is the reference domain's (refdomain
// and the packages beside it, such as refdomain/reservations), an
// example's or the test kit's (internal/testkit: the test service and
// the tests' helpers). Tests may import those; the packages themselves
// may not.
func TestLibraryPackagesImportNoServiceDomain(t *testing.T) {
	pkgs := []string{"outcome", "outbox", "relay", "timers", "quarantine", "store", "gen", "codec/wire", "codec/tuple", "codec/registry", "fdblayer", "fdblayer/kv", "fdblayer/memengine", "fdblayer/boltengine", "fdbsim", "telemetry", "clock"}
	args := []string{"list", "-deps"}
	for _, p := range pkgs {
		args = append(args, module+"/"+p)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < len(pkgs) {
		t.Fatalf("go list -deps listed %d packages for %d: %q", len(deps), len(pkgs), deps)
	}
	for _, d := range deps {
		for _, banned := range []string{module + "/refdomain", module + "/examples", module + "/internal/testkit", module + "/watermark"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("a library package depends on %s", d)
			}
		}
	}
}

// nonStandardDeps lists the packages pkg imports, directly or not, that
// are not the standard library's, pkg itself included.
func nonStandardDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, pkg) {
		t.Fatalf("go list -deps %s did not list the package itself: %q", pkg, deps)
	}
	return deps
}

// Engines are drivers: the Layer links none of them, so that a program
// links bbolt only through boltengine (and cgo and libfdb_c only through
// fdbengine, a module of its own that this one cannot import); the engine
// contract links nothing but the standard library, and fdbsim's engines
// depend on the contract, not on the Layer.
func TestEnginesAreDrivers(t *testing.T) {
	for pkg, banned := range map[string][]string{
		module + "/fdblayer":            {"go.etcd.io/bbolt", module + "/fdblayer/boltengine", module + "/fdblayer/memengine", module + "/fdbsim", "github.com/google/btree"},
		module + "/fdblayer/memengine":  {"go.etcd.io/bbolt", module + "/fdblayer"},
		module + "/fdblayer/boltengine": {module + "/fdblayer"},
		module + "/fdbsim":              {"go.etcd.io/bbolt", module + "/fdblayer"},
	} {
		for _, d := range nonStandardDeps(t, pkg) {
			if slices.Contains(banned, d) {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
	if deps := nonStandardDeps(t, module+"/fdblayer/kv"); len(deps) != 1 {
		t.Errorf("the engine contract depends on more than the standard library: %q", deps)
	}
}
