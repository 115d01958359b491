package readme

import (
	"reflect"
	"testing"
)

func TestBlocks(t *testing.T) {
	md := "# T\n\n## One\n\n```sh\nmake test   # all\n# a comment\n\ngo run .\n```\n\n## Two\n\n```go\n// file: a/b.go\n\npackage b\n```\n\n```text\nout\n"
	got := Blocks([]byte(md))
	if len(got) != 3 {
		t.Fatalf("%d blocks, want 3: %+v", len(got), got)
	}
	for _, tc := range []struct {
		i             int
		lang, section string
		line          int
	}{{0, "sh", "One", 5}, {1, "go", "Two", 14}, {2, "text", "Two", 20}} {
		if b := got[tc.i]; b.Lang != tc.lang || b.Section != tc.section || b.Line != tc.line {
			t.Errorf("block %d: %s under %q at line %d, want %s under %q at %d", tc.i, b.Lang, b.Section, b.Line, tc.lang, tc.section, tc.line)
		}
	}
	if cmds := got[0].Commands(); !reflect.DeepEqual(cmds, []string{"make test", "go run ."}) {
		t.Errorf("commands %q", cmds)
	}
	if name, text, ok := got[1].File(); !ok || name != "a/b.go" || text != "package b\n" {
		t.Errorf("file %q %q %v", name, text, ok)
	}
	if _, _, ok := got[0].File(); ok {
		t.Error("a block without a file line names a file")
	}
	if got[2].Lines[0] != "out" {
		t.Errorf("unclosed block lines %q", got[2].Lines)
	}
}
