// Package layering holds the tests that keep the library's packages
// apart from the services built on them, and generated folders to
// generated code.
package layering

import (
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mkit-dev/mkitfdb"

// notLibrary are the packages of the module that are not the library,
// each with the reason. Every other package go list finds in the module
// and in the FoundationDB engine's module (fdblayer/fdbengine) is the
// library, admin and the mkitfdb commands included.
var notLibrary = []struct{ path, why string }{
	{"refdomain", "the reference domain: a service's schema, and the packages beside it (refdomain/leases, refdomain/reservations)"},
	{"examples", "example services and their commands"},
	{"internal/testkit", "the test services and the tests' helpers"},
	{"internal/checks", "tree-wide test suites, which link what they check"},
	{"bench", "benchmarks of the library against baselines, over services' schemas"},
	{"cmd/demo", "the demo of the library's main job, a program over the reference domain's partitions: the library declares no partitions of its own, so a demo of it runs on a service's"},
}

// services are the packages no library package may reach: a service's
// schema or code (the reference domain, the examples, the test services).
var services = []string{"refdomain", "examples", "internal/testkit"}

// under reports whether pkg is the module's package rel or one below it.
func under(pkg, rel string) bool {
	p := module + "/" + rel
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// serviceOf returns the entry of services that pkg is or lies under.
func serviceOf(pkg string) (string, bool) {
	for _, s := range services {
		if under(pkg, s) {
			return s, true
		}
	}
	return "", false
}

// isLibrary reports whether pkg, a package of the module, is the library's.
func isLibrary(pkg string) bool {
	for _, n := range notLibrary {
		if under(pkg, n.path) {
			return false
		}
	}
	return strings.HasPrefix(pkg, module+"/")
}

// listDeps runs go list in dir over patterns and returns each package's
// import path with its dependencies (go list's Deps: every package it
// imports, directly or not, tests aside).
func listDeps(t *testing.T, dir string, patterns ...string) map[string][]string {
	t.Helper()
	c := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, patterns...)...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, out)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			pkgs[f[0]] = f[1:]
		}
	}
	return pkgs
}

// The library's packages serve every importing service: none of them, nor
// anything they import, is the reference domain's, an example's or the
// test kit's. The library is every package go list finds in the module and
// in the FoundationDB engine's module but those of notLibrary, so a new
// package is held to it without being listed. Tests may import services;
// the packages themselves may not.
func TestLibraryPackagesReachNoService(t *testing.T) {
	root := moduleRoot(t)
	pkgs := listDeps(t, root, module+"/...")
	maps.Copy(pkgs, listDeps(t, filepath.Join(root, "fdblayer", "fdbengine"), "./..."))
	var library []string
	for pkg := range pkgs {
		if isLibrary(pkg) {
			library = append(library, pkg)
		}
	}
	slices.Sort(library)
	for _, must := range []string{"admin", "cmd/mkitfdb", "fdblayer/fdbengine/cmd/mkitfdb", "fdblayer/fdbengine", "watermark", "outcome", "relay", "timers", "store", "gen", "cmd/codegen"} {
		if !slices.Contains(library, module+"/"+must) {
			t.Errorf("%s is not among the library packages go list found: %q", must, library)
		}
	}
	for _, pkg := range library {
		for _, d := range append([]string{pkg}, pkgs[pkg]...) {
			if s, ok := serviceOf(d); ok {
				t.Errorf("library package %s reaches %s (%s): a library package links no service; a service's command links the library (see examples/orders/cmd/orders-admin)", pkg, d, s)
			}
		}
	}
	if t.Failed() {
		t.Logf("library packages: %q", library)
	}
}

// otelSDK is the OpenTelemetry SDK's module path. Its API
// (go.opentelemetry.io/otel, .../metric, .../trace) is what a library links;
// the program that imports it picks the SDK.
const otelSDK = "go.opentelemetry.io/otel/sdk"

// isOTelSDK reports whether pkg is a package of the OpenTelemetry SDK.
func isOTelSDK(pkg string) bool {
	return pkg == otelSDK || strings.HasPrefix(pkg, otelSDK+"/")
}

// The library's packages link the OpenTelemetry API only: none of them,
// nor anything they import (tests aside), is a package of the SDK, which
// appears in tests and examples alone. The OpenTelemetry adapter is held to
// it, and links the metrics API, and the packages that start spans link
// the trace API, so that this test checks something.
func TestLibraryLinksOnlyTheOpenTelemetryAPI(t *testing.T) {
	root := moduleRoot(t)
	pkgs := listDeps(t, root, module+"/...")
	maps.Copy(pkgs, listDeps(t, filepath.Join(root, "fdblayer", "fdbengine"), "./..."))
	adapter := module + "/telemetry/otelmetric"
	if !isLibrary(adapter) || !slices.Contains(pkgs[adapter], "go.opentelemetry.io/otel/metric") {
		t.Errorf("%s is not a library package linking go.opentelemetry.io/otel/metric: %q", adapter, pkgs[adapter])
	}
	for _, rel := range tracedPackages {
		pkg := module + "/" + rel
		if !isLibrary(pkg) || !slices.Contains(pkgs[pkg], "go.opentelemetry.io/otel/trace") {
			t.Errorf("%s is not a library package linking go.opentelemetry.io/otel/trace: %q", pkg, pkgs[pkg])
		}
	}
	for pkg, deps := range pkgs {
		if !isLibrary(pkg) {
			continue
		}
		var sdk []string
		for _, d := range deps {
			if isOTelSDK(d) {
				sdk = append(sdk, d)
			}
		}
		if len(sdk) > 0 {
			t.Errorf("library package %s links the OpenTelemetry SDK (%q): a library links the API only, and the SDK appears in tests and examples", pkg, sdk)
		}
	}
}

// tracedPackages are the library's packages that start spans or keep a
// span context: each links the trace API.
var tracedPackages = []string{"internal/tracing", "outbox", "relay", "outcome", "timers"}

// The modules the library's packages are built from, tests aside (what a
// service that imports the library and nothing else of OpenTelemetry
// builds), hold no module of the SDK: go.mod requires the SDK for the
// library's tests and examples only, which go mod graph cannot tell apart.
func TestLibraryBuildsFromNoOpenTelemetrySDKModule(t *testing.T) {
	root := moduleRoot(t)
	var library []string
	for pkg := range listDeps(t, root, module+"/...") {
		if isLibrary(pkg) {
			library = append(library, pkg)
		}
	}
	slices.Sort(library)
	c := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}, library...)...)
	c.Dir = root
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	mods := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		mods[m] = true
	}
	for _, api := range []string{"go.opentelemetry.io/otel", "go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/metric"} {
		if !mods[api] {
			t.Errorf("the library's packages are built without the API module %s: %q", api, slices.Sorted(maps.Keys(mods)))
		}
	}
	for m := range mods {
		if isOTelSDK(m) {
			t.Errorf("the library's packages are built from the SDK module %s: a library links the API only", m)
		}
	}
}

func TestTheSDKCheckTellsTheSDKFromTheAPI(t *testing.T) {
	for pkg, sdk := range map[string]bool{
		"go.opentelemetry.io/otel/sdk":                     true,
		"go.opentelemetry.io/otel/sdk/metric":              true,
		"go.opentelemetry.io/otel/sdk/metric/metricdata":   true,
		"go.opentelemetry.io/otel/sdk/trace":               true,
		"go.opentelemetry.io/otel":                         false,
		"go.opentelemetry.io/otel/metric":                  false,
		"go.opentelemetry.io/otel/trace":                   false,
		"go.opentelemetry.io/otel/sdkx":                    false, // a prefix is not a parent
		"go.opentelemetry.io/auto/sdk":                     false, // the API's own: go.opentelemetry.io/otel's global tracer hooks auto-instrumentation through it
		"github.com/mkit-dev/mkitfdb/telemetry/otelmetric": false,
	} {
		if isOTelSDK(pkg) != sdk {
			t.Errorf("isOTelSDK(%s) = %v, want %v", pkg, !sdk, sdk)
		}
	}
}

// TestTheLayeringCheckTellsServicesFromTheLibrary: the classification the
// test above relies on holds for each kind of package.
func TestTheLayeringCheckTellsServicesFromTheLibrary(t *testing.T) {
	for rel, want := range map[string]struct{ library, service bool }{
		"watermark":                      {library: true},
		"cmd/mkitfdb":                    {library: true},
		"fdblayer/fdbengine/cmd/mkitfdb": {library: true},
		"refdomainx":                     {library: true}, // a prefix is not a parent
		"refdomain":                      {service: true},
		"refdomain/leases":               {service: true},
		"examples/orders/ordersgen":      {service: true},
		"internal/testkit/bank/bankgen":  {service: true},
		"internal/checks/layering":       {},
		"cmd/demo":                       {},
		"bench":                          {},
	} {
		pkg := module + "/" + rel
		_, service := serviceOf(pkg)
		if isLibrary(pkg) != want.library || service != want.service {
			t.Errorf("%s: library %v, service %v; want %v, %v", rel, isLibrary(pkg), service, want.library, want.service)
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
