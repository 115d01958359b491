package main

import (
	"fmt"
	"strconv"
	"strings"

	. "github.com/dave/jennifer/jen"
)

const (
	wirePkg  = "github.com/mkit-dev/mkitfdb/codec/wire"
	tuplePkg = "github.com/mkit-dev/mkitfdb/codec/tuple"
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

// docComment renders a declaration's doc, or a default, and says so of a
// draft.
func docComment(d *decl, fallback string) string {
	doc := fallback
	if d.Doc != "" {
		doc = d.Doc
	}
	if d.Draft {
		doc += "\n\nDraft: the schema marks " + d.Name + " draft, so the layout lock does not hold\n" +
			"it: its layout may still change, and rows written with it may then fail to\n" +
			"decode. Release it (remove draft) before anything stores it."
	}
	return doc
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

// emitIdentity writes an identity as an opaque struct: values come only
// from New, Must, UnmarshalText and decoding, which all validate, so every
// non-zero value is valid and encoders need only reject the zero value
// instead of re-validating the string on every call.
func emitIdentity(f *File, d *decl) {
	docLines(f, docComment(d, d.Name+" is a validated name."))
	f.Comment("")
	f.Commentf("%s holds %d to %d bytes of valid UTF-8 without control characters.", article(d.Name, true), d.Min, d.Max)
	f.Commentf("Build one with New%s or Must%s: every %s other than the zero value", d.Name, d.Name, d.Name)
	if d.Min > 0 {
		f.Comment("is valid; the zero value is empty, which encoders reject. Values compare")
	} else {
		f.Comment("is valid, and so is the zero value (empty). Values compare")
	}
	f.Comment("with == and can key maps.")
	f.Type().Id(d.Name).Struct(Id("s").String())
	f.Commentf("Bounds of %s, in bytes.", article(d.Name, false))
	f.Const().Defs(
		Id("Min"+d.Name+"Bytes").Op("=").Lit(d.Min),
		Id("Max"+d.Name+"Bytes").Op("=").Lit(d.Max),
	)
	f.Commentf("New%s validates s as %s: it fails with an error wrapping wire.ErrInvalid", d.Name, article(d.Name, false))
	f.Commentf("unless s has %d to %d bytes of valid UTF-8 without control characters.", d.Min, d.Max)
	f.Func().Id("New"+d.Name).Params(Id("s").String()).Params(Id(d.Name), Error()).Block(
		If(Err().Op(":=").Qual(wirePkg, "CheckIdentity").Call(Lit(d.Name), Id("s"), Lit(d.Min), Lit(d.Max)), Err().Op("!=").Nil()).Block(
			Return(Id(d.Name).Values(), Err()),
		),
		Return(Id(d.Name).Values(Id("s")), Nil()),
	)
	f.Commentf("Must%s is New%s for names known to be valid, such as constants:", d.Name, d.Name)
	f.Comment("it panics when s is invalid.")
	f.Func().Id("Must"+d.Name).Params(Id("s").String()).Id(d.Name).Block(
		List(Id("v"), Err()).Op(":=").Id("New"+d.Name).Call(Id("s")),
		If(Err().Op("!=").Nil()).Block(Panic(Err())),
		Return(Id("v")),
	)
	f.Comment("String returns the name.")
	f.Func().Params(Id("v").Id(d.Name)).Id("String").Params().String().Block(Return(Id("v").Dot("s")))
	f.Comment("IsZero reports whether v is the zero value (the empty name).")
	f.Func().Params(Id("v").Id(d.Name)).Id("IsZero").Params().Bool().Block(Return(Id("v").Dot("s").Op("==").Lit("")))
	if d.Min > 0 {
		f.Commentf("Validate fails with an error wrapping wire.ErrInvalid when v is the zero")
		f.Commentf("value; every other %s is valid by construction.", d.Name)
		f.Func().Params(Id("v").Id(d.Name)).Id("Validate").Params().Error().Block(
			If(Id("v").Dot("s").Op("==").Lit("")).Block(Return(Qual(wirePkg, "Rule").Call(Lit(""), Lit(d.Name+" is empty")))),
			Return(Nil()),
		)
	} else {
		f.Commentf("Validate returns nil: every %s, the zero value too, is valid.", d.Name)
		f.Func().Params(Id("v").Id(d.Name)).Id("Validate").Params().Error().Block(Return(Nil()))
	}
	f.Comment("MarshalText returns the name, so a value prints as itself in JSON and logs.")
	f.Func().Params(Id("v").Id(d.Name)).Id("MarshalText").Params().Params(Index().Byte(), Error()).Block(
		Return(Index().Byte().Call(Id("v").Dot("s")), Nil()),
	)
	f.Commentf("UnmarshalText sets *v to the name in b, validated as New%s does.", d.Name)
	f.Func().Params(Id("v").Op("*").Id(d.Name)).Id("UnmarshalText").Params(Id("b").Index().Byte()).Error().Block(
		List(Id("x"), Err()).Op(":=").Id("New"+d.Name).Call(String().Call(Id("b"))),
		If(Err().Op("!=").Nil()).Block(Return(Err())),
		Op("*").Id("v").Op("=").Id("x"),
		Return(Nil()),
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
		f.Func().Id(m.prefix + d.Name).Params(Id("v").Op("*").Id(d.Name)).Add(m.result()).BlockFunc(func(g *Group) {
			for _, fl := range d.Fields {
				checkField(g, m, d, fl, "v."+fl.Name, fl.Type, fl.Name, 0)
			}
			g.Return(m.pass())
		})
	}
}

// checkMode is one of the three checkers generated per type: check, for
// values about to be encoded, proves every rule and says which one fails;
// valid is check as a plain predicate, the encoders' fast path (it builds
// no errors, so it inlines and costs a few comparisons), with check run
// only to explain a failure; verify, for values just decoded, skips what
// the reader already enforced: length bounds, identity names and unions of
// scalars and names (see verifiedOnRead).
type checkMode struct {
	prefix string
	bounds bool
	pred   bool
	doc    string
}

var (
	checkAll     = checkMode{"check", true, false, "checks every rule of the schema on v."}
	checkValid   = checkMode{"valid", true, true, "reports whether v keeps every rule of the schema, as check does without the error."}
	checkDecoded = checkMode{"verify", false, false, "checks the rules of the schema that decoding does not enforce on v."}
	checkModes   = []checkMode{checkAll, checkValid, checkDecoded}
)

// result is the result type of m's functions.
func (m checkMode) result() *Statement {
	if m.pred {
		return Bool()
	}
	return Error()
}

// pass is what m's functions return when every rule holds.
func (m checkMode) pass() *Statement {
	if m.pred {
		return True()
	}
	return Nil()
}

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
		if m.pred {
			g.If(cond).Block(Return(False()))
			return
		}
		g.If(cond).Block(Return(Qual(wirePkg, "Rule").Call(append([]Code{Lit(path), Lit(format)}, args...)...)))
	}
	within := func(call *Statement) {
		if m.pred {
			g.If(Op("!").Add(call)).Block(Return(False()))
			return
		}
		g.If(Err().Op(":=").Add(call), Err().Op("!=").Nil()).Block(Return(Qual(wirePkg, "Within").Call(Lit(path), Err())))
	}
	switch t.Kind {
	case refPrim:
		if t.Prim == "string" && fl != nil && fl.HasMax && m.bounds {
			checkLen(g, m, x, fl.Max, path)
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
			checkLen(g, m, x, fl.Max, path)
		}
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			// decoders validate names as they read them (wire.Reader.Name)
			if m == checkDecoded {
				break
			} else if t.Decl.Min > 0 && m.pred {
				fail(Id(x).Dot("s").Op("==").Lit(""), "")
			} else if t.Decl.Min > 0 {
				within(Id(x).Dot("Validate").Call())
			}
		case kindEnum:
			fail(Op("!").Id(x).Dot("Valid").Call(), "unknown "+t.Decl.Name+" %d", Uint8().Call(Id(x)))
		case kindStruct:
			if structChecks(t.Decl, m) {
				within(Id(m.prefix + t.Decl.Name).Call(Op("&").Id(x)))
			}
		case kindUnion:
			if !verifiedOnRead(t, m) {
				within(Id(m.prefix + t.Decl.Name).Call(Id(x)))
			}
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
			checkLen(g, m, x, max, path)
		}
		if elemChecks(t.Elem, m) {
			i := loopVar(depth)
			g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
				var elem *field
				if fl != nil {
					elem = fl.elem()
				}
				checkField(g, m, d, elem, x+"["+i+"]", t.Elem, path, depth+1)
			})
		}
		if fl != nil && fl.Sorted {
			i := loopVar(depth)
			g.For(Id(i).Op(":=").Lit(1), Id(i).Op("<").Len(Id(x)), Id(i).Op("++")).Block(
				If(compareExpr(t.Elem, x+"["+i+"-1]", x+"["+i+"]").Op(">=").Lit(0)).BlockFunc(func(g *Group) {
					if m.pred {
						g.Return(False())
						return
					}
					g.Return(Qual(wirePkg, "Rule").Call(Lit(path), Lit("not strictly ascending at element %d"), Id(i)))
				}),
			)
		}
	}
}

// checkLen appends the bound check of len(x): a comparison inline, the
// error built only when it fails.
func checkLen(g *Group, m checkMode, x string, max int, path string) {
	if m.pred {
		g.If(Len(Id(x)).Op(">").Lit(max)).Block(Return(False()))
		return
	}
	g.If(Len(Id(x)).Op(">").Lit(max)).Block(
		Return(Qual(wirePkg, "Within").Call(Lit(path), Qual(wirePkg, "CheckLen").Call(Lit(""), Len(Id(x)), Lit(max)))),
	)
}

// elemChecks reports whether checking an element of type t in mode m
// does anything.
func elemChecks(t *typeRef, m checkMode) bool {
	switch t.Kind {
	case refArray:
		return false
	case refBytes:
		return m.bounds // elem_max
	case refPrim:
		return t.Prim == "string" && m.bounds // elem_max
	case refNamed:
		switch {
		case t.Decl.Kind == kindStruct:
			return structChecks(t.Decl, m)
		case t.Decl.Kind == kindIdentity:
			// encoders reject only an empty name, and only when the
			// identity's minimum excludes it; decoders validate names as
			// they read them
			return m != checkDecoded && t.Decl.Min > 0
		case verifiedOnRead(t, m):
			return false
		}
	}
	return hasChecks(t, nil)
}

// structChecks reports whether checking a value of struct d in mode m
// does anything: a verifier of plain bytes and bounded strings has
// nothing left to check after the reader.
func structChecks(d *decl, m checkMode) bool {
	for _, fl := range d.Fields {
		t := fl.Type
		switch {
		case t.Kind == refBytes || t.Kind == refArray:
			if fl.HasMax && m.bounds {
				return true
			}
		case t.Kind == refPrim:
			if t.Prim == "string" && fl.HasMax && m.bounds || fl.HasMin || fl.Le != "" {
				return true
			}
		case t.Kind == refSlice:
			if m.bounds || fl.Sorted || elemChecks(t.Elem, m) {
				return true
			}
		case t.Kind == refNamed && t.Decl.Kind == kindStruct:
			if structChecks(t.Decl, m) {
				return true
			}
		case t.Kind == refNamed:
			if !verifiedOnRead(t, m) {
				return true
			}
		case t.Kind == refPtr:
			if t.Elem.Kind == refNamed {
				return true
			}
		}
	}
	return false
}

// verifiedOnRead reports whether decoders verify values of t as they read
// them, so that the record's verifier skips them: an identity is validated
// as it is read (wire.Reader.Name); a union of scalars and names is
// verified right after it is decoded, and not at all when the value held
// is kept (see emitUnionMatch) or was decoded before (emitUnionIntern).
func verifiedOnRead(t *typeRef, m checkMode) bool {
	if m != checkDecoded || t.Kind != refNamed {
		return false
	}
	return t.Decl.Kind == kindIdentity || t.Decl.Kind == kindUnion && !t.Decl.Record && unionComparable(t.Decl)
}

// compareExpr orders two values of a comparable type.
func compareExpr(t *typeRef, a, b string) *Statement {
	if t.Kind == refNamed && t.Decl.Kind == kindUnion {
		return Id("Compare"+t.Decl.Name).Call(Id(a), Id(b))
	}
	if t.Kind == refNamed && t.Decl.Kind == kindIdentity {
		return Qual("cmp", "Compare").Call(Id(a).Dot("s"), Id(b).Dot("s"))
	}
	if t.Kind == refBytes {
		return Qual("bytes", "Compare").Call(Id(a), Id(b))
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
	if d.Record {
		// A record's variants are pointers, so that DecodeInto can reuse
		// the variant (and its slices) a value already holds.
		for i := range names {
			names[i] = "*" + names[i]
		}
		f.Commentf("Its variants are %s. A nil %s, or a nil pointer of a", strings.Join(names, ", "), d.Name)
		f.Comment("variant's type, is invalid.")
	} else {
		f.Commentf("Its variants are %s. A nil %s is invalid.", strings.Join(names, ", "), d.Name)
	}
	f.Type().Id(d.Name).Interface(methods...)

	for _, v := range d.Variants {
		f.Func().Params(variantType(d, v)).Id("is" + d.Name).Params().Block()
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
		if m.pred {
			f.Commentf("%s%s reports whether v is a valid variant of %s.", m.prefix, d.Name, d.Name)
		} else {
			f.Commentf("%s%s checks that v is a valid variant of %s.", m.prefix, d.Name, d.Name)
		}
		failWith := func(format string, args ...Code) *Statement {
			if m.pred {
				return False()
			}
			return Qual(wirePkg, "Rule").Call(append([]Code{Lit(""), Lit(format)}, args...)...)
		}
		f.Func().Id(m.prefix+d.Name).Params(Id("v").Id(d.Name)).Add(m.result()).Block(
			Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
				for _, v := range d.Variants {
					g.Case(variantType(d, v)).BlockFunc(func(g *Group) {
						if d.Record {
							g.If(Id("x").Op("==").Nil()).Block(Return(failWith("nil *" + v.Type.Name)))
						}
						if len(v.Type.Fields) == 0 {
							g.Return(m.pass())
							return
						}
						g.Return(Id(m.prefix + v.Type.Name).Call(variantArg(d, "x")))
					})
				}
				g.Case(Nil()).Block(Return(failWith("no " + d.Name + " variant set")))
			}),
			Return(failWith("unsupported "+d.Name+" variant %T", Id("v"))),
		)
	}
	f.Commentf("tag%s returns the variant tag of v, 0 for an unsupported value.", d.Name)
	f.Func().Id("tag"+d.Name).Params(Id("v").Id(d.Name)).Uint8().Block(
		Switch(Id("v").Assert(Type())).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(variantType(d, v)).Block(Return(Lit(int(v.Tag))))
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
						if fl.Type.Kind == refNamed && fl.Type.Decl.Kind == kindIdentity {
							a, b = a+".s", b+".s"
						}
						g.If(Id("c").Op(":=").Qual("cmp", "Compare").Call(Id(a), Id(b)), Id("c").Op("!=").Lit(0)).Block(Return(Id("c")))
					}
				})
			}
		}),
		Return(Lit(0)),
	)
}

// variantType is the Go type of variant v of union d: a record's variants
// are pointers to their structs, a partition's are the structs.
func variantType(d *decl, v *variant) *Statement {
	if d.Record {
		return Op("*").Id(v.Type.Name)
	}
	return Id(v.Type.Name)
}

// variantArg passes x, a variant of union d in a type switch, to the
// variant's internal codec functions, which take a pointer.
func variantArg(d *decl, x string) *Statement {
	if d.Record {
		return Id(x)
	}
	return Op("&").Id(x)
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

// article puts "a" or "an" before name, by its first letter ("an
// OutcomeID", "a RepoName"); capital makes it "A" or "An".
func article(name string, capital bool) string {
	a := "a"
	if name != "" && strings.ContainsRune("AEIOUaeiou", rune(name[0])) {
		a = "an"
	}
	if capital {
		a = strings.ToUpper(a[:1]) + a[1:]
	}
	return a + " " + name
}
