// Package owners holds the test that keeps every runtime row of the
// library's schema (package gen) encoded by its owner only: the package
// docs/design.md's owner table names for it.
package owners

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/mkit-dev/mkitfdb"
	genPath = module + "/gen"
	// root is the module's root, from this package's folder.
	root = "../../.."
	// tableHeader opens the owner table in docs/design.md.
	tableHeader = "| Row | Key | Value | Owner |"
)

// row is one line of the owner table: the key classes and records of a
// row kind, and the package (from the module's root) that owns them.
type row struct {
	line    int
	keys    []string
	records []string
	owner   string
}

// ownerTable reads the owner table of docs/design.md.
func ownerTable(t *testing.T) []row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ticked := regexp.MustCompile("`([^`]+)`")
	names := func(cell string) []string {
		var out []string
		for _, m := range ticked.FindAllStringSubmatch(cell, -1) {
			out = append(out, m[1])
		}
		return out
	}
	var rows []row
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == tableHeader:
			if in || rows != nil {
				t.Fatalf("docs/design.md:%d: a second owner table", n)
			}
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("docs/design.md:%d: the owner table's rows have 4 cells: %q", n, line)
		}
		owner := names(cells[3])
		if len(owner) != 1 {
			t.Fatalf("docs/design.md:%d: a row has one owner, a package in backticks: %q", n, line)
		}
		rows = append(rows, row{line: n, keys: names(cells[1]), records: names(cells[2]), owner: owner[0]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("docs/design.md has no owner table (a table whose header is %q)", tableHeader)
	}
	return rows
}

// listed is a package as go list -json describes it.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Export     string
	ImportMap  map[string]string
	Standard   bool
	DepOnly    bool
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// listModule lists the module's packages and their dependencies, with
// their export data, compiling what the build cache lacks.
func listModule(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-export", "-json=ImportPath,Dir,GoFiles,CgoFiles,Export,ImportMap,Standard,DepOnly,Module,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// use is one reference to an encoder of gen, outside gen.
type use struct {
	pkg  string // the package's path, from the module's root
	pos  string
	name string // gen.EncodeBacklog, gen.RelayKey.AppendKey
	what string // the key class or record it encodes
}

// genEncoders returns the key classes and records of gen, read from its
// exported API: a key class is a type with an AppendKey method, a record
// a type with an Encode function.
func genEncoders(gen *types.Package) (keys, records map[string]bool) {
	keys, records = map[string]bool{}, map[string]bool{}
	scope := gen.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || types.IsInterface(tn.Type()) {
			continue // ParsedKey, what ParseKey returns, is no class
		}
		if obj, _, _ := types.LookupFieldOrMethod(tn.Type(), false, gen, "AppendKey"); obj != nil {
			keys[name] = true
		}
		if _, ok := scope.Lookup("Encode" + name).(*types.Func); ok {
			records[name] = true
		}
	}
	return keys, records
}

// encodes returns the key class or record fn encodes, if it is one of
// gen's encoders.
func encodes(fn *types.Func, keys, records map[string]bool) (string, bool) {
	sig := fn.Type().(*types.Signature)
	if recv := sig.Recv(); recv != nil {
		named, ok := types.Unalias(recv.Type()).(*types.Named)
		if ok && fn.Name() == "AppendKey" && keys[named.Obj().Name()] {
			return named.Obj().Name(), true
		}
		return "", false
	}
	for _, prefix := range []string{"Encode", "Append"} {
		if name, ok := strings.CutPrefix(fn.Name(), prefix); ok && (keys[name] || records[name]) {
			return name, true
		}
	}
	return "", false
}

// encoderUses type-checks the module's packages but gen, and returns every
// reference (a call or a function value) to one of gen's encoders made by
// hand-written code: test files are not listed by go list, and generated
// files are skipped.
func encoderUses(t *testing.T) (uses []use, keys, records map[string]bool) {
	t.Helper()
	pkgs := listModule(t)
	exports := map[string]string{}
	for _, p := range pkgs {
		if p.Export != "" {
			exports[p.ImportPath] = p.Export
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	}).(types.ImporterFrom)
	gen, err := imp.Import(genPath)
	if err != nil {
		t.Fatal(err)
	}
	keys, records = genEncoders(gen)
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 10 || len(records) < 10 {
		t.Fatalf("gen has %d key classes and %d records: the test reads gen's API wrong", len(keys), len(records))
	}
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != module || p.DepOnly || p.ImportPath == genPath {
			continue
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		if len(p.GoFiles)+len(p.CgoFiles) == 0 {
			continue // tests only
		}
		var files []*ast.File
		for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: mappedImporter{imp, p.ImportMap, p.Dir}, FakeImportC: true}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		generated := map[*token.File]bool{}
		for _, f := range files {
			generated[fset.File(f.Pos())] = ast.IsGenerated(f)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for id, obj := range info.Uses {
			fn, ok := obj.(*types.Func)
			if !ok || fn.Pkg() == nil || fn.Pkg().Path() != genPath || generated[fset.File(id.Pos())] {
				continue
			}
			what, ok := encodes(fn, keys, records)
			if !ok {
				continue
			}
			name := "gen." + fn.Name()
			if recv := fn.Type().(*types.Signature).Recv(); recv != nil {
				name = "gen." + what + "." + fn.Name()
			}
			pos := fset.Position(id.Pos())
			if r, err := filepath.Rel(abs, pos.Filename); err == nil {
				pos.Filename = r
			}
			uses = append(uses, use{pkg: rel, pos: pos.String(), name: name, what: what})
		}
	}
	return uses, keys, records
}

// mappedImporter resolves a package's imports through its ImportMap (the
// standard library's vendored packages) before the export data.
type mappedImporter struct {
	imp types.ImporterFrom
	m   map[string]string
	dir string
}

func (m mappedImporter) Import(path string) (*types.Package, error) {
	return m.ImportFrom(path, m.dir, 0)
}

func (m mappedImporter) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if to, ok := m.m[path]; ok {
		path = to
	}
	return m.imp.ImportFrom(path, dir, mode)
}

// TestEveryRuntimeRowIsEncodedByItsOwnerOnly: each key class and record
// of gen is in the owner table of docs/design.md (a key class in one row,
// so one owner; a record in the rows of the key classes it is the value
// of), and every reference to one of its encoders (gen.AppendK,
// gen.K.AppendKey, gen.EncodeR, gen.AppendR) from the module's
// hand-written, non-test code is made by the owner of a row it encodes.
// Every row's owner encodes it somewhere, so the table says who does.
func TestEveryRuntimeRowIsEncodedByItsOwnerOnly(t *testing.T) {
	rows := ownerTable(t)
	uses, keys, records := encoderUses(t)

	owners := map[string]map[string]bool{} // key class or record: its owners
	keyRow := map[string]int{}
	for _, r := range rows {
		if len(r.keys)+len(r.records) == 0 {
			t.Errorf("docs/design.md:%d: the row names no key class or record in backticks", r.line)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.owner))); err != nil {
			t.Errorf("docs/design.md:%d: the owner %s is no package of the module: %v", r.line, r.owner, err)
		}
		for _, k := range r.keys {
			if !keys[k] {
				t.Errorf("docs/design.md:%d: %s is no key class of gen", r.line, k)
			}
			if at, ok := keyRow[k]; ok {
				t.Errorf("docs/design.md:%d: %s has a row at line %d already: a key class has one owner", r.line, k, at)
			}
			keyRow[k] = r.line
		}
		for _, rec := range r.records {
			if !records[rec] {
				t.Errorf("docs/design.md:%d: %s is no record of gen", r.line, rec)
			}
		}
		for _, name := range slices.Concat(r.keys, r.records) {
			if owners[name] == nil {
				owners[name] = map[string]bool{}
			}
			owners[name][r.owner] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		if owners[name] == nil {
			t.Errorf("the key class %s has no row in docs/design.md's owner table", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(records)) {
		if owners[name] == nil {
			t.Errorf("the record %s has no row in docs/design.md's owner table", name)
		}
	}

	slices.SortFunc(uses, func(a, b use) int { return strings.Compare(a.pos, b.pos) })
	encoded := map[string]bool{} // "owner name": the owner encodes name
	for _, u := range uses {
		if owners[u.what][u.pkg] {
			encoded[u.pkg+" "+u.what] = true
			continue
		}
		t.Errorf("%s: package %s calls %s, but %s is encoded by %s only (docs/design.md's owner table): use what that package exports",
			u.pos, u.pkg, u.name, u.what, strings.Join(slices.Sorted(maps.Keys(owners[u.what])), ", "))
	}
	for _, r := range rows {
		names := slices.Concat(r.keys, r.records)
		if !slices.ContainsFunc(names, func(n string) bool { return encoded[r.owner+" "+n] }) {
			t.Errorf("docs/design.md:%d: %s encodes none of %s: the row names the wrong owner", r.line, r.owner, strings.Join(names, ", "))
		}
	}
}
