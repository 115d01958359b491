package orders_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsTheExamplesOwnCode keeps the README's "Evolving a
// schema" true: each line of its Go blocks is a line of the example's
// schema or service, as written there.
func TestREADMEShowsTheExamplesOwnCode(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Evolving a schema\n")
	if !ok {
		t.Fatal("README.md has no section \"Evolving a schema\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var src string
	for _, f := range []string{"schema/orders.go", "orders.go", "migrate.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(b)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(src, "\n") {
		lines[l] = true
	}
	blocks := 0
	for _, block := range strings.Split(section, "```go\n")[1:] {
		blocks++
		code, _, _ := strings.Cut(block, "```")
		for _, l := range strings.Split(strings.TrimSuffix(code, "\n"), "\n") {
			if l != "" && !lines[l] {
				t.Errorf("README.md's \"Evolving a schema\" shows %q, which examples/orders does not hold", l)
			}
		}
	}
	if blocks != 3 {
		t.Errorf("%d Go blocks in \"Evolving a schema\", want the schema's, the service's and its migration's", blocks)
	}
}
