package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestGeneratedPackageDoc: the generated doc.go is the package's doc,
// starting "Package <name>", and names the schema's declarations.
func TestGeneratedPackageDoc(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct{ schema, pkg, names string }{
		{"schema", "gen", "RelayV1"},
		{"examples/orders/schema", "ordersgen", "OrderKey"},
	} {
		files, err := generate(filepath.Join(root, c.schema), c.pkg)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), "doc.go", files["doc.go"], parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		doc := f.Doc.Text()
		if !strings.HasPrefix(doc, "Package "+c.pkg+" ") || !strings.Contains(doc, c.names) || f.Name.Name != c.pkg {
			t.Errorf("%s: package %s, doc %q", c.schema, f.Name.Name, doc)
		}
		if !generatedRE.Match(files["doc.go"]) {
			t.Errorf("%s: doc.go lacks the generated header", c.schema)
		}
	}
}

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		text  string
		width int
		want  []string
	}{
		{"a b c", 3, []string{"a b", "c"}},
		{"one\ntwo  three", 80, []string{"one two three"}},
		{"a\n\nb", 80, []string{"a", "", "b"}},
		{"averylongword b", 4, []string{"averylongword", "b"}},
	} {
		if got := wrap(tc.text, tc.width); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", tc.text, tc.width, got, tc.want)
		}
	}
}
