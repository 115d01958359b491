package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGeneratedCodeIsFresh fails when a committed generated package is not
// what its schema generates: CI's guard against a forgotten go generate.
func TestGeneratedCodeIsFresh(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct{ schema, out, pkg string }{
		{"schema", "gen", "gen"},
		{"examples/orders/schema", "examples/orders/ordersgen", "ordersgen"},
	} {
		files, err := generate(filepath.Join(root, c.schema), c.pkg)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		stale, err := diff(filepath.Join(root, c.out), files)
		if err != nil {
			t.Fatal(err)
		}
		if len(stale) > 0 {
			t.Errorf("%s is stale (run go generate ./...): %v", c.out, stale)
		}
	}
}

func TestGeneratedFilesCarryTheHeader(t *testing.T) {
	files, err := generate(filepath.Join(repoRoot(t), "schema"), "gen")
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		if !strings.HasPrefix(string(src), "// "+header+"\n") {
			t.Errorf("%s does not open with the generated header", name)
		}
	}
}

// TestSchemaMistakesNameFileAndLine feeds the loader schemas with one
// mistake each and checks the report names the file, the line and the
// problem.
func TestSchemaMistakesNameFileAndLine(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		want      string
	}{
		{"unbounded string", "type R struct {\n\tName string\n}", 4, "needs a bound"},
		{"unknown directive", "//mk:table\ntype R struct{}", 4, "unknown directive //mk:table"},
		{"duplicate key tag", "//mk:key tag=1\ntype A struct{}\n\n//mk:key tag=1\ntype B struct{}", 7, "tag 1 already used by A"},
		{"unknown type", "type R struct {\n\tX Missing\n}", 4, "unknown type Missing"},
		{"unknown option", "type R struct {\n\tX uint8 `mk:\"maxx=3\"`\n}", 4, "unknown field option \"maxx\""},
		{"identity over its max", "//mk:identity min=5 max=2\ntype N string", 4, "min=5 over max=2"},
		{"union without tag", "type V struct{}\n\n//mk:union\ntype U struct {\n\tA *V\n}", 7, "needs tag=N"},
		{"partition variant without kind", "type V struct{}\n\n//mk:union partition\ntype U struct {\n\tA *V `mk:\"tag=1\"`\n}", 7, "needs kind=name"},
		{"record without version", "//mk:record\ntype R struct{}", 4, "needs version=N"},
		{"le on a missing field", "type R struct {\n\tA uint64 `mk:\"le=B\"`\n}", 4, "le=B must name another integer field"},
		{"slice of strings without elem_max", "type R struct {\n\tTags []string `mk:\"max=8\"`\n}", 4, "needs elem_max=N"},
		{"elem_max on a slice of integers", "type R struct {\n\tN []uint64 `mk:\"max=8,elem_max=3\"`\n}", 4, "elem_max= applies to slices of strings or []byte only"},
		{"slice in a key", "//mk:key tag=1\ntype K struct {\n\tX []uint64\n}", 5, "key fields are"},
		{"recursive struct", "type R struct {\n\tR []R `mk:\"max=2\"`\n}", 3, "contains itself"},
		{"enum without values", "//mk:enum\ntype E uint8", 4, "no constants"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bad.go")
			if err := os.WriteFile(path, []byte("package schema\n\n"+c.src+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := load(dir)
			if err == nil {
				t.Fatal("schema loaded without error")
			}
			want := "bad.go:" + strconv.Itoa(c.line) + ":"
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, want) && strings.Contains(line, c.want) {
					return
				}
			}
			t.Errorf("report %q has no line with %q and %q", err, want, c.want)
		})
	}
}

// TestWriteLeavesOutputOnSchemaError: a schema mistake writes nothing.
func TestWriteLeavesOutputOnSchemaError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.go"), []byte("package schema\n\ntype R struct {\n\tName string\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if files, err := generate(dir, "out"); err == nil || files != nil {
		t.Fatalf("generate = %d files, %v; want nothing and an error", len(files), err)
	}
}

// tempModule is a module of its own in a temporary directory that
// requires this repository through a replace directive, as an importing
// project would: write puts a file in it, run runs the go command in it.
// It needs the go command and the module cache (or the proxy), and is
// skipped with -short.
type tempModule struct {
	t   *testing.T
	dir string
	goc string
}

func newTempModule(t *testing.T, path string) *tempModule {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a second module; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	m := &tempModule{t: t, dir: t.TempDir(), goc: goBin}
	m.write("go.mod", []byte("module "+path+"\n\ngo 1.26\n\nrequire github.com/mkit-dev/mkitfdb v0.0.0\n\nreplace github.com/mkit-dev/mkitfdb => "+repoRoot(t)+"\n"))
	return m
}

func (m *tempModule) write(name string, data []byte) {
	m.t.Helper()
	path := filepath.Join(m.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		m.t.Fatal(err)
	}
}

func (m *tempModule) run(args ...string) {
	m.t.Helper()
	cmd := exec.Command(m.goc, args...)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		m.t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestImportingModuleGeneratesItsOwnSchema plays an importing project: a
// module of its own with a schema and a go:generate line that runs
// `go run github.com/mkit-dev/mkitfdb/cmd/codegen`, then its generated
// tests.
func TestImportingModuleGeneratesItsOwnSchema(t *testing.T) {
	m := newTempModule(t, "example.com/shop")
	schemaSrc, err := os.ReadFile(filepath.Join(repoRoot(t), "examples/orders/schema/orders.go"))
	if err != nil {
		t.Fatal(err)
	}
	m.write("schema/orders.go", schemaSrc)
	m.run("mod", "tidy")
	m.run("generate", "./...")
	if _, err := os.Stat(filepath.Join(m.dir, "ordersgen", "records.go")); err != nil {
		t.Fatalf("go generate wrote no codecs: %v", err)
	}
	m.run("test", "./...")
}

// TestEveryFieldTypeGenerates generates testdata/everytype, a record of
// every field type schema/doc.go documents and a key class of every type
// with a tuple form, into a module of its own, then vets it and runs its
// generated round-trip, rejection and bound tests, and each fuzz target
// on its seeds, so a type whose code does not compile or round-trip
// fails here.
func TestEveryFieldTypeGenerates(t *testing.T) {
	m := newTempModule(t, "example.com/everytype")
	files, err := generate("testdata/everytype", "everygen")
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		m.write(filepath.Join("everygen", name), src)
	}
	m.run("mod", "tidy")
	m.run("vet", "./...")
	m.run("test", "-count=1", "./...")
}
