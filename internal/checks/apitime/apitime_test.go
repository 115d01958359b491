// Package apitime holds the test that keeps milliseconds out of the
// public API of the library's time-bearing packages (and of the test
// helpers importing services use with them): instants are time.Time and
// intervals time.Duration; integer milliseconds stay inside encodings and
// unexported code.
package apitime

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// packages are the directories (from the module root) whose exported API
// must carry no integer milliseconds.
var packages = []string{"clock", "admin", "telemetry", "telemetry/prom", "telemetry/otelmetric", "timers", "store", "relay", "outcome", "watermark", "outbox", "quarantine", "store/storetest", "timers/timerstest", "evolve"}

// msName matches an identifier that names milliseconds: "ms", a Ms unit
// suffix ("dueAtMs", "NowMs", "AtMsRaw"), or Millis anywhere.
var msName = regexp.MustCompile(`^[mM]s$|[a-z0-9]Ms($|[A-Z_])|Millis`)

var integerTypes = map[string]bool{
	"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true,
	"uintptr": true,
}

func isInteger(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && integerTypes[id.Name]
}

// violations lists, for the Go files (tests aside) of dir, every exported
// constant, exported struct field, and parameter or result of an exported
// function, method or interface method that is an integer named as
// milliseconds.
func violations(t *testing.T, fset *token.FileSet, dir string) []string {
	t.Helper()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	var out []string
	report := func(pos token.Pos, what, name string) {
		p := fset.Position(pos)
		out = append(out, p.Filename+":"+itoa(p.Line)+": "+what+" "+name+" is integer milliseconds")
	}
	// named reports a function or method named as milliseconds
	// (CeilingMs()) that returns an integer, named or not.
	named := func(name *ast.Ident, ft *ast.FuncType) {
		if !msName.MatchString(name.Name) || ft.Results == nil {
			return
		}
		for _, r := range ft.Results.List {
			if isInteger(r.Type) {
				report(name.Pos(), "function", name.Name)
				return
			}
		}
	}
	var fields func(fl *ast.FieldList, what string, exportedOnly bool)
	var typ func(e ast.Expr)
	fields = func(fl *ast.FieldList, what string, exportedOnly bool) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, n := range f.Names {
				if exportedOnly && !n.IsExported() {
					continue
				}
				if isInteger(f.Type) && msName.MatchString(n.Name) {
					report(n.Pos(), what, n.Name)
				}
			}
			if !exportedOnly || len(f.Names) == 0 || anyExported(f.Names) {
				typ(f.Type)
			}
		}
	}
	typ = func(e ast.Expr) {
		switch e := e.(type) {
		case *ast.StructType:
			fields(e.Fields, "field", true)
		case *ast.FuncType:
			fields(e.Params, "parameter", false)
			fields(e.Results, "result", false)
		case *ast.InterfaceType:
			for _, m := range e.Methods.List {
				if len(m.Names) > 0 && !m.Names[0].IsExported() {
					continue
				}
				if len(m.Names) > 0 {
					if ft, ok := m.Type.(*ast.FuncType); ok {
						named(m.Names[0], ft)
					}
				}
				typ(m.Type)
			}
		case *ast.StarExpr:
			typ(e.X)
		case *ast.ArrayType:
			typ(e.Elt)
		case *ast.MapType:
			typ(e.Key)
			typ(e.Value)
		case *ast.ChanType:
			typ(e.Value)
		}
	}
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
						continue
					}
					named(d.Name, d.Type)
					typ(d.Type)
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								typ(s.Type)
							}
						case *ast.ValueSpec:
							for i, n := range s.Names {
								if !n.IsExported() || !msName.MatchString(n.Name) {
									continue
								}
								if d.Tok == token.CONST && (s.Type == nil && i < len(s.Values) && isIntLit(s.Values[i]) || s.Type != nil && isInteger(s.Type)) {
									report(n.Pos(), "constant", n.Name)
								}
								if d.Tok == token.VAR && s.Type != nil && isInteger(s.Type) {
									report(n.Pos(), "variable", n.Name)
								}
							}
							if s.Type != nil {
								typ(s.Type)
							}
						}
					}
				}
			}
		}
	}
	return out
}

func anyExported(names []*ast.Ident) bool {
	for _, n := range names {
		if n.IsExported() {
			return true
		}
	}
	return false
}

func exportedReceiver(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	e := recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.Ident:
		return x.IsExported()
	case *ast.IndexExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.IsExported()
	case *ast.IndexListExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.IsExported()
	}
	return false
}

func isIntLit(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x.Kind == token.INT
	case *ast.BinaryExpr:
		return isIntLit(x.X) && isIntLit(x.Y)
	case *ast.ParenExpr:
		return isIntLit(x.X)
	}
	return false
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestPublicAPICarriesNoIntegerMilliseconds fails on any exported
// constant, struct field, or function, method or interface-method
// parameter or result of clock, timers, store, relay, outcome or
// watermark that is an integer named as milliseconds: those are time.Time
// or time.Duration. (outbox, quarantine, storetest, timerstest, admin,
// telemetry and its adapters are held to it too.)
func TestPublicAPICarriesNoIntegerMilliseconds(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	var all []string
	for _, p := range packages {
		all = append(all, violations(t, fset, filepath.Join(root, p))...)
	}
	sort.Strings(all)
	for _, v := range all {
		t.Error(v)
	}
}

// TestCheckerCatchesEachShape runs the checker over a source with every
// shape it must catch and the shapes it must leave alone, so that the test
// above cannot pass by checking nothing.
func TestCheckerCatchesEachShape(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import "time"

const RetryBackoffMs uint64 = 1
const ParkedWakeMs = 1 << 3
const keepMs = 3
const Timeout = 5

type Wakeup struct {
	AtMs    uint64
	atMs    uint64
	Deadline int64
	Inner   struct{ CeilingMs uint64 }
}

type Reader interface {
	NextWake(p int) (atMs uint64, ok bool)
	next(nowMs uint64)
}

func RunDue(nowMs uint64, budget int) {}
func TimerKey(dueAtMs uint64) {}
func Fine(n int, at string) (count int) { return 0 }
func (w *Wakeup) Set(ms int64) {}
func (w *Wakeup) Millis() (totalMillis uint32) { return 0 }
func (w *Wakeup) CeilingMs() uint64 { return 0 }
func (w *Wakeup) SinceMs() time.Duration { return 0 }
func (w *wake) Hidden(nowMs uint64) {}
func hidden(nowMs uint64) {}
type wake struct{}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := violations(t, token.NewFileSet(), dir)
	var names []string
	for _, v := range got {
		f := strings.Fields(v)
		names = append(names, f[len(f)-4])
	}
	sort.Strings(names)
	want := []string{"AtMs", "CeilingMs", "CeilingMs", "Millis", "ParkedWakeMs", "RetryBackoffMs", "atMs", "dueAtMs", "ms", "nowMs", "totalMillis"}
	sort.Strings(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("checker found %q, want %q\n%s", names, want, strings.Join(got, "\n"))
	}
}

// TestCheckerCatchesMillisecondHelpersInClock runs the checker over clock's
// own source with the millisecond helpers it once had put back, so that
// the test above would fail if one came back: clock deals in time.Time,
// and stored milliseconds are store.EncodeTime's.
func TestCheckerCatchesMillisecondHelpersInClock(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "..", "clock")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := violations(t, token.NewFileSet(), dir); len(got) != 0 {
		t.Fatalf("clock as it is: %q, want none", got)
	}
	helpers := `package clock

import "time"

func FromMs(ms uint64) time.Time { return time.UnixMilli(int64(ms)) }
func Ms(t time.Time) uint64 { return uint64(t.UnixMilli()) }
func NowMs(c Clock) uint64 { return Ms(c.Now()) }
func NewManualMs(ms uint64) *Manual { return NewManual(FromMs(ms)) }
func (m *Manual) SetMs(ms uint64) { m.Set(FromMs(ms)) }
`
	if err := os.WriteFile(filepath.Join(dir, "ms.go"), []byte(helpers), 0o644); err != nil {
		t.Fatal(err)
	}
	got := violations(t, token.NewFileSet(), dir)
	var found []string
	for _, v := range got {
		f := strings.Fields(v)
		found = append(found, f[len(f)-5]+" "+f[len(f)-4])
	}
	sort.Strings(found)
	want := []string{"function Ms", "function NowMs", "parameter ms", "parameter ms", "parameter ms"}
	if strings.Join(found, ", ") != strings.Join(want, ", ") {
		t.Errorf("checker found %q, want %q\n%s", found, want, strings.Join(got, "\n"))
	}
}
