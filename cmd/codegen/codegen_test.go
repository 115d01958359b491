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

// TestGeneratedCodeIsFresh fails when a committed generated package, or
// its schema's layout lock, is not what its schema generates: CI's guard
// against a forgotten go generate.
func TestGeneratedCodeIsFresh(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct {
		schema, out, pkg string
		unregistered     bool
	}{
		{"schema", "gen", "gen", false},
		{"examples/orders/schema", "examples/orders/ordersgen", "ordersgen", false},
		{"examples/orders/internal/ordersv1/schema", "examples/orders/internal/ordersv1/ordersgen", "ordersgen", true},
		{"refdomain/schema", "refdomain", "refdomain", false},
		{"internal/testkit/bank/schema", "internal/testkit/bank/bankgen", "bankgen", false},
		{"internal/testkit/dispatch/schema", "internal/testkit/dispatch/dispatchgen", "dispatchgen", false},
	} {
		out, err := buildWith(filepath.Join(root, c.schema), c.pkg, c.unregistered)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		stale, err := diff(filepath.Join(root, c.out), out.files)
		if err != nil {
			t.Fatal(err)
		}
		if len(stale) > 0 {
			t.Errorf("%s is stale (run go generate ./...): %v", c.out, stale)
		}
		if fresh, err := lockFresh(filepath.Join(root, c.schema), out.lock); err != nil || !fresh {
			t.Errorf("%s/%s is stale or missing (run go generate ./...): %v", c.schema, lockName, err)
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
		{"duplicate key tag", "//mk:key tag=100\ntype A struct{}\n\n//mk:key tag=100\ntype B struct{}", 7, "tag 100 already used by A"},
		{"unknown type", "type R struct {\n\tX Missing\n}", 4, "unknown type Missing"},
		{"unknown option", "type R struct {\n\tX uint8 `mk:\"maxx=3\"`\n}", 4, "unknown field option \"maxx\""},
		{"identity over its max", "//mk:identity min=5 max=2\ntype N string", 4, "min=5 over max=2"},
		{"union without tag", "type V struct{}\n\n//mk:union\ntype U struct {\n\tA *V\n}", 7, "needs tag=N"},
		{"partition variant without kind", "type V struct{}\n\n//mk:union partition\ntype U struct {\n\tA *V `mk:\"tag=1\"`\n}", 7, "needs kind=name"},
		{"record without version", "//mk:record\ntype R struct{}", 4, "needs version=N"},
		{"le on a missing field", "type R struct {\n\tA uint64 `mk:\"le=B\"`\n}", 4, "le=B must name another integer field"},
		{"slice of strings without elem_max", "type R struct {\n\tTags []string `mk:\"max=8\"`\n}", 4, "needs elem_max=N"},
		{"elem_max on a slice of integers", "type R struct {\n\tN []uint64 `mk:\"max=8,elem_max=3\"`\n}", 4, "elem_max= applies to slices of strings or []byte only"},
		{"slice in a key", "//mk:key tag=100\ntype K struct {\n\tX []uint64\n}", 5, "key fields are"},
		{"recursive struct", "type R struct {\n\tR []R `mk:\"max=2\"`\n}", 3, "contains itself"},
		{"enum without values", "//mk:enum\ntype E uint8", 4, "no constants"},
		{"family not oldest first", "//mk:record version=2\ntype A struct{}\n\n//mk:record version=1\ntype B struct{}\n\n//mk:key tag=100 value=A,B\ntype K struct{}", 10, "value=A,B: B (version 1) is not above A (version 2): a family lists its versions oldest first"},
		{"family of one version twice", "//mk:record version=1\ntype A struct{}\n\n//mk:record version=1\ntype B struct{}\n\n//mk:key tag=100 value=A,B\ntype K struct{}", 10, "B (version 1) is not above A (version 1)"},
		{"family lists a record twice", "//mk:record version=1\ntype A struct{}\n\n//mk:key tag=100 value=A,A\ntype K struct{}", 7, "value=A,A lists A twice"},
		{"family format decreasing", "//mk:record version=1 format=2\ntype A struct{}\n\n//mk:record version=2\ntype B struct{}\n\n//mk:key tag=100 value=A,B\ntype K struct{}", 10, "B has format 1, below A's 2: a newer version never needs an older store format"},
		{"empty value", "//mk:key tag=100 value=\ntype K struct{}", 4, "value= needs the records its rows hold"},
		{"family naming a struct", "type A struct{}\n\n//mk:key tag=100 value=A\ntype K struct{}", 6, "value=A names no record of the schema"},
		{"key retired without a family", "//mk:key tag=100 retired=1\ntype K struct{}", 4, "retired= on a key class retires versions of its value family: it needs value="},
		{"key retired version 0", "//mk:record version=1\ntype A struct{}\n\n//mk:key tag=100 value=A retired=0\ntype K struct{}", 7, "retired=0 is out of range: record versions are 1-255"},
		{"retired version declared", "//mk:record version=1\ntype A struct{}\n\n//mk:key tag=100 value=A retired=1\ntype K struct{}", 7, "A takes version 1 of the family, which retired= reserves"},
		{"family API name taken", "//mk:record version=1\ntype A struct{}\n\n//mk:key tag=100 value=A\ntype K struct{}\n\ntype KValues struct{}", 9, "type KValues: the name of the API generated for the value family of key K"},
		{"record format 0", "//mk:record version=1 format=0\ntype A struct{}", 4, "format=0 is out of range: formats are 1-4294967295"},
		{"record format not a number", "//mk:record version=1 format=two\ntype A struct{}", 4, `format="two" is not an unsigned integer`},
		{"variant format 0", "type V struct{}\n\n//mk:union\ntype U struct {\n\tA *V `mk:\"tag=1,format=0\"`\n}", 7, "variant A: format=0 is out of range"},
		{"partition variant with a format", "type V struct{}\n\n//mk:union partition\ntype U struct {\n\tA *V `mk:\"tag=1,kind=v,format=2\"`\n}", 7, "format= gates values, and a partition identity is none"},
		{"enum constant format 0", "//mk:enum\ntype E uint8\n\nconst EA E = 1 //mk:format=0", 6, "enum E: constant EA: format=0 is out of range"},
		{"enum constant with another directive", "//mk:enum\ntype E uint8\n\nconst EA E = 1 //mk:draft", 6, "enum E: constant EA: unknown directive //mk:draft (a constant takes //mk:format=N only)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			// The namespace, in a file of its own, keeps bad.go's lines as
			// the table counts them.
			writeFile(t, filepath.Join(dir, "ns.go"), "//mk:namespace test\npackage schema\n")
			writeFile(t, filepath.Join(dir, "bad.go"), "package schema\n\n"+c.src+"\n")
			wantSchemaError(t, dir, "bad.go", c.line, c.want)
		})
	}
}

func writeFile(t *testing.T, path, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantSchemaError loads the schema in dir and fails unless the report has
// a line naming file:line and want.
func wantSchemaError(t *testing.T, dir, file string, line int, want string) {
	t.Helper()
	_, err := load(dir)
	if err == nil {
		t.Fatal("schema loaded without error")
	}
	at := file + ":" + strconv.Itoa(line) + ":"
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.Contains(l, at) && strings.Contains(l, want) {
			return
		}
	}
	t.Errorf("report %q has no line with %q and %q", err, at, want)
}

// TestNamespaceAndReservedRangeMistakes: a schema package declares exactly
// one valid namespace in its package doc comment; the reserved namespaces
// ("mkit", "mkit...") and key class tags 1-99 are the library's schema's
// alone, and the library's schema keeps its tags in 1-99. The module
// column is the schema package's import path ("" for no go.mod): a path
// in github.com/mkit-dev/mkitfdb puts the package there in that module,
// any other makes it the root package of a module of that path.
func TestNamespaceAndReservedRangeMistakes(t *testing.T) {
	const lib = "github.com/mkit-dev/mkitfdb"
	cases := []struct {
		name, module, src string
		line              int
		want              string
	}{
		{"missing namespace", "", "// Package schema.\npackage schema\n", 2, "declares no namespace: add //mk:namespace NAME"},
		{"two namespaces", "", "// Package schema.\n//\n//mk:namespace a\n//mk:namespace b\npackage schema\n", 4, "second //mk:namespace: the namespace is already declared at"},
		{"namespace without a name", "", "//mk:namespace\npackage schema\n", 1, "//mk:namespace needs exactly one name, found 0"},
		{"namespace of two names", "", "//mk:namespace a b\npackage schema\n", 1, "needs exactly one name, found 2"},
		{"namespace with an upper-case letter", "", "//mk:namespace Orders\npackage schema\n", 1, `namespace "Orders": must start with a letter a-z`},
		{"namespace with a dash", "", "//mk:namespace my-shop\npackage schema\n", 1, `namespace "my-shop": byte 2 ('-') is not one of a-z, 0-9 and _`},
		{"namespace starting with a digit", "", "//mk:namespace 9lives\npackage schema\n", 1, "must start with a letter a-z"},
		{"namespace over 32 bytes", "", "//mk:namespace " + strings.Repeat("a", 33) + "\npackage schema\n", 1, "must be 1-32 bytes long"},
		{"namespace outside the package doc", "", "//mk:namespace shop\n\npackage schema\n", 1, "belongs in the package doc comment"},
		{"reserved namespace", "", "//mk:namespace mkit\npackage schema\n", 1, `namespace "mkit": namespaces starting with "mkit" are reserved for the library's schema`},
		{"reserved namespace prefix", "example.com/shop", "//mk:namespace mkitshop\npackage schema\n", 1, `namespace "mkitshop": namespaces starting with "mkit" are reserved`},
		{"reserved namespace in the library's module, another package", lib + "/other", "//mk:namespace mkit\npackage schema\n", 1, "reserved for the library's schema"},
		{"reserved key tag", "example.com/shop", "//mk:namespace shop\npackage schema\n\n//mk:key tag=99\ntype K struct{}\n", 5, "type K: tag=99 is out of range: an importing schema's key classes take tags 100-4294967295 (1-99 are reserved for the library's)"},
		{"key tag 0", "", "//mk:namespace shop\npackage schema\n\n//mk:key tag=0\ntype K struct{}\n", 5, "type K: tag=0 is out of range: an importing schema's key classes take tags 100-4294967295"},
		{"library key tag out of its range", lib + "/schema", "//mk:namespace mkit\npackage schema\n\n//mk:key tag=100\ntype K struct{}\n", 5, "type K: tag=100 is out of range: the library's key classes take tags 1-99"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "pkg")
			if c.module != "" {
				// root holds go.mod; the package sits at c.module.
				mod, sub := c.module, ""
				if rest, ok := strings.CutPrefix(c.module, lib+"/"); ok {
					mod, sub = lib, rest
				}
				writeFile(t, filepath.Join(root, "go.mod"), "module "+mod+"\n")
				dir = filepath.Join(root, sub)
			}
			writeFile(t, filepath.Join(dir, "bad.go"), c.src)
			wantSchemaError(t, dir, "bad.go", c.line, c.want)
		})
	}
}

// TestLibrarySchemaMayUseTheReservedRanges: the package at the library
// schema's import path may take namespace "mkit" and tags 1-99, and
// generates partition identities that start with its namespace.
func TestLibrarySchemaMayUseTheReservedRanges(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module github.com/mkit-dev/mkitfdb\n\ngo 1.26\n")
	writeFile(t, filepath.Join(root, "schema", "s.go"), "//mk:namespace mkit\npackage schema\n\n//mk:key tag=1\ntype K struct{}\n")
	s, err := load(filepath.Join(root, "schema"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.library || s.Namespace != "mkit" {
		t.Errorf("library=%v namespace=%q; want the library's schema, namespace mkit", s.library, s.Namespace)
	}
	if got := importPath(filepath.Join(repoRoot(t), "schema")); got != libraryPkg {
		t.Errorf("importPath(the repository's schema) = %q, want %q", got, libraryPkg)
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
	// The first run writes the layout lock, the one the repository's
	// orders schema commits.
	lock, err := os.ReadFile(filepath.Join(m.dir, "schema", lockName))
	if err != nil {
		t.Fatalf("go generate wrote no layout lock: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(repoRoot(t), "examples/orders/schema", lockName))
	if err != nil {
		t.Fatal(err)
	}
	if string(lock) != string(want) {
		t.Errorf("the first go generate wrote a lock that differs from examples/orders/schema's:\n%s", lock)
	}
	m.run("test", "./...")
}

// TestEveryFieldTypeGenerates generates testdata/everytype, a record of
// every field type schema/doc.go documents and a key class of every type
// with a tuple form, into a module of its own, then vets it and runs its
// generated round-trip, rejection and bound tests, each fuzz target on
// its seeds, and the hand-written tests of testdata/everygen (tests of the
// generated code's internals, such as its decoders' fast path), so a type
// whose code does not compile or round-trip fails here.
func TestEveryFieldTypeGenerates(t *testing.T) {
	m := newTempModule(t, "example.com/everytype")
	files, err := generate("testdata/everytype", "everygen")
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		m.write(filepath.Join("everygen", name), src)
	}
	tests, err := filepath.Glob(filepath.Join("testdata", "everygen", "*_test.go"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no hand-written tests in testdata/everygen (%v)", err)
	}
	for _, path := range tests {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, clash := files[filepath.Base(path)]; clash {
			t.Fatalf("%s has the name of a generated file", path)
		}
		m.write(filepath.Join("everygen", filepath.Base(path)), src)
	}
	m.run("mod", "tidy")
	m.run("vet", "./...")
	m.run("test", "-count=1", "./...")
}

// TestTwoPackagesOfOneNamespaceFailAtStart links two generated packages of
// one namespace into a program, which must fail at start naming both
// import paths, while a program with one of them starts and finds it in
// the registry.
func TestTwoPackagesOfOneNamespaceFailAtStart(t *testing.T) {
	m := newTempModule(t, "example.com/dup")
	files, err := generate(filepath.Join(repoRoot(t), "internal/testkit/bank/schema"), "bankgen")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"a/bankgen", "b/bankgen"} {
		for name, src := range files {
			if !strings.HasSuffix(name, "_test.go") {
				m.write(filepath.Join(dir, name), src)
			}
		}
	}
	m.write("one/main.go", []byte(`package main

import (
	"fmt"

	_ "example.com/dup/a/bankgen"
	"github.com/mkit-dev/mkitfdb/codec/registry"
)

func main() {
	s, ok := registry.Lookup("bank")
	fmt.Println(ok, s.ImportPath, len(s.Keys), len(s.Records))
}
`))
	m.write("two/main.go", []byte(`package main

import (
	_ "example.com/dup/a/bankgen"
	_ "example.com/dup/b/bankgen"
)

func main() {}
`))
	m.run("mod", "tidy")
	out, err := m.output("run", "./one")
	if err != nil {
		t.Fatalf("one package of the namespace: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(out); got != "true example.com/dup/a/bankgen 2 2" {
		t.Errorf("registry of one package: %q", got)
	}
	out, err = m.output("run", "./two")
	if err == nil {
		t.Fatalf("two packages of one namespace started:\n%s", out)
	}
	for _, want := range []string{`namespace "bank" is declared by two linked packages`, "example.com/dup/a/bankgen", "example.com/dup/b/bankgen"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q:\n%s", want, out)
		}
	}
}

// output runs the go command in the module and returns its combined
// output and error.
func (m *tempModule) output(args ...string) (string, error) {
	m.t.Helper()
	cmd := exec.Command(m.goc, args...)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSchemaMistakesAreReportedOnce: a mistake is one line of the report
// that says what is allowed (a number's range, the closest known option
// for a misspelled one, what to use instead of a map), and nothing the
// mistake implies is reported as a mistake of its own: no "tag 0" after a
// tag out of range, no missing bound after a misspelled max. The report
// must be exactly the lines given, in order.
func TestSchemaMistakesAreReportedOnce(t *testing.T) {
	const (
		userTags = "an importing schema's key classes take tags 100-4294967295 (1-99 are reserved for the library's)"
		variants = "variant tags are 1-255"
		versions = "record versions are 1-255"
		bounds   = "identity bounds are 0-2147483647 bytes"
		fieldOpt = "the options are max, elem_max, min, le, sorted and optional"
		maps     = `maps are not supported (a record has one encoding, and a Go map has no order): use a slice of a struct holding each entry's key and value, with mk:"max=N", or a row per entry under a key class of its own`
	)
	cases := []struct {
		name, src string
		want      []string
	}{
		{"key tag 0", "//mk:key tag=0\ntype K struct{}",
			[]string{"4:6: type K: tag=0 is out of range: " + userTags}},
		{"key tag below 100", "//mk:key tag=99\ntype K struct{}",
			[]string{"4:6: type K: tag=99 is out of range: " + userTags}},
		{"key tag over 32 bits", "//mk:key tag=5000000000\ntype K struct{}",
			[]string{"4:6: type K: tag=5000000000 is out of range: " + userTags}},
		{"key tag not a number", "//mk:key tag=-1\ntype K struct{}",
			[]string{`4:6: type K: tag="-1" is not an unsigned integer: ` + userTags}},
		{"key without a tag", "//mk:key\ntype K struct{}",
			[]string{"4:6: type K: //mk:key needs tag=N: " + userTags}},
		{"two keys with tag 0", "//mk:key tag=0\ntype K struct{}\n\n//mk:key tag=0\ntype L struct{}",
			[]string{"4:6: type K: tag=0 is out of range: " + userTags, "7:6: type L: tag=0 is out of range: " + userTags}},
		{"record version 0", "//mk:record version=0\ntype R struct{}",
			[]string{"4:6: type R: version=0 is out of range: " + versions}},
		{"record version over 255", "//mk:record version=300\ntype R struct{}",
			[]string{"4:6: type R: version=300 is out of range: " + versions}},
		{"variant tag 0", "type V struct{}\n\n//mk:union\ntype U struct {\n\tA *V `mk:\"tag=0\"`\n}",
			[]string{"7:2: union U: variant A: tag=0 is out of range: " + variants}},
		{"variant tags over 255", "type V struct{}\ntype W struct{}\n\n//mk:union\ntype U struct {\n\tA *V `mk:\"tag=300\"`\n\tB *W `mk:\"tag=400\"`\n}",
			[]string{"8:2: union U: variant A: tag=300 is out of range: " + variants, "9:2: union U: variant B: tag=400 is out of range: " + variants}},
		{"identity max out of range", "//mk:identity min=1 max=4294967296\ntype N string",
			[]string{"4:6: type N: max=4294967296 is out of range: " + bounds}},
		{"map in a record", "//mk:record version=1\ntype R struct {\n\tM map[string]uint64\n}",
			[]string{"5:4: type R: " + maps}},
		{"map in a key", "//mk:key tag=100\ntype K struct {\n\tM map[string]uint64\n}",
			[]string{"5:4: type K: " + maps}},
		{"misspelled max", "type R struct {\n\tName string `mk:\"maxx=3\"`\n}",
			[]string{`4:2: R.Name: unknown field option "maxx": did you mean max? (` + fieldOpt + ")"}},
		{"misspelled elem_max", "type R struct {\n\tNames []string `mk:\"max=3,elemmax=4\"`\n}",
			[]string{`4:2: R.Names: unknown field option "elemmax": did you mean elem_max? (` + fieldOpt + ")"}},
		{"misspelled max of a key field", "//mk:key tag=100\ntype K struct {\n\tName string `mk:\"mx=3\"`\n}",
			[]string{`5:2: K.Name: unknown field option "mx": did you mean max? (` + fieldOpt + ")"}},
		{"unknown option like none", "type R struct {\n\tN uint8 `mk:\"colour=3\"`\n}",
			[]string{`4:2: R.N: unknown field option "colour" (` + fieldOpt + ")"}},
		{"misspelled identity bound", "//mk:identity min=1 mx=3\ntype N string",
			[]string{`4:6: type N: unknown //mk:identity argument "mx": did you mean max? (the arguments are min and max)`}},
		{"misspelled key tag", "//mk:key tga=100\ntype K struct{}",
			[]string{`4:6: type K: unknown //mk:key argument "tga": did you mean tag? (the arguments are tag, value, draft and retired)`}},
		{"key value naming no record", "//mk:key tag=100 value=Nope\ntype K struct{}\n\ntype Nope struct{}",
			[]string{`4:6: key K: value=Nope names no record of the schema`}},
		{"misspelled variant tag", "type V struct{}\n\n//mk:union\ntype U struct {\n\tA *V `mk:\"tga=1\"`\n}",
			[]string{`7:2: union U: variant A: unknown option "tga": did you mean tag? (the options are tag, kind and format)`}},
		{"misspelled variant kind", "type V struct{}\n\n//mk:union partition\ntype U struct {\n\tA *V `mk:\"tag=1,knd=v\"`\n}",
			[]string{`7:2: union U: variant A: unknown option "knd": did you mean kind? (the options are tag, kind and format)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ns.go"), "//mk:namespace test\npackage schema\n")
			writeFile(t, filepath.Join(dir, "bad.go"), "package schema\n\n"+c.src+"\n")
			_, err := load(dir)
			if err == nil {
				t.Fatal("schema loaded without error")
			}
			got := strings.Split(strings.ReplaceAll(err.Error(), filepath.Join(dir, "bad.go")+":", ""), "\n")
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("report:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
			}
		})
	}
}

// TestUnregisteredPackageHasNoRegistration: -unregistered generates the
// same package without registry.go (so no init registers it), and its doc
// says so; every other file is the registered package's, but doc.go.
func TestUnregisteredPackageHasNoRegistration(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "examples/orders/internal/ordersv1/schema")
	reg, err := buildWith(dir, "ordersgen", false)
	if err != nil {
		t.Fatal(err)
	}
	unreg, err := buildWith(dir, "ordersgen", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.files[registryFile]; !ok {
		t.Fatalf("the registered package has no %s", registryFile)
	}
	if _, ok := unreg.files[registryFile]; ok {
		t.Errorf("-unregistered wrote %s", registryFile)
	}
	for name, src := range unreg.files {
		if strings.Contains(string(src), "registry.Register") {
			t.Errorf("-unregistered: %s registers the package", name)
		}
		if name != "doc.go" && string(src) != string(reg.files[name]) {
			t.Errorf("-unregistered: %s differs from the registered package's", name)
		}
	}
	if doc := string(unreg.files["doc.go"]); !strings.Contains(doc, "does not register itself") {
		t.Errorf("-unregistered doc.go does not say it is not registered:\n%s", doc)
	}
	if string(unreg.lock) != string(reg.lock) {
		t.Error("-unregistered changes the lock")
	}
}
