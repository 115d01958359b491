// Package layering holds the tests that keep the library's packages
// apart from the services built on them, and generated folders to
// generated code.
package layering

import (
	"os/exec"
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
	pkgs := []string{"outcome", "outbox", "relay", "timers", "store", "gen", "codec/wire", "codec/tuple", "codec/registry", "fdblayer", "fdbsim", "telemetry", "clock"}
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
