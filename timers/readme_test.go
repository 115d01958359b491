package timers_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsExampleRegistry_Register: the README's retry and periodic
// snippet is ExampleRegistry_Register's code, line for line in order, so that it
// compiles and runs as the example does.
func TestREADMEShowsExampleRegistry_Register(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_retry_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Timers that fail well")
	if !ok {
		t.Fatal("README.md has no section \"Timers that fail well\"")
	}
	_, block, ok := strings.Cut(sec, "```go\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("the section has no go block")
	}
	rest := string(example)
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		i := strings.Index(rest, line)
		if i < 0 {
			t.Fatalf("ExampleRegistry_Register lacks the README's line %q (or has it out of order)", line)
		}
		rest = rest[i+len(line):]
	}
}
