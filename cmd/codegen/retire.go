package main

import (
	"go/ast"
	"go/token"
	"math"
	"strings"
)

// Retirement: what keeps a number that stored bytes may hold from ever
// meaning something else. A key class or record no longer declared is
// retired by a //mk:retired line in a package doc comment,
//
//	//mk:retired key=100,101
//	//mk:retired record=OrderV0
//
// a union variant or enum constant by the retired= argument of its
// union's or enum's directive (//mk:enum retired=4), and a version of a
// key class's value family by the retired= argument of its //mk:key (the
// version byte: //mk:key tag=100 value=OrderV2 retired=1). A retired key
// class tag, variant tag, enum value or family version, or record name,
// may never be declared again, and a retirement the layout lock holds may
// never be dropped (lock.go).

// retiredArgs are the arguments of //mk:retired.
var retiredArgs = []string{"key", "record"}

// retirements reads the //mk:retired lines of files (any comment line
// starting with //mk:retired) into s.RetiredKeys and s.RetiredRecords:
// in a package doc comment, each argument a comma-separated list, no
// number or name retired twice. s.library must be set.
func (l *loader) retirements(files []*ast.File) {
	for _, f := range files {
		for _, g := range f.Comments {
			for _, c := range g.List {
				text, ok := strings.CutPrefix(c.Text, "//mk:retired")
				if !ok || (text != "" && text[0] != ' ' && text[0] != '\t') {
					continue
				}
				pos := l.pos(c)
				if g != f.Doc {
					l.errs.add(pos, "//mk:retired belongs in the package doc comment (right above the package clause); a variant or enum constant is retired by retired=N on its union's or enum's directive")
					continue
				}
				l.retiredLine(pos, strings.Fields(text))
			}
		}
	}
}

// retiredLine reads the arguments of one //mk:retired line at pos.
func (l *loader) retiredLine(pos token.Position, args []string) {
	if len(args) == 0 {
		l.errs.add(pos, "//mk:retired needs key=TAG[,TAG...] or record=Name[,Name...]")
		return
	}
	report := func(format string, a ...any) { l.errs.add(pos, "//mk:retired: "+format, a...) }
	for _, arg := range args {
		k, v, _ := strings.Cut(arg, "=")
		switch k {
		case "key":
			lo, hi, rule := keyTagRange(l.s.library)
			for _, n := range numberList(report, "key", v, lo, hi, rule) {
				if prev := retiredNum(l.s.RetiredKeys, n); prev != nil {
					report("key tag %d is already retired at %s", n, prev.Pos)
					continue
				}
				l.s.RetiredKeys = append(l.s.RetiredKeys, &retired{Num: n, Pos: pos})
			}
		case "record":
			if v == "" {
				report("record= needs the names of the records it retires")
			}
			for _, name := range strings.Split(v, ",") {
				switch {
				case name == "":
					if v != "" {
						report("record=%s has an empty name", v)
					}
				case !token.IsIdentifier(name) || !ast.IsExported(name):
					report("record=%s: %q is not an exported Go name", v, name)
				case retiredName(l.s.RetiredRecords, name) != nil:
					report("record %s is already retired at %s", name, retiredName(l.s.RetiredRecords, name).Pos)
				default:
					l.s.RetiredRecords = append(l.s.RetiredRecords, &retired{Name: name, Pos: pos})
				}
			}
		default:
			msg, _ := unknownName("//mk:retired argument", k, retiredArgs)
			report("%s", msg)
		}
	}
}

// numberList parses v, the value of argument key, as a comma-separated
// list of integers in lo..hi (which rule states), reporting each mistake
// through report; it returns the valid ones, in order.
func numberList(report func(format string, a ...any), key, v string, lo, hi uint64, rule string) []uint64 {
	if v == "" {
		report("%s= needs a comma-separated list of numbers: %s", key, rule)
		return nil
	}
	var out []uint64
	for _, s := range strings.Split(v, ",") {
		if n, ok := rangeArg(report, key, s, lo, hi, rule); ok {
			out = append(out, n)
		}
	}
	return out
}

// retiredOf reads the retired= argument of the directive of d, a union
// (variant tags), an enum (values) or a key class (the version bytes of
// its value family), at pos: each number at most once.
func (l *loader) retiredOf(d *decl, pos token.Position, args map[string]string) {
	v, ok := args["retired"]
	if !ok {
		return
	}
	lo, hi, rule := uint64(1), uint64(math.MaxUint8), "variant tags are 1-255"
	switch {
	case d.Kind == kindEnum:
		lo, rule = 0, "enum values are 0-255"
	case d.Key:
		rule = "record versions are 1-255"
	}
	report := func(format string, a ...any) { l.errs.add(pos, "type %s: "+format, append([]any{d.Name}, a...)...) }
	for _, n := range numberList(report, "retired", v, lo, hi, rule) {
		if retiredNum(d.Retired, n) != nil {
			report("retired=%s lists %d twice", v, n)
			continue
		}
		d.Retired = append(d.Retired, &retired{Num: n, Pos: pos})
	}
}

// draftArg reports whether the directive of d, at pos, says draft; the
// argument takes no value.
func (l *loader) draftArg(d *decl, pos token.Position, args map[string]string) bool {
	v, ok := args["draft"]
	if ok && v != "" {
		l.errs.add(pos, "type %s: draft takes no value (draft=%s)", d.Name, v)
	}
	return ok
}
