package telemetry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/telemetry"
)

// unitSpelling is a unit as OpenTelemetry's semantic conventions spell
// the library's: bytes, seconds, or a count of things in braces.
var unitSpelling = regexp.MustCompile(`^(By|s|\{[a-z]+\})$`)

// unitOfSuffix is the unit a name's suffix promises.
var unitOfSuffix = map[string]string{"_bytes": "By", "_seconds": "s", "_rows": "{row}"}

// Every entry of the catalogue is a well-formed Prometheus metric: a
// unique mkitfdb_ name (counters ending in _total, gauges not), a help
// text, label names of this package, and a unit as OpenTelemetry spells
// it, the one its name's suffix promises.
func TestCatalogueEntriesAreWellFormed(t *testing.T) {
	known := []string{telemetry.LabelPartitionKind, telemetry.LabelTimerKind, telemetry.LabelMigration}
	seen := map[string]bool{}
	require.NotEmpty(t, telemetry.Catalogue())
	for _, d := range telemetry.Catalogue() {
		name := d.Name()
		assert.True(t, strings.HasPrefix(name, "mkitfdb_"), name)
		assert.False(t, seen[name], "duplicate name %s", name)
		seen[name] = true
		assert.True(t, strings.HasSuffix(d.Help(), "."), "%s: help %q", name, d.Help())
		switch d.Type() {
		case telemetry.Counter:
			assert.True(t, strings.HasSuffix(name, "_total"), name)
		case telemetry.Gauge:
			assert.False(t, strings.HasSuffix(name, "_total"), name)
		default:
			t.Errorf("%s: type %v", name, d.Type())
		}
		for _, l := range d.Labels() {
			assert.Contains(t, known, l, name)
		}
		assert.Regexp(t, unitSpelling, d.Unit(), name)
		for suffix, unit := range unitOfSuffix {
			if strings.HasSuffix(strings.TrimSuffix(name, "_total"), suffix) {
				assert.Equal(t, unit, d.Unit(), "%s: unit", name)
			}
		}
		assert.Equal(t, name, d.String())
	}
}

func TestCheck(t *testing.T) {
	pk := telemetry.Label{Name: telemetry.LabelPartitionKind, Value: "ref"}
	tk := telemetry.Label{Name: telemetry.LabelTimerKind, Value: "7"}
	fired := telemetry.MetricTimersFired
	cases := []struct {
		name   string
		d      *telemetry.Desc
		typ    telemetry.Type
		labels []telemetry.Label
		err    string // "" when accepted
	}{
		{"its labels", fired, telemetry.Counter, []telemetry.Label{pk, tk}, ""},
		{"its labels in another order", fired, telemetry.Counter, []telemetry.Label{tk, pk}, ""},
		{"no labels, as listed", telemetry.MetricSchedulerTicks, telemetry.Counter, nil, ""},
		{"a gauge", telemetry.MetricRelayBacklogRows, telemetry.Gauge, []telemetry.Label{pk}, ""},
		{"a label missing", fired, telemetry.Counter, []telemetry.Label{pk}, "its catalogue entry has"},
		{"a label too many", telemetry.MetricSchedulerTicks, telemetry.Counter, []telemetry.Label{pk}, "its catalogue entry has []"},
		{"a label twice", fired, telemetry.Counter, []telemetry.Label{pk, pk}, "its catalogue entry has"},
		{"another label name", fired, telemetry.Counter, []telemetry.Label{pk, {Name: "source_kind", Value: "x"}}, `labels ["partition_kind" "source_kind"]`},
		{"the wrong type", fired, telemetry.Gauge, []telemetry.Label{pk, tk}, "is a counter, sampled as a gauge"},
		{"a Desc of no catalogue", new(telemetry.Desc), telemetry.Counter, nil, "not in the catalogue"},
		{"a copy of a catalogue Desc", func() *telemetry.Desc { c := *telemetry.MetricSchedulerTicks; return &c }(), telemetry.Counter, nil, "not in the catalogue"},
		{"nil", nil, telemetry.Counter, nil, "metric <nil> is not in the catalogue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := telemetry.Check(tc.d, tc.typ, tc.labels)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, telemetry.ErrInvalidSample)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// Desc values are made only in this package's source, each as a
// package-level variable, and every one of them is in the catalogue: since
// components emit by Desc, none can emit a metric the catalogue lacks.
// (The handlers' own tests check the label sets they emit, through a
// Recorder, whose Err they assert.)
func TestEveryDescDeclaredIsInTheCatalogue(t *testing.T) {
	inCatalogue := map[string]bool{}
	for _, d := range telemetry.Catalogue() {
		inCatalogue[d.Name()] = true
	}
	fset := token.NewFileSet()
	declared := map[string]bool{}
	for _, f := range parseDir(t, fset, ".") {
		topLevel := map[*ast.CompositeLit]bool{}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for i, v := range spec.(*ast.ValueSpec).Values {
					lit := descLiteral(v)
					if lit == nil {
						continue
					}
					topLevel[lit] = true
					name := fieldString(lit, "name")
					where := fset.Position(lit.Pos())
					ident := spec.(*ast.ValueSpec).Names[i].Name
					if !inCatalogue[name] {
						t.Errorf("%s: %s (%q) is declared but not in the catalogue: add it to catalogue in catalogue.go", where, ident, name)
					}
					if declared[name] {
						t.Errorf("%s: %q is declared twice", where, name)
					}
					declared[name] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok && isDesc(lit.Type) && !topLevel[lit] {
				t.Errorf("%s: a Desc made outside a package-level variable of the catalogue", fset.Position(lit.Pos()))
			}
			return true
		})
	}
	for name := range inCatalogue {
		assert.True(t, declared[name], "%s is in the catalogue but declared nowhere the test can see", name)
	}
}

// No package outside telemetry spells a metric name in its code (tests
// may, to compare exports): a name lives in the catalogue only.
func TestNoPackageNamesAMetricOutsideTheCatalogue(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == filepath.Join(root, "telemetry") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(s, "mkitfdb_") {
				t.Errorf("%s: metric name %q outside the telemetry catalogue", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
}

func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files)
	return files
}

// descLiteral returns the Desc literal of &Desc{...} or Desc{...}.
func descLiteral(e ast.Expr) *ast.CompositeLit {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	if lit, ok := e.(*ast.CompositeLit); ok && isDesc(lit.Type) {
		return lit
	}
	return nil
}

func isDesc(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "Desc"
}

// fieldString returns the string literal of field key in lit, or "".
func fieldString(lit *ast.CompositeLit, key string) string {
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if id, ok := kv.Key.(*ast.Ident); !ok || id.Name != key {
			continue
		}
		if bl, ok := kv.Value.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			s, _ := strconv.Unquote(bl.Value)
			return s
		}
	}
	return ""
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err, "telemetry is one level under the module root")
	return dir
}
