package main

import (
	"fmt"
	"strconv"
	"strings"

	. "github.com/dave/jennifer/jen"
)

const (
	wirePkg  = "github.com/mkit-dev/mkitfdb/gen/wire"
	tuplePkg = "github.com/mkit-dev/mkitfdb/gen/tuple"
)

// goType is the Go type of a field or element.
func goType(t *typeRef) *Statement {
	switch t.Kind {
	case refPrim:
		return Id(t.Prim)
	case refBytes:
		return Index().Byte()
	case refArray:
		return Index(Lit(t.Len)).Byte()
	case refNamed:
		return Id(t.Decl.Name)
	case refSlice:
		return Index().Add(goType(t.Elem))
	case refPtr:
		return Op("*").Add(goType(t.Elem))
	}
	panic(fmt.Sprintf("codegen: unresolved type %+v", t))
}

// docLines writes text as // comment lines (jennifer would render a
// multi-line Comment as a block comment).
func docLines(f *File, text string) {
	for _, line := range strings.Split(text, "\n") {
		f.Comment(line)
	}
}

// docComment renders a declaration's doc, or a default.
func docComment(d *decl, fallback string) string {
	if d.Doc != "" {
		return d.Doc
	}
	return fallback
}

// emitTypes writes every declared type with its validation: identities,
// enums, structs (key classes and records too), unions.
func emitTypes(f *File, s *schema) {
	for _, d := range s.Decls {
		switch d.Kind {
		case kindIdentity:
			emitIdentity(f, d)
		case kindEnum:
			emitEnum(f, d)
		case kindStruct:
			emitStruct(f, d)
		case kindUnion:
			emitUnion(f, d)
		}
	}
}

func emitIdentity(f *File, d *decl) {
	docLines(f, docComment(d, d.Name+" is a validated name."))
	f.Type().Id(d.Name).String()
	f.Commentf("Bounds of a %s, in bytes.", d.Name)
	f.Const().Defs(
		Id("Min"+d.Name+"Bytes").Op("=").Lit(d.Min),
		Id("Max"+d.Name+"Bytes").Op("=").Lit(d.Max),
	)
	f.Commentf("New%s validates s as a %s: it fails with an error wrapping wire.ErrInvalid", d.Name, d.Name)
	f.Commentf("unless s has %d to %d bytes of valid UTF-8 without control characters.", d.Min, d.Max)
	f.Func().Id("New"+d.Name).Params(Id("s").String()).Params(Id(d.Name), Error()).Block(
		Id("v").Op(":=").Id(d.Name).Call(Id("s")),
		If(Err().Op(":=").Id("v").Dot("Validate").Call(), Err().Op("!=").Nil()).Block(Return(Lit(""), Err())),
		Return(Id("v"), Nil()),
	)
	f.Commentf("Validate fails with an error wrapping wire.ErrInvalid unless v is a valid %s.", d.Name)
	f.Func().Params(Id("v").Id(d.Name)).Id("Validate").Params().Error().Block(
		Return(Qual(wirePkg, "CheckIdentity").Call(Lit(d.Name), String().Call(Id("v")), Lit(d.Min), Lit(d.Max))),
	)
}

func emitEnum(f *File, d *decl) {
	docLines(f, docComment(d, d.Name+" is an enumeration."))
	f.Type().Id(d.Name).Uint8()
	f.Const().DefsFunc(func(g *Group) {
		for _, v := range d.Values {
			g.Id(v.Name).Id(d.Name).Op("=").Lit(int(v.Value))
		}
	})
	f.Commentf("Valid reports whether v is one of the declared %s values.", d.Name)
	f.Func().Params(Id("v").Id(d.Name)).Id("Valid").Params().Bool().Block(
		Switch(Id("v")).BlockFunc(func(g *Group) {
			g.CaseFunc(func(c *Group) {
				for _, v := range d.Values {
					c.Id(v.Name)
				}
			}).Block(Return(True()))
		}),
		Return(False()),
	)
	f.Func().Params(Id("v").Id(d.Name)).Id("String").Params().String().Block(
		Switch(Id("v")).BlockFunc(func(g *Group) {
			for _, v := range d.Values {
				g.Case(Id(v.Name)).Block(Return(Lit(v.Short)))
			}
		}),
		Return(Qual("fmt", "Sprintf").Call(Lit(d.Name+"(%d)"), Uint8().Call(Id("v")))),
	)
}

func emitStruct(f *File, d *decl) {
	docLines(f, docComment(d, d.Name+" is a schema struct."))
	f.Type().Id(d.Name).StructFunc(func(g *Group) {
		for _, fl := range d.Fields {
			g.Id(fl.Name).Add(goType(fl.Type))
		}
	})
	emitBounds(f, d)
	if d.Key {
		return // key classes validate in keys.go
	}
	for _, m := range checkModes {
		f.Commentf("%s%s %s", m.prefix, d.Name, m.doc)
		f.Func().Id(m.prefix + d.Name).Params(Id("v").Op("*").Id(d.Name)).Error().BlockFunc(func(g *Group) {
			for _, fl := range d.Fields {
				checkField(g, m, d, fl, "v."+fl.Name, fl.Type, fl.Name, 0)
			}
			g.Return(Nil())
		})
	}
}

// checkMode is one of the two checkers generated per type: check, for
// values about to be encoded, proves every rule; verify, for values just
// decoded, skips the length bounds the reader already enforced.
type checkMode struct {
	prefix string
	bounds bool
	doc    string
}

var (
	checkAll     = checkMode{"check", true, "checks every rule of the schema on v."}
	checkDecoded = checkMode{"verify", false, "checks the rules of the schema that decoding does not enforce on v."}
	checkModes   = []checkMode{checkAll, checkDecoded}
)

// emitBounds exports the declared bounds of d's fields as constants.
func emitBounds(f *File, d *decl) {
	var defs []Code
	for _, fl := range d.Fields {
		if fl.HasMax {
			defs = append(defs, Id("Max"+d.Name+fl.Name).Op("=").Lit(fl.Max))
		}
		if fl.HasElemMax {
			defs = append(defs, Id("Max"+d.Name+fl.Name+"Elem").Op("=").Lit(fl.ElemMax))
		}
	}
	if len(defs) > 0 {
		f.Commentf("Declared bounds of %s.", d.Name)
		f.Const().Defs(defs...)
	}
}

// num is an untyped integer literal.
func num(v uint64) *Statement { return Id(strconv.FormatUint(v, 10)) }

// loopVar names the index of a loop nested depth deep.
func loopVar(depth int) string { return string(rune('i' + depth)) }

// hasChecks reports whether values of t carry rules beyond their shape.
func hasChecks(t *typeRef, fl *field) bool {
	switch t.Kind {
	case refNamed:
		return t.Decl.Kind != kindStruct || len(t.Decl.Fields) > 0
	case refSlice:
		return true
	case refBytes:
		return fl != nil && fl.HasMax
	case refPrim:
		return t.Prim == "string" || fl != nil && (fl.HasMin || fl.Le != "")
	case refPtr:
		return t.Elem.Kind == refNamed
	}
	return false
}

// checkField appends the statements that check the value x of type t.
// fl carries the field's options when t is the field's own type (not an
// element); path is the field path in errors.
func checkField(g *Group, m checkMode, d *decl, fl *field, x string, t *typeRef, path string, depth int) {
	fail := func(cond *Statement, format string, args ...Code) {
		g.If(cond).Block(Return(Qual(wirePkg, "Rule").Call(append([]Code{Lit(path), Lit(format)}, args...)...)))
	}
	within := func(call *Statement) {
		g.If(Err().Op(":=").Add(call), Err().Op("!=").Nil()).Block(Return(Qual(wirePkg, "Within").Call(Lit(path), Err())))
	}
	switch t.Kind {
	case refPrim:
		if t.Prim == "string" && fl != nil && fl.HasMax && m.bounds {
			checkLen(g, x, fl.Max, path)
		}
		if fl != nil && fl.HasMin {
			fail(Id(x).Op("<").Add(num(fl.Min)), "%d under its minimum "+fmt.Sprint(fl.Min), Id(x))
		}
		if fl != nil && fl.Le != "" {
			other := strings.TrimSuffix(x, fl.Name) + fl.Le
			fail(Id(x).Op(">").Id(other), "%d over "+fl.Le+" %d", Id(x), Id(other))
		}
	case refBytes:
		if fl != nil && fl.HasMax && m.bounds {
			checkLen(g, x, fl.Max, path)
		}
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			within(Id(x).Dot("Validate").Call())
		case kindEnum:
			fail(Op("!").Id(x).Dot("Valid").Call(), "unknown "+t.Decl.Name+" %d", Uint8().Call(Id(x)))
		case kindStruct:
			if len(t.Decl.Fields) > 0 {
				within(Id(m.prefix + t.Decl.Name).Call(Op("&").Id(x)))
			}
		case kindUnion:
			within(Id(m.prefix + t.Decl.Name).Call(Id(x)))
		}
	case refPtr:
		if t.Elem.Kind == refNamed {
			g.If(Id(x).Op("!=").Nil()).BlockFunc(func(g *Group) {
				checkField(g, m, d, nil, "(*"+x+")", t.Elem, path, depth)
			})
		}
	case refSlice:
		max := 0
		if fl != nil {
			max = fl.Max
		}
		if m.bounds {
			checkLen(g, x, max, path)
		}
		elemMax := fl != nil && fl.HasElemMax && m.bounds
		if elemChecks(t.Elem, m) || elemMax {
			i := loopVar(depth)
			g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
				if elemMax {
					checkLen(g, x+"["+i+"]", fl.ElemMax, path)
				}
				checkField(g, m, d, nil, x+"["+i+"]", t.Elem, path, depth+1)
			})
		}
		if fl != nil && fl.Sorted {
			i := loopVar(depth)
			g.For(Id(i).Op(":=").Lit(1), Id(i).Op("<").Len(Id(x)), Id(i).Op("++")).Block(
				If(compareExpr(t.Elem, x+"["+i+"-1]", x+"["+i+"]").Op(">=").Lit(0)).Block(
					Return(Qual(wirePkg, "Rule").Call(Lit(path), Lit("not strictly ascending at element %d"), Id(i))),
				),
			)
		}
	}
}

// checkLen appends the bound check of len(x): a comparison inline, the
// error built only when it fails.
func checkLen(g *Group, x string, max int, path string) {
	g.If(Len(Id(x)).Op(">").Lit(max)).Block(
		Return(Qual(wirePkg, "Within").Call(Lit(path), Qual(wirePkg, "CheckLen").Call(Lit(""), Len(Id(x)), Lit(max)))),
	)
}

// elemChecks reports whether checking an element of type t in mode m
// does anything.
func elemChecks(t *typeRef, m checkMode) bool {
	switch t.Kind {
	case refBytes, refArray:
		return false
	case refPrim:
		return t.Prim == "string" && m.bounds
	}
	return hasChecks(t, nil)
}

// compareExpr orders two values of a comparable type.
func compareExpr(t *typeRef, a, b string) *Statement {
	if t.Kind == refNamed && t.Decl.Kind == kindUnion {
		return Id("Compare"+t.Decl.Name).Call(Id(a), Id(b))
	}
	return Qual("cmp", "Compare").Call(Id(a), Id(b))
}

func emitUnion(f *File, d *decl) {
	methods := []Code{Id("is" + d.Name).Params()}
	if d.Partition {
		methods = append(methods,
			Comment("Kind names the partition's kind for metrics and logs."),
			Id("Kind").Params().String(),
			Comment("AppendTuple appends the tuple encoding of the partition's identity; it"),
			Comment("fails with an error wrapping wire.ErrInvalid when the identity is invalid."),
			Id("AppendTuple").Params(Id("dst").Index().Byte()).Params(Index().Byte(), Error()),
			Comment("Validate fails with an error wrapping wire.ErrInvalid when the identity is invalid."),
			Id("Validate").Params().Error(),
			Id("String").Params().String(),
		)
	}
	docLines(f, docComment(d, d.Name+" is one of several variants."))
	f.Comment("")
	names := make([]string, len(d.Variants))
	for i, v := range d.Variants {
		names[i] = v.Type.Name
	}
	f.Commentf("Its variants are %s. A nil %s is invalid.", strings.Join(names, ", "), d.Name)
	f.Type().Id(d.Name).Interface(methods...)

	for _, v := range d.Variants {
		f.Func().Params(Id(v.Type.Name)).Id("is" + d.Name).Params().Block()
		if d.Partition {
			f.Commentf("Kind returns %q.", v.KindName)
			f.Func().Params(Id(v.Type.Name)).Id("Kind").Params().String().Block(Return(Lit(v.KindName)))
			f.Commentf("Validate checks every rule of the schema on v.")
			f.Func().Params(Id("v").Id(v.Type.Name)).Id("Validate").Params().Error().Block(
				Return(Id("check" + v.Type.Name).Call(Op("&").Id("v"))),
			)
			f.Commentf("String formats the partition as kind(fields).")
			f.Func().Params(Id("v").Id(v.Type.Name)).Id("String").Params().String().BlockFunc(func(g *Group) {
				format := make([]string, len(v.Type.Fields))
				args := []Code{}
				for i, fl := range v.Type.Fields {
					format[i] = "%v"
					args = append(args, Id("v").Dot(fl.Name))
				}
				g.Return(Qual("fmt", "Sprintf").Call(append([]Code{Lit(v.KindName + "(" + strings.Join(format, ",") + ")")}, args...)...))
			})
		}
	}
	for _, m := range checkModes {
		if d.Record && m == checkDecoded {
			continue // a union record's decoder verifies its variant itself
		}
		f.Commentf("%s%s checks that v is a valid variant of %s.", m.prefix, d.Name, d.Name)
		f.Func().Id(m.prefix+d.Name).Params(Id("v").Id(d.Name)).Error().Block(
			Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
				for _, v := range d.Variants {
					g.Case(Id(v.Type.Name)).BlockFunc(func(g *Group) {
						if len(v.Type.Fields) == 0 {
							g.Return(Nil())
							return
						}
						g.Return(Id(m.prefix + v.Type.Name).Call(Op("&").Id("x")))
					})
				}
				g.Case(Nil()).Block(Return(Qual(wirePkg, "Rule").Call(Lit(""), Lit("no "+d.Name+" variant set"))))
			}),
			Return(Qual(wirePkg, "Rule").Call(Lit(""), Lit("unsupported "+d.Name+" variant %T"), Id("v"))),
		)
	}
	f.Commentf("tag%s returns the variant tag of v, 0 for an unsupported value.", d.Name)
	f.Func().Id("tag"+d.Name).Params(Id("v").Id(d.Name)).Uint8().Block(
		Switch(Id("v").Assert(Type())).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(Id(v.Type.Name)).Block(Return(Lit(int(v.Tag))))
			}
		}),
		Return(Lit(0)),
	)
	if d.Record || !unionComparable(d) {
		return
	}
	f.Commentf("Compare%s orders two %s values as their tuple encodings order:", d.Name, d.Name)
	f.Comment("by variant tag, then field by field. It returns -1, 0 or +1.")
	f.Func().Id("Compare"+d.Name).Params(Id("a"), Id("b").Id(d.Name)).Int().Block(
		If(Id("c").Op(":=").Qual("cmp", "Compare").Call(Id("tag"+d.Name).Call(Id("a")), Id("tag"+d.Name).Call(Id("b"))), Id("c").Op("!=").Lit(0)).Block(Return(Id("c"))),
		Switch(Id("x").Op(":=").Id("a").Assert(Type())).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(Id(v.Type.Name)).BlockFunc(func(g *Group) {
					if len(v.Type.Fields) == 0 {
						return
					}
					g.List(Id("y"), Id("_")).Op(":=").Id("b").Assert(Id(v.Type.Name))
					for _, fl := range v.Type.Fields {
						a, b := "x."+fl.Name, "y."+fl.Name
						if fl.Type.Kind == refPrim && fl.Type.Prim == "bool" {
							g.If(Id(a).Op("!=").Id(b)).Block(
								If(Id(b)).Block(Return(Lit(-1))),
								Return(Lit(1)),
							)
							continue
						}
						g.If(Id("c").Op(":=").Qual("cmp", "Compare").Call(Id(a), Id(b)), Id("c").Op("!=").Lit(0)).Block(Return(Id("c")))
					}
				})
			}
		}),
		Return(Lit(0)),
	)
}

// unionComparable reports whether every variant field can be ordered.
func unionComparable(d *decl) bool {
	for _, v := range d.Variants {
		for _, fl := range v.Type.Fields {
			t := fl.Type
			ok := t.Kind == refPrim || t.Kind == refNamed && (t.Decl.Kind == kindIdentity || t.Decl.Kind == kindEnum)
			if !ok {
				return false
			}
		}
	}
	return true
}
