package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// schemaErrors collects every mistake found, each with its position, so one
// run reports them all.
type schemaErrors []string

func (e *schemaErrors) add(pos token.Position, format string, args ...any) {
	*e = append(*e, fmt.Sprintf("%s: %s", pos, fmt.Sprintf(format, args...)))
}

func (e schemaErrors) Error() string { return strings.Join(e, "\n") }

// load parses the schema package in dir and resolves it into a model. It
// reports every schema mistake it finds with file:line.
func load(dir string) (*schema, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("schema: no Go files in %s", dir)
	}
	l := &loader{fset: fset, s: &schema{byName: map[string]*decl{}, library: importPath(dir) == libraryPkg}}
	l.namespaces(files)
	l.retirements(files)
	for _, f := range files {
		l.types(f)
	}
	for _, f := range files {
		l.consts(f)
	}
	l.resolve()
	check(l.s, &l.errs)
	if len(l.errs) > 0 {
		return nil, l.errs
	}
	return l.s, nil
}

type loader struct {
	fset *token.FileSet
	s    *schema
	errs schemaErrors
	// pending union fields, resolved once every type is known
	unions map[*decl][]*ast.Field
}

func (l *loader) pos(n ast.Node) token.Position { return l.fset.Position(n.Pos()) }

// directive finds the //mk: line of a doc comment.
func directive(groups ...*ast.CommentGroup) (name string, args map[string]string, ok bool) {
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			text, found := strings.CutPrefix(c.Text, "//mk:")
			if !found {
				continue
			}
			parts := strings.Fields(text)
			if len(parts) == 0 {
				return "", nil, true
			}
			args = map[string]string{}
			for _, p := range parts[1:] {
				k, v, _ := strings.Cut(p, "=")
				args[k] = v
			}
			return parts[0], args, true
		}
	}
	return "", nil, false
}

func (l *loader) types(f *ast.File) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			docs := []*ast.CommentGroup{ts.Doc}
			if len(gd.Specs) == 1 {
				docs = append(docs, gd.Doc)
			}
			l.typeSpec(ts, docs)
		}
	}
}

func (l *loader) typeSpec(ts *ast.TypeSpec, docs []*ast.CommentGroup) {
	pos := l.pos(ts)
	name := ts.Name.Name
	if !ast.IsExported(name) {
		l.errs.add(pos, "type %s: schema types must be exported", name)
		return
	}
	if ts.TypeParams != nil {
		l.errs.add(pos, "type %s: generic types are not supported", name)
		return
	}
	if prev, dup := l.s.byName[name]; dup {
		l.errs.add(pos, "type %s already declared at %s", name, prev.Pos)
		return
	}
	d := &decl{Name: name, Pos: pos}
	for _, g := range docs {
		if g != nil && d.Doc == "" {
			d.Doc = docText(g)
		}
	}
	dir, args, has := directive(docs...)
	// guessed holds the arguments a misspelled one was taken to mean: one
	// error says so, and none follows saying they are missing.
	guessed := map[string]bool{}
	known := func(keys ...string) {
		for _, k := range sortedKeys(args) {
			if !contains(keys, k) {
				msg, guess := unknownName("//mk:"+dir+" argument", k, keys)
				l.errs.add(pos, "type %s: %s", name, msg)
				guessed[guess] = true
			}
		}
	}
	// arg returns argument key as an integer in lo..hi, which rule states;
	// ok is false, after one error (none for a guessed argument), when it
	// is missing or out of range.
	arg := func(key string, lo, hi uint64, rule string) (v uint64, ok bool) {
		s, given := args[key]
		if !given {
			if !guessed[key] {
				l.errs.add(pos, "type %s: //mk:%s needs %s=N: %s", name, dir, key, rule)
			}
			return 0, false
		}
		return rangeArg(func(format string, a ...any) { l.errs.add(pos, "type %s: "+format, append([]any{name}, a...)...) }, key, s, lo, hi, rule)
	}
	st, isStruct := ts.Type.(*ast.StructType)
	switch {
	case !has:
		if !isStruct {
			l.errs.add(pos, "type %s: a type without a //mk: directive must be a struct", name)
			return
		}
		d.Kind = kindStruct
		d.Fields = l.fields(d, st)
	case dir == "identity":
		known("min", "max")
		if id, ok := ts.Type.(*ast.Ident); !ok || id.Name != "string" {
			l.errs.add(pos, "type %s: //mk:identity needs a string type", name)
		}
		const rule = "identity bounds are 0-2147483647 bytes"
		mn, minOK := arg("min", 0, math.MaxInt32, rule)
		mx, maxOK := arg("max", 0, math.MaxInt32, rule)
		d.Kind, d.Min, d.Max = kindIdentity, int(mn), int(mx)
		if minOK && maxOK && d.Min > d.Max {
			l.errs.add(pos, "type %s: min=%d over max=%d", name, d.Min, d.Max)
		}
	case dir == "retired":
		// reported by retirements: it belongs in the package doc
		return
	case dir == "enum":
		known("retired")
		if id, ok := ts.Type.(*ast.Ident); !ok || id.Name != "uint8" {
			l.errs.add(pos, "type %s: //mk:enum needs a uint8 type", name)
		}
		d.Kind = kindEnum
		l.retiredOf(d, pos, args)
	case dir == "union":
		known("partition", "retired")
		_, d.Partition = args["partition"]
		d.Kind = kindUnion
		l.retiredOf(d, pos, args)
		if !isStruct {
			l.errs.add(pos, "type %s: //mk:union needs a struct of variant pointers", name)
			return
		}
		l.pendUnion(d, st)
	case dir == "key":
		known("tag", "value", "draft", "retired")
		d.Draft = l.draftArg(d, pos, args)
		d.familyPos = pos
		if v, ok := args["value"]; ok {
			if v == "" {
				l.errs.add(pos, "type %s: value= needs the records its rows hold, oldest first (value=OrderV1,OrderV2)", name)
			} else {
				d.familyNames = strings.Split(v, ",")
			}
		}
		lo, hi, rule := keyTagRange(l.s.library)
		// A tag out of range stays 0, which no key class may take, so
		// that check reports nothing more of it.
		tag, _ := arg("tag", lo, hi, rule)
		d.Key, d.Tag = true, uint32(tag)
		if !isStruct {
			l.errs.add(pos, "type %s: //mk:key needs a struct", name)
			return
		}
		d.Kind = kindStruct
		d.Fields = l.fields(d, st)
		if _, r := args["retired"]; r && d.familyNames == nil {
			l.errs.add(pos, "type %s: retired= on a key class retires versions of its value family: it needs value=", name)
		} else {
			l.retiredOf(d, pos, args)
		}
	case dir == "record":
		known("version", "union", "draft", "retired", "format")
		d.Draft = l.draftArg(d, pos, args)
		// A version out of range stays 0, which check skips.
		v, _ := arg("version", 1, math.MaxUint8, "record versions are 1-255")
		d.Record, d.Version = true, uint8(v)
		d.Format = 1
		if s, ok := args["format"]; ok {
			if f, ok := rangeArg(func(format string, a ...any) { l.errs.add(pos, "type %s: "+format, append([]any{name}, a...)...) }, "format", s, 1, math.MaxUint32, formatRule); ok {
				d.Format = uint32(f)
			}
		}
		if !isStruct {
			l.errs.add(pos, "type %s: //mk:record needs a struct", name)
			return
		}
		if _, u := args["union"]; u {
			d.Kind = kindUnion
			l.pendUnion(d, st)
			l.retiredOf(d, pos, args)
		} else {
			if _, r := args["retired"]; r {
				l.errs.add(pos, "type %s: retired= applies to union records (their variant tags) only", name)
			}
			d.Kind = kindStruct
			d.Fields = l.fields(d, st)
		}
	default:
		l.errs.add(pos, "type %s: unknown directive //mk:%s (want identity, enum, union, key or record)", name, dir)
		return
	}
	l.s.Decls = append(l.s.Decls, d)
	l.s.byName[name] = d
}

func (l *loader) pendUnion(d *decl, st *ast.StructType) {
	if l.unions == nil {
		l.unions = map[*decl][]*ast.Field{}
	}
	l.unions[d] = st.Fields.List
}

func docText(g *ast.CommentGroup) string {
	var lines []string
	for _, line := range strings.Split(g.Text(), "\n") {
		if !strings.HasPrefix(line, "mk:") {
			lines = append(lines, line)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rangeArg parses s, the value of key, as an integer in lo..hi, which rule
// states; a value that is not one is reported once through report, and ok
// is false.
func rangeArg(report func(format string, a ...any), key, s string, lo, hi uint64, rule string) (v uint64, ok bool) {
	v, err := strconv.ParseUint(s, 0, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		report("%s=%q is not an unsigned integer: %s", key, s, rule)
		return 0, false
	case err != nil || v < lo || v > hi:
		report("%s=%s is out of range: %s", key, s, rule)
		return 0, false
	}
	return v, true
}

// sortedKeys returns m's keys in order, so that errors come in one order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (l *loader) fields(d *decl, st *ast.StructType) []*field {
	var out []*field
	for _, af := range st.Fields.List {
		pos := l.pos(af)
		if len(af.Names) == 0 {
			l.errs.add(pos, "type %s: embedded fields are not supported", d.Name)
			continue
		}
		opts := l.tagOptions(d, af)
		for _, n := range af.Names {
			if !n.IsExported() {
				l.errs.add(pos, "type %s: field %s must be exported", d.Name, n.Name)
				continue
			}
			f := &field{Name: n.Name, Pos: pos, Type: l.typeExpr(d, af.Type)}
			l.applyOptions(d, f, opts)
			out = append(out, f)
		}
	}
	return out
}

func (l *loader) tagOptions(d *decl, af *ast.Field) map[string]string {
	opts := map[string]string{}
	if af.Tag == nil {
		return opts
	}
	raw, err := strconv.Unquote(af.Tag.Value)
	if err != nil {
		l.errs.add(l.pos(af), "type %s: malformed field tag", d.Name)
		return opts
	}
	mk := reflect.StructTag(raw).Get("mk")
	if mk == "" {
		return opts
	}
	for _, part := range strings.Split(mk, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		opts[k] = v
	}
	return opts
}

func (l *loader) applyOptions(d *decl, f *field, opts map[string]string) {
	num := func(key string) int {
		v, err := strconv.ParseUint(opts[key], 0, 31)
		if err != nil {
			l.errs.add(f.Pos, "%s.%s: %s=%q is not a non-negative integer", d.Name, f.Name, key, opts[key])
		}
		return int(v)
	}
	for _, k := range sortedKeys(opts) {
		v := opts[k]
		switch k {
		case "max":
			f.Max, f.HasMax = num(k), true
		case "elem_max":
			f.ElemMax, f.HasElemMax = num(k), true
		case "min":
			m, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				l.errs.add(f.Pos, "%s.%s: min=%q is not an unsigned integer", d.Name, f.Name, v)
			}
			f.Min, f.HasMin = m, true
		case "le":
			f.Le = v
		case "sorted":
			f.Sorted = true
		case "optional":
			f.Optional = true
		default:
			msg, guess := unknownName("field option", k, fieldOptions)
			l.errs.add(f.Pos, "%s.%s: %s", d.Name, f.Name, msg)
			if guess != "" {
				if f.guessed == nil {
					f.guessed = map[string]bool{}
				}
				f.guessed[guess] = true
			}
		}
	}
}

// fieldOptions are the options of a field's mk:"..." tag.
var fieldOptions = []string{"max", "elem_max", "min", "le", "sorted", "optional"}

var prims = map[string]bool{"uint8": true, "uint16": true, "uint32": true, "uint64": true, "int64": true, "bool": true, "string": true}

func (l *loader) typeExpr(d *decl, e ast.Expr) *typeRef {
	switch t := e.(type) {
	case *ast.Ident:
		switch {
		case t.Name == "byte":
			return &typeRef{Kind: refPrim, Prim: "uint8"}
		case prims[t.Name]:
			return &typeRef{Kind: refPrim, Prim: t.Name}
		case ast.IsExported(t.Name):
			return &typeRef{Kind: refNamed, name: t.Name}
		}
		l.errs.add(l.pos(e), "type %s: unsupported type %s (want uint8, uint16, uint32, uint64, int64, bool, string, []byte, [N]byte, a schema type, a pointer or a slice)", d.Name, t.Name)
	case *ast.ArrayType:
		if t.Len == nil {
			elem := l.typeExpr(d, t.Elt)
			if elem != nil && elem.Kind == refPrim && elem.Prim == "uint8" {
				return &typeRef{Kind: refBytes}
			}
			if elem != nil && elem.Kind == refSlice {
				l.errs.add(l.pos(e), "type %s: slices of slices are not supported, except [][]byte", d.Name)
				return nil
			}
			return &typeRef{Kind: refSlice, Elem: elem}
		}
		lit, ok := t.Len.(*ast.BasicLit)
		elem, isIdent := t.Elt.(*ast.Ident)
		if !ok || lit.Kind != token.INT || !isIdent || elem.Name != "byte" {
			l.errs.add(l.pos(e), "type %s: the only arrays supported are [N]byte with a literal N", d.Name)
			return nil
		}
		n, err := strconv.Atoi(lit.Value)
		if err != nil || n <= 0 || n > 4096 {
			l.errs.add(l.pos(e), "type %s: array length %s out of 1..4096", d.Name, lit.Value)
			return nil
		}
		return &typeRef{Kind: refArray, Len: n}
	case *ast.StarExpr:
		elem := l.typeExpr(d, t.X)
		return &typeRef{Kind: refPtr, Elem: elem}
	case *ast.MapType:
		l.errs.add(l.pos(e), "type %s: maps are not supported (a record has one encoding, and a Go map has no order): use a slice of a struct holding each entry's key and value, with mk:\"max=N\", or a row per entry under a key class of its own", d.Name)
	default:
		l.errs.add(l.pos(e), "type %s: unsupported type expression", d.Name)
	}
	return nil
}

// consts collects enum values: typed integer constants of enum types.
func (l *loader) consts(f *ast.File) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			id, ok := vs.Type.(*ast.Ident)
			if !ok {
				continue
			}
			en := l.s.byName[id.Name]
			if en == nil || en.Kind != kindEnum {
				continue
			}
			if len(vs.Names) != len(vs.Values) {
				l.errs.add(l.pos(vs), "enum %s: every constant needs an explicit literal value", en.Name)
				continue
			}
			format := l.constFormat(en, vs)
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				var v uint64
				var err error
				if ok && lit.Kind == token.INT {
					v, err = strconv.ParseUint(lit.Value, 0, 8)
				}
				if !ok || lit.Kind != token.INT || err != nil {
					l.errs.add(l.pos(vs), "enum %s: constant %s needs a literal value in 0..255", en.Name, n.Name)
					continue
				}
				short := strings.TrimPrefix(n.Name, en.Name)
				if short == "" {
					short = n.Name
				}
				en.Values = append(en.Values, enumValue{Name: n.Name, Short: short, Value: uint8(v), Format: format})
			}
		}
	}
}

// variantOptions are the options of a union variant's mk:"..." tag.
var variantOptions = []string{"tag", "kind", "format"}

// formatRule states the range of format=.
const formatRule = "formats are 1-4294967295"

// resolve binds named type references and union variants.
func (l *loader) resolve() {
	var walk func(d *decl, f *field, t *typeRef)
	walk = func(d *decl, f *field, t *typeRef) {
		if t == nil {
			return
		}
		if t.Kind == refNamed {
			t.Decl = l.s.byName[t.name]
			if t.Decl == nil {
				l.errs.add(f.Pos, "%s.%s: unknown type %s", d.Name, f.Name, t.name)
			}
		}
		walk(d, f, t.Elem)
	}
	for _, d := range l.s.Decls {
		for _, f := range d.Fields {
			walk(d, f, f.Type)
		}
		if d.Key {
			for _, name := range d.familyNames {
				if v := l.s.byName[name]; v != nil && v.Record {
					d.Family = append(d.Family, v)
				} else {
					l.errs.add(d.familyPos, "key %s: value=%s names no record of the schema", d.Name, name)
				}
			}
		}
	}
	for _, d := range l.s.Decls {
		afs, ok := l.unions[d]
		if !ok {
			continue
		}
		for _, af := range afs {
			pos := l.pos(af)
			star, isPtr := af.Type.(*ast.StarExpr)
			var target *decl
			if isPtr {
				if id, ok := star.X.(*ast.Ident); ok {
					target = l.s.byName[id.Name]
				}
			}
			if len(af.Names) != 1 || target == nil || target.Kind != kindStruct || target.Key || target.Record {
				l.errs.add(pos, "union %s: each field must be one pointer to a plain struct of the schema", d.Name)
				continue
			}
			opts := l.tagOptions(d, af)
			v := &variant{Name: af.Names[0].Name, Type: target, Pos: pos, KindName: opts["kind"]}
			report := func(format string, a ...any) {
				l.errs.add(pos, "union %s: variant %s: "+format, append([]any{d.Name, v.Name}, a...)...)
			}
			for _, k := range sortedKeys(opts) {
				if !contains(variantOptions, k) {
					msg, guess := unknownName("option", k, variantOptions)
					report("%s", msg)
					if guess != "" {
						if v.guessed == nil {
							v.guessed = map[string]bool{}
						}
						v.guessed[guess] = true
					}
				}
			}
			const rule = "variant tags are 1-255"
			// A tag out of range stays 0, which check skips.
			if s, ok := opts["tag"]; ok {
				tag, _ := rangeArg(report, "tag", s, 1, math.MaxUint8, rule)
				v.Tag = uint8(tag)
			} else if !v.guessed["tag"] {
				report("needs tag=N: %s", rule)
			}
			v.Format = 1
			if s, ok := opts["format"]; ok {
				if f, ok := rangeArg(report, "format", s, 1, math.MaxUint32, formatRule); ok {
					v.Format = uint32(f)
				}
			}
			d.Variants = append(d.Variants, v)
		}
	}
}

// constFormat reads the //mk:format=N directive of an enum constant's
// declaration (its doc comment or its line comment): the store format
// that introduced it, 1 when there is none.
func (l *loader) constFormat(en *decl, vs *ast.ValueSpec) uint32 {
	format := uint32(1)
	for _, g := range []*ast.CommentGroup{vs.Doc, vs.Comment} {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			text, ok := strings.CutPrefix(c.Text, "//mk:")
			if !ok {
				continue
			}
			pos := l.pos(c)
			report := func(f string, a ...any) {
				l.errs.add(pos, "enum %s: constant %s: "+f, append([]any{en.Name, vs.Names[0].Name}, a...)...)
			}
			v, isFormat := strings.CutPrefix(strings.TrimSpace(text), "format=")
			if !isFormat {
				report("unknown directive //mk:%s (a constant takes //mk:format=N only)", strings.TrimSpace(text))
				continue
			}
			if f, ok := rangeArg(report, "format", v, 1, math.MaxUint32, formatRule); ok {
				format = uint32(f)
			}
		}
	}
	return format
}
