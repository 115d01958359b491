// Command apisurface counts the exported identifiers of Go packages: what
// an importer can name. It parses the package's non-test files of the
// current platform and build tags (as go build selects them) and counts
//
//   - each exported constant, variable, type and function declared at
//     package level;
//   - each exported method of an exported type;
//   - each exported field of an exported struct type and each method of
//     an exported interface type, embedded ones included.
//
// Usage:
//
//	go run ./internal/checks/apisurface [-tags t1,t2] [-v] ./fdblayer ./fdblayer/kv ./fdbsim
//
// It prints one line per package (kinds and total) and, with -v, every
// identifier, as Type.Method or Type.Field for members.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	tags := flag.String("tags", "", "comma-separated build tags")
	verbose := flag.Bool("v", false, "list every identifier")
	flag.Parse()
	ctx := build.Default
	if *tags != "" {
		ctx.BuildTags = strings.Split(*tags, ",")
	}
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: apisurface [-tags t1,t2] [-v] dir...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		s, err := count(&ctx, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "apisurface: %s: %v\n", dir, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d exported identifiers (%d package-level, %d methods, %d fields and interface methods)\n",
			dir, s.total(), len(s.decls), len(s.methods), len(s.members))
		if *verbose {
			for _, names := range [][]string{s.decls, s.methods, s.members} {
				for _, n := range names {
					fmt.Println("\t" + n)
				}
			}
		}
	}
}

// surface holds a package's exported identifiers by kind, sorted.
type surface struct{ decls, methods, members []string }

func (s surface) total() int { return len(s.decls) + len(s.methods) + len(s.members) }

func count(ctx *build.Context, dir string) (surface, error) {
	pkg, err := ctx.ImportDir(dir, 0)
	if err != nil {
		return surface{}, err
	}
	var s surface
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return surface{}, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					if d.Name.IsExported() {
						s.decls = append(s.decls, d.Name.Name)
					}
					continue
				}
				if recv := typeName(d.Recv.List[0].Type); ast.IsExported(recv) && d.Name.IsExported() {
					s.methods = append(s.methods, recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if n.IsExported() {
								s.decls = append(s.decls, n.Name)
							}
						}
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							s.decls = append(s.decls, spec.Name.Name)
							s.members = append(s.members, members(spec.Name.Name, spec.Type)...)
						}
					}
				}
			}
		}
	}
	for _, names := range [][]string{s.decls, s.methods, s.members} {
		slices.Sort(names)
	}
	return s, nil
}

// typeName is the name of a type expression: T of T, *T, T[P], *T[P]
// and pkg.T.
func typeName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// members lists the exported fields of a struct type and the methods an
// interface type declares, as typ.Name.
func members(typ string, e ast.Expr) []string {
	var fields *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			// An embedded field is a member by its type's name; an
			// embedded interface adds methods counted where it is declared.
			if _, ok := e.(*ast.StructType); ok {
				if name := typeName(f.Type); ast.IsExported(name) {
					out = append(out, typ+"."+name)
				}
			}
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, typ+"."+n.Name)
			}
		}
	}
	return out
}
