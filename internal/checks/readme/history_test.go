package readme

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef matches a reference to an issue tracker's number ("issue 23",
// "issues 20 and 22", "Issue #4"): the library's users have no tracker, so
// no document or comment may send them to one.
var issueRef = regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`)

// TestNoDocNamesAnIssue keeps every Markdown file and Go source of the
// repository (its nested modules too) free of issue numbers: the READMEs,
// docs/, bench/ and doc comments say which change they mean instead.
func TestNoDocNamesAnIssue(t *testing.T) {
	const self = "internal/checks/readme/history_test.go" // its examples below
	dir := root(t)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != dir && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		if ext := filepath.Ext(path); ext != ".md" && ext != ".go" || rel == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d: %q names an issue; say which change is meant", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestIssueRefMatches(t *testing.T) {
	for s, want := range map[string]bool{
		"before issue 23's relay": true, "issues 20 and 22": true, "Issue #4": true,
		"a range read issued at once": false, "producer bug #12": false, "the issue's target": false,
	} {
		if got := issueRef.MatchString(s); got != want {
			t.Errorf("issueRef.MatchString(%q) = %v, want %v", s, got, want)
		}
	}
}
