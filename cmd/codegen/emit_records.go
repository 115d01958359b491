package main

import (
	"slices"
	"strconv"

	. "github.com/dave/jennifer/jen"
)

// emitRecords writes the record layout codecs: for every struct and union
// an unchecked appender, a size function and a structural reader; for every
// record the public Append, Encode and Decode, which check the schema's
// rules on the way out and on the way in.
//
// Layout: a record is its version byte, then its fields in order. Fixed-size
// integers are big-endian; bool, enum and union tags are one byte; strings,
// []byte and slices carry a canonical uvarint length or count; an optional
// value carries a presence byte (0 or 1); a union is its variant tag, then
// the variant's fields.
func emitRecords(f *File, s *schema) {
	for _, d := range s.Decls {
		if d.Kind == kindIdentity {
			f.Commentf("intern%s holds %s names already decoded and validated.", d.Name, d.Name)
			f.Var().Id("intern"+d.Name).Qual(wirePkg, "Intern").Index(Struct())
		}
	}
	fast := fastStructs(s)
	for _, d := range s.Decls {
		if d.Key || d.Kind == kindIdentity || d.Kind == kindEnum {
			continue
		}
		if d.Kind == kindUnion {
			emitUnionCodec(f, d)
		} else {
			emitStructCodec(f, d)
		}
		if fast[d] {
			emitFastRead(f, d)
		}
		if d.Record {
			emitRecordAPI(f, d)
			emitFastDecode(f, d)
		}
	}
}

// emitUnionMatch writes matchX for a union whose variants hold only
// scalars and names: when v is valid and the bytes at r encode it, it
// consumes them and reports true, so a decoder keeps v instead of
// decoding (and allocating) and verifying it again; otherwise it consumes
// nothing.
func emitUnionMatch(f *File, d *decl) {
	f.Func().Id("match"+d.Name).Params(Id("r").Op("*").Qual(wirePkg, "Reader"), Id("v").Id(d.Name)).Bool().Block(
		Id("m").Op(":=").Op("*").Id("r"),
		Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
			for _, vr := range d.Variants {
				// Only a valid value may be kept unverified: every name
				// but the zero one is valid by construction.
				conds := []Code{Id("valid" + vr.Type.Name).Call(Op("&").Id("x")), Id("m").Dot("MatchU8").Call(Lit(int(vr.Tag)))}
				for _, fl := range vr.Type.Fields {
					conds = append(conds, matchField(Id("x").Dot(fl.Name), fl.Type))
				}
				var cond *Statement
				for i, c := range conds {
					if i == 0 {
						cond = Op("!").Add(c)
					} else {
						cond = cond.Op("||").Op("!").Add(c)
					}
				}
				g.Case(Id(vr.Type.Name)).Block(If(cond).Block(Return(False())))
			}
			g.Default().Block(Return(False()))
		}),
		Op("*").Id("r").Op("=").Id("m"),
		Return(True()),
	)
}

// emitUnionIntern writes, for a union whose variants hold only scalars
// and names, spanX (the length of the encoding that opens b, measured
// without decoding it; 0 when b ends first) and readXInterned, which decodes
// and verifies an encoding once and then returns the value it gave from
// the table internX: every value of such a union is fully determined by
// its bytes.
func emitUnionIntern(f *File, d *decl) {
	f.Func().Id("span"+d.Name).Params(Id("b").Index().Byte()).Int().Block(
		If(Len(Id("b")).Op("==").Lit(0)).Block(Return(Lit(0))),
		Id("at").Op(":=").Lit(1),
		Switch(Id("b").Index(Lit(0))).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(Lit(int(v.Tag))).BlockFunc(func(g *Group) {
					for _, fl := range v.Type.Fields {
						if n, ok := fixedSize(fl.Type); ok {
							g.Id("at").Op("=").Qual(wirePkg, "SpanFixed").Call(Id("b"), Id("at"), Lit(n))
						} else {
							g.Id("at").Op("=").Qual(wirePkg, "SpanString").Call(Id("b"), Id("at"))
						}
					}
				})
			}
			g.Default().Block(Return(Lit(0)))
		}),
		Return(Max(Id("at"), Lit(0))),
	)
	f.Commentf("intern%s holds %s values already decoded and verified.", d.Name, d.Name)
	f.Var().Id("intern"+d.Name).Qual(wirePkg, "Intern").Index(Id(d.Name))
	f.Func().Id("read"+d.Name+"Interned").Params(Id("r").Op("*").Qual(wirePkg, "Reader"), Id("field").String()).Id(d.Name).Block(
		Var().Id("h").Uint64(),
		Id("rest").Op(":=").Id("r").Dot("Rest").Call(),
		Id("n").Op(":=").Id("span"+d.Name).Call(Id("rest")),
		If(Id("n").Op(">").Lit(0)).Block(
			Var().Id("e").Op("*").Qual(wirePkg, "Interned").Index(Id(d.Name)),
			If(List(Id("e"), Id("h")).Op("=").Id("intern"+d.Name).Dot("Find").Call(Id("rest").Index(Empty(), Id("n"))), Id("e").Op("!=").Nil()).Block(
				Id("r").Dot("Skip").Call(Id("field"), Id("n")),
				Return(Id("e").Dot("Value")),
			),
		),
		Id("start").Op(":=").Id("r").Dot("Offset").Call(),
		Id("v").Op(":=").Id("read"+d.Name).Call(Id("r"), Id("field")),
		If(Id("r").Dot("Err").Call().Op("!=").Nil()).Block(Return(Nil())),
		If(Err().Op(":=").Id("verify"+d.Name).Call(Id("v")), Err().Op("!=").Nil()).Block(
			Id("r").Dot("FailErr").Call(Id("field"), Err()),
			Return(Nil()),
		),
		If(Id("n").Op(">").Lit(0).Op("&&").Id("intern"+d.Name).Dot("Admit").Call(Id("h"))).Block(
			Id("intern"+d.Name).Dot("Add").Call(Id("h"), String().Call(Id("r").Dot("Since").Call(Id("start"))), Id("v")),
		),
		Return(Id("v")),
	)
}

// matchField is the call that matches the encoding of x, of type t: a
// scalar, an enum or a name (see unionComparable).
func matchField(x *Statement, t *typeRef) *Statement {
	m := Id("m")
	switch {
	case t.Kind == refNamed && t.Decl.Kind == kindIdentity:
		return m.Dot("MatchString").Call(x.Dot("s"))
	case t.Kind == refNamed: // an enum
		return m.Dot("MatchU8").Call(Uint8().Call(x))
	}
	switch t.Prim {
	case "uint8":
		return m.Dot("MatchU8").Call(x)
	case "uint16":
		return m.Dot("MatchU16").Call(x)
	case "uint32":
		return m.Dot("MatchU32").Call(x)
	case "int64":
		return m.Dot("MatchU64").Call(Uint64().Call(x))
	case "bool":
		return m.Dot("MatchBool").Call(x)
	case "string":
		return m.Dot("MatchString").Call(x)
	}
	return m.Dot("MatchU64").Call(x)
}

// valueParam is how d's values pass to its internal codec functions:
// structs by pointer, unions as the interface.
func valueParam(d *decl) *Statement {
	if d.Kind == kindUnion {
		return Id("v").Id(d.Name)
	}
	return Id("v").Op("*").Id(d.Name)
}

func emitStructCodec(f *File, d *decl) {
	f.Func().Id("append"+d.Name).Params(Id("dst").Index().Byte(), valueParam(d)).Index().Byte().BlockFunc(func(g *Group) {
		for _, fl := range d.Fields {
			encodeValue(g, "v."+fl.Name, fl.Type, fl, 0)
		}
		g.Return(Id("dst"))
	})
	f.Func().Id("size" + d.Name).Params(valueParam(d)).Int().BlockFunc(func(g *Group) {
		g.Id("n").Op(":=").Lit(0)
		for _, fl := range d.Fields {
			sizeValue(g, "v."+fl.Name, fl.Type, fl, 0)
		}
		g.Return(Id("n"))
	})
	runs := fieldRuns(d, isString)
	for k, run := range runs {
		var names, maxes []Code
		for _, fl := range run {
			names = append(names, Lit(d.Name+"."+fl.Name))
			maxes = append(maxes, stringMax(fl))
		}
		f.Var().Defs(
			Id(runVar("Fields", d, k)).Op("=").Index().String().Values(names...),
			Id(runVar("Maxes", d, k)).Op("=").Index().Int().Values(maxes...),
		)
	}
	f.Func().Id("read"+d.Name).Params(Id("r").Op("*").Qual(wirePkg, "Reader"), valueParam(d)).BlockFunc(func(g *Group) {
		for _, u := range readUnits(d) {
			emitReaderUnit(g, d, u)
		}
	})
}

// readUnit is what a struct's reader reads in one step: a run of fixedInt
// fields (fixed), a run of strings (strings, the k-th of the struct), or
// one other field.
type readUnit struct {
	fields  []*field
	fixed   bool
	strings bool
	k       int
}

// readUnits splits d's fields into the units its readers read.
func readUnits(d *decl) []readUnit {
	fixed, runs := fieldRuns(d, fixedInt), fieldRuns(d, isString)
	var units []readUnit
	for i := 0; i < len(d.Fields); {
		fl := d.Fields[i]
		u := readUnit{fields: []*field{fl}}
		if k := slices.IndexFunc(fixed, func(run []*field) bool { return run[0] == fl }); k >= 0 {
			u = readUnit{fields: fixed[k], fixed: true}
		} else if k := slices.IndexFunc(runs, func(run []*field) bool { return run[0] == fl }); k >= 0 {
			u = readUnit{fields: runs[k], strings: true, k: k}
		}
		units = append(units, u)
		i += len(u.fields)
	}
	return units
}

// emitReaderUnit appends the statements that read u, of struct d, with the
// wire.Reader r.
func emitReaderUnit(g *Group, d *decl, u readUnit) {
	switch {
	case u.fixed:
		readFixedRun(g, d, u.fields)
	case u.strings:
		// a run of names: one allocation for all of them
		s := "s" + strconv.Itoa(u.k)
		g.Var().Id(s).Index(Lit(len(u.fields))).String()
		g.Id("r").Dot("Strings").Call(Id(s+"[:]"), Id(runVar("Fields", d, u.k)), Id(runVar("Maxes", d, u.k)))
		for j, fl := range u.fields {
			if fl.Type.Kind != refNamed {
				g.Id("v." + fl.Name).Op("=").Id(s).Index(Lit(j))
				continue
			}
			// names are validated as they are read
			id := fl.Type.Decl
			g.Id("v." + fl.Name).Op("=").Id(id.Name).Values(Id(s).Index(Lit(j)))
			g.If(Err().Op(":=").Qual(wirePkg, "CheckIdentity").Call(Lit(id.Name), Id(s).Index(Lit(j)), Lit(id.Min), Lit(id.Max)), Err().Op("!=").Nil()).Block(
				Id("r").Dot("FailErr").Call(Lit(d.Name+"."+fl.Name), Err()),
			)
		}
	default:
		fl := u.fields[0]
		decodeValue(g, "v."+fl.Name, fl.Type, fl, d.Name+"."+fl.Name, 0)
	}
}

// fixedInt reports whether fl is an integer or an enum: a fixed-size field
// read without validation (an enum's value is checked by the verifier).
func fixedInt(fl *field) bool {
	t := fl.Type
	return t.Kind == refPrim && t.Prim != "bool" && t.Prim != "string" || t.Kind == refNamed && t.Decl.Kind == kindEnum
}

// fieldRuns lists the runs of two or more consecutive fields of d that
// in reports true for: fixedInt runs decode with one length check
// (wire.Reader.Next), isString runs with one allocation
// (wire.Reader.Strings).
func fieldRuns(d *decl, in func(*field) bool) [][]*field {
	var runs [][]*field
	for i := 0; i < len(d.Fields); {
		j := i
		for j < len(d.Fields) && in(d.Fields[j]) {
			j++
		}
		if j-i >= 2 {
			runs = append(runs, d.Fields[i:j])
		}
		i = max(j, i+1)
	}
	return runs
}

// readFixedRun appends the statements that read run, consecutive fixedInt
// fields of d, from one slice of their total size.
func readFixedRun(g *Group, d *decl, run []*field) {
	size := 0
	for _, fl := range run {
		n, _ := fixedSize(fl.Type)
		size += n
	}
	path := d.Name + "." + run[0].Name + ".." + run[len(run)-1].Name
	g.If(Id("b").Op(":=").Id("r").Dot("Next").Call(Lit(path), Lit(size)), Len(Id("b")).Op("==").Lit(size)).BlockFunc(func(g *Group) {
		at := 0
		for _, fl := range run {
			g.Id("v." + fl.Name).Op("=").Add(fixedRead(fl.Type, Id("b"), Lit(at)))
			n, _ := fixedSize(fl.Type)
			at += n
		}
	})
}

// fixedRead is the expression that decodes a fixedInt value of type t
// from buf at offset at.
func fixedRead(t *typeRef, buf *Statement, at *Statement) *Statement {
	be := func(bits string) *Statement {
		return Qual("encoding/binary", "BigEndian").Dot("Uint" + bits).Call(buf.Clone().Index(at.Clone().Op(":")))
	}
	switch {
	case t.Kind == refNamed: // an enum
		return Id(t.Decl.Name).Call(buf.Clone().Index(at.Clone()))
	case t.Prim == "uint8":
		return buf.Clone().Index(at.Clone())
	case t.Prim == "uint16":
		return be("16")
	case t.Prim == "uint32":
		return be("32")
	case t.Prim == "int64":
		return Int64().Call(be("64"))
	}
	return be("64")
}

// identityRead is the call that reads a name of identity d: validated as
// it is read, and interned.
func identityRead(d *decl, path Code) *Statement {
	return Id("r").Dot("Name").Call(path, Op("&").Id("intern"+d.Name), Lit(d.Name), Lit(d.Min), Id("Max"+d.Name+"Bytes"))
}

// isString reports whether fl is a string or an identity name.
func isString(fl *field) bool {
	t := fl.Type
	return t.Kind == refPrim && t.Prim == "string" || t.Kind == refNamed && t.Decl.Kind == kindIdentity
}

// stringMax is the bound of a string or identity field.
func stringMax(fl *field) Code {
	if fl.Type.Kind == refNamed {
		return Id("Max" + fl.Type.Decl.Name + "Bytes")
	}
	return Lit(fl.Max)
}

// runVar names the package variable holding the field names or bounds of
// d's k-th run of strings.
func runVar(what string, d *decl, k int) string {
	return "run" + what + d.Name + strconv.Itoa(k)
}

func emitUnionCodec(f *File, d *decl) {
	f.Func().Id("append"+d.Name).Params(Id("dst").Index().Byte(), valueParam(d)).Index().Byte().Block(
		Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(variantType(d, v)).BlockFunc(func(g *Group) {
					g.Id("dst").Op("=").Append(Id("dst"), Lit(int(v.Tag)))
					if len(v.Type.Fields) > 0 {
						g.Id("dst").Op("=").Id("append"+v.Type.Name).Call(Id("dst"), variantArg(d, "x"))
					}
				})
			}
		}),
		Return(Id("dst")),
	)
	f.Func().Id("size"+d.Name).Params(valueParam(d)).Int().Block(
		Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				if len(v.Type.Fields) == 0 {
					g.Case(variantType(d, v)).Block(Return(Lit(1)))
					continue
				}
				g.Case(variantType(d, v)).Block(Return(Lit(1).Op("+").Id("size" + v.Type.Name).Call(variantArg(d, "x"))))
			}
		}),
		Return(Lit(1)),
	)
	if d.Record {
		return // a union record decodes in DecodeX, variant by variant
	}
	if unionComparable(d) {
		emitUnionMatch(f, d)
		emitUnionIntern(f, d)
	}
	f.Func().Id("read"+d.Name).Params(Id("r").Op("*").Qual(wirePkg, "Reader"), Id("field").String()).Id(d.Name).Block(
		Id("tag").Op(":=").Id("r").Dot("U8").Call(Id("field")),
		Switch(Id("tag")).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(Lit(int(v.Tag))).BlockFunc(func(g *Group) {
					g.Var().Id("x").Id(v.Type.Name)
					if len(v.Type.Fields) > 0 {
						g.Id("read"+v.Type.Name).Call(Id("r"), Op("&").Id("x"))
					}
					g.Return(Id("x"))
				})
			}
		}),
		If(Id("r").Dot("Err").Call().Op("==").Nil()).Block(
			Id("r").Dot("Failf").Call(Id("field"), Lit("unknown "+d.Name+" variant tag %d"), Id("tag")),
		),
		Return(Nil()),
	)
}

func emitRecordAPI(f *File, d *decl) {
	name := d.Name
	param, arg := Id("v").Id(name), Op("&").Id("v")
	if d.Kind == kindUnion {
		arg = Id("v")
	}
	f.Commentf("Version%s is the version byte that opens every encoded %s.", name, name)
	f.Const().Id("Version" + name).Op("=").Lit(int(d.Version))
	f.Commentf("Format%s is the store format that introduced %s (its format=): a", name, name)
	f.Comment("value family writes it only to a store of that format or above.")
	f.Const().Id("Format" + name).Op("=").Lit(int(d.Format))
	f.Commentf("Append%s appends the encoding of v to dst. It fails with an error", name)
	f.Comment("wrapping wire.ErrInvalid, leaving dst as it was, when v breaks a rule of the")
	f.Comment("schema (a bound, an identity, an enum value, an order). It does not allocate")
	f.Comment("when dst has room.")
	if d.Kind == kindUnion {
		// One type switch checks and appends the variant.
		f.Func().Id("Append"+name).Params(Id("dst").Index().Byte(), param).Params(Index().Byte(), Error()).Block(
			Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
				for _, vr := range d.Variants {
					g.Case(variantType(d, vr)).BlockFunc(func(g *Group) {
						g.If(Id("x").Op("==").Nil()).Block(
							Return(Id("dst"), Qual(wirePkg, "Within").Call(Lit(name), Qual(wirePkg, "Rule").Call(Lit(""), Lit("nil *"+vr.Type.Name)))),
						)
						if len(vr.Type.Fields) == 0 {
							g.Return(Append(Id("dst"), Id("Version"+name), Lit(int(vr.Tag))), Nil())
							return
						}
						g.If(Op("!").Id("valid" + vr.Type.Name).Call(Id("x"))).Block(
							Return(Id("dst"), Qual(wirePkg, "Within").Call(Lit(name), Id("check"+vr.Type.Name).Call(Id("x")))),
						)
						g.Return(Id("append"+vr.Type.Name).Call(Append(Id("dst"), Id("Version"+name), Lit(int(vr.Tag))), Id("x")), Nil())
					})
				}
			}),
			Return(Id("dst"), Qual(wirePkg, "Within").Call(Lit(name), Id("check"+name).Call(Id("v")))),
		)
	} else {
		f.Func().Id("Append"+name).Params(Id("dst").Index().Byte(), param).Params(Index().Byte(), Error()).Block(
			If(Op("!").Id("valid"+name).Call(arg)).Block(
				Return(Id("dst"), Qual(wirePkg, "Within").Call(Lit(name), Id("check"+name).Call(arg))),
			),
			Return(Id("append"+name).Call(Append(Id("dst"), Id("Version"+name)), arg), Nil()),
		)
	}
	f.Commentf("Encode%s returns the encoding of v in a buffer of exactly its size;", name)
	f.Commentf("it fails as Append%s does.", name)
	f.Func().Id("Encode"+name).Params(param).Params(Index().Byte(), Error()).Block(
		Return(Id("Append"+name).Call(Make(Index().Byte(), Lit(0), Lit(1).Op("+").Id("size"+name).Call(arg)), Id("v"))),
	)
	f.Commentf("Decode%s decodes b strictly: truncation, trailing bytes, an unknown", name)
	f.Comment("version, variant or enum value, a length over its bound, a non-canonical")
	f.Comment("encoding or a broken rule fail with a *wire.DecodeError wrapping")
	f.Comment("wire.ErrCorrupt. It never panics. Byte slices of the result alias b.")
	f.Func().Id("Decode"+name).Params(Id("b").Index().Byte()).Params(Id(name), Error()).Block(
		Var().Id("v").Id(name),
		Err().Op(":=").Id("Decode"+name+"Into").Call(Id("b"), Op("&").Id("v")),
		Return(Id("v"), Err()),
	)
	if d.Kind == kindUnion {
		f.Commentf("Decode%sInto decodes b into *v as Decode%s does. When *v already", name, name)
		f.Comment("holds the variant b encodes, that variant is decoded in place, reusing the")
		f.Comment("capacity of its slices, so a loop decoding into one value allocates only for")
		f.Comment("strings; earlier results that share the variant see it change. On error *v")
		f.Comment("is nil.")
		emitDecodeInto(f, name)
		f.Commentf("readerDecode%s is Decode%sInto's Reader path: it decodes b into", name, name)
		f.Comment("*v with a wire.Reader, whose error names what fails and where.")
		f.Func().Id("readerDecode"+name).Params(Id("b").Index().Byte(), Id("v").Op("*").Id(name)).Error().Block(
			Id("r").Op(":=").Qual(wirePkg, "NewReader").Call(Id("b"), Lit(name)),
			Id("r").Dot("Version").Call(Id("Version"+name)),
			Id("tag").Op(":=").Id("r").Dot("U8").Call(Lit(name)),
			Var().Err().Error(),
			Switch(Id("tag")).BlockFunc(func(g *Group) {
				for _, vr := range d.Variants {
					g.Case(Lit(int(vr.Tag))).BlockFunc(func(g *Group) {
						g.List(Id("x"), Id("_")).Op(":=").Parens(Op("*").Id("v")).Assert(Op("*").Id(vr.Type.Name))
						g.If(Id("x").Op("==").Nil()).Block(Id("x").Op("=").New(Id(vr.Type.Name)))
						if len(vr.Type.Fields) > 0 {
							g.Id("read"+vr.Type.Name).Call(Op("&").Id("r"), Id("x"))
						}
						g.If(Err().Op("=").Id("r").Dot("Finish").Call(), Err().Op("!=").Nil()).Block(Break())
						if len(vr.Type.Fields) > 0 {
							g.If(Err().Op("=").Id("verify"+vr.Type.Name).Call(Id("x")), Err().Op("!=").Nil()).Block(
								Err().Op("=").Qual(wirePkg, "DecodeRule").Call(Lit(name), Err()),
								Break(),
							)
						}
						g.Op("*").Id("v").Op("=").Id("x")
						g.Return(Nil())
					})
				}
				g.Default().Block(
					If(Id("r").Dot("Err").Call().Op("==").Nil()).Block(
						Id("r").Dot("Failf").Call(Lit(name), Lit("unknown "+name+" variant tag %d"), Id("tag")),
					),
					Err().Op("=").Id("r").Dot("Err").Call(),
				)
			}),
			Op("*").Id("v").Op("=").Nil(),
			Return(Err()),
		)
		f.Line()
		return
	}
	f.Commentf("Decode%sInto decodes b into *v as Decode%s does, reusing the", name, name)
	f.Comment("capacity of v's slices and keeping a partition (or other union of scalars")
	f.Comment("and names) v holds when b encodes it again, so a loop decoding into one")
	f.Comment("value allocates only for strings and new union values. On error *v is")
	f.Comment("zeroed.")
	emitDecodeInto(f, name)
	f.Commentf("readerDecode%s is Decode%sInto's Reader path: it decodes b into", name, name)
	f.Comment("*v with a wire.Reader, whose error names what fails and where.")
	f.Func().Id("readerDecode"+name).Params(Id("b").Index().Byte(), Id("v").Op("*").Id(name)).Error().Block(
		Id("r").Op(":=").Qual(wirePkg, "NewReader").Call(Id("b"), Lit(name)),
		Id("r").Dot("Version").Call(Id("Version"+name)),
		Id("read"+name).Call(Op("&").Id("r"), Id("v")),
		Err().Op(":=").Id("r").Dot("Finish").Call(),
		If(Err().Op("==").Nil()).Block(
			If(Err().Op("=").Id("verify"+name).Call(Id("v")), Err().Op("!=").Nil()).Block(
				Err().Op("=").Qual(wirePkg, "DecodeRule").Call(Lit(name), Err()),
			),
		),
		If(Err().Op("!=").Nil()).Block(
			Op("*").Id("v").Op("=").Id(name).Values(),
		),
		Return(Err()),
	)
}

// emitDecodeInto writes DecodeXInto (its doc comment is written before):
// the fast path, and on any failure the Reader path from the start, for
// its error.
func emitDecodeInto(f *File, name string) {
	f.Func().Id("Decode"+name+"Into").Params(Id("b").Index().Byte(), Id("v").Op("*").Id(name)).Error().Block(
		If(Id("fastDecode"+name).Call(Id("b"), Id("v"))).Block(Return(Nil())),
		Return(Id("readerDecode"+name).Call(Id("b"), Id("v"))),
	)
}

// encodeValue appends the statements that append x of type t to dst.
func encodeValue(g *Group, x string, t *typeRef, fl *field, depth int) {
	set := func(call *Statement) { g.Id("dst").Op("=").Add(call) }
	switch t.Kind {
	case refPrim:
		switch t.Prim {
		case "uint8":
			set(Append(Id("dst"), Id(x)))
		case "uint16":
			set(Qual(wirePkg, "AppendU16").Call(Id("dst"), Id(x)))
		case "uint32":
			set(Qual(wirePkg, "AppendU32").Call(Id("dst"), Id(x)))
		case "uint64":
			set(Qual(wirePkg, "AppendU64").Call(Id("dst"), Id(x)))
		case "int64":
			set(Qual(wirePkg, "AppendI64").Call(Id("dst"), Id(x)))
		case "bool":
			set(Qual(wirePkg, "AppendBool").Call(Id("dst"), Id(x)))
		case "string":
			set(Qual(wirePkg, "AppendString").Call(Id("dst"), Id(x)))
		}
	case refBytes:
		if fl != nil && fl.Optional {
			g.If(Id(x).Op("==").Nil()).Block(
				Id("dst").Op("=").Append(Id("dst"), Lit(0)),
			).Else().Block(
				Id("dst").Op("=").Qual(wirePkg, "AppendBytes").Call(Append(Id("dst"), Lit(1)), Id(x)),
			)
			return
		}
		set(Qual(wirePkg, "AppendBytes").Call(Id("dst"), Id(x)))
	case refArray:
		set(Append(Id("dst"), Id(x+"[:]").Op("...")))
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			set(Qual(wirePkg, "AppendString").Call(Id("dst"), Id(x).Dot("s")))
		case kindEnum:
			set(Append(Id("dst"), Uint8().Call(Id(x))))
		case kindStruct:
			set(Id("append"+t.Decl.Name).Call(Id("dst"), Op("&").Id(x)))
		case kindUnion:
			set(Id("append"+t.Decl.Name).Call(Id("dst"), Id(x)))
		}
	case refPtr:
		g.If(Id(x).Op("==").Nil()).Block(
			Id("dst").Op("=").Append(Id("dst"), Lit(0)),
		).Else().BlockFunc(func(g *Group) {
			g.Id("dst").Op("=").Append(Id("dst"), Lit(1))
			encodeValue(g, "(*"+x+")", t.Elem, nil, depth)
		})
	case refSlice:
		set(Qual(wirePkg, "AppendLen").Call(Id("dst"), Len(Id(x))))
		i := loopVar(depth)
		g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
			encodeValue(g, x+"["+i+"]", t.Elem, nil, depth+1)
		})
	}
}

// fixedSize is the encoded size of t when every value has the same size.
func fixedSize(t *typeRef) (int, bool) {
	switch t.Kind {
	case refPrim:
		switch t.Prim {
		case "uint8", "bool":
			return 1, true
		case "uint16":
			return 2, true
		case "uint32":
			return 4, true
		case "uint64", "int64":
			return 8, true
		}
	case refArray:
		return t.Len, true
	case refNamed:
		if t.Decl.Kind == kindEnum {
			return 1, true
		}
	}
	return 0, false
}

// minSize is the least encoded size of a value of t: decoders check that a
// count fits the bytes left before allocating.
func minSize(t *typeRef) int {
	if n, ok := fixedSize(t); ok {
		return n
	}
	switch t.Kind {
	case refNamed:
		switch t.Decl.Kind {
		case kindStruct:
			// 0 for a struct without fields: its count is then bounded
			// by the field's max alone
			n := 0
			for _, fl := range t.Decl.Fields {
				n += minSize(fl.Type)
			}
			return n
		}
	}
	return 1
}

// sizeValue appends the statements that add the encoded size of x to n.
func sizeValue(g *Group, x string, t *typeRef, fl *field, depth int) {
	add := func(e *Statement) { g.Id("n").Op("+=").Add(e) }
	if n, ok := fixedSize(t); ok {
		add(Lit(n))
		return
	}
	switch t.Kind {
	case refPrim: // string
		add(Qual(wirePkg, "LenSize").Call(Len(Id(x))).Op("+").Len(Id(x)))
	case refBytes:
		if fl != nil && fl.Optional {
			add(Lit(1))
			g.If(Id(x).Op("!=").Nil()).Block(
				Id("n").Op("+=").Qual(wirePkg, "LenSize").Call(Len(Id(x))).Op("+").Len(Id(x)),
			)
			return
		}
		add(Qual(wirePkg, "LenSize").Call(Len(Id(x))).Op("+").Len(Id(x)))
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			add(Qual(wirePkg, "LenSize").Call(Len(Id(x).Dot("s"))).Op("+").Len(Id(x).Dot("s")))
		case kindStruct:
			add(Id("size" + t.Decl.Name).Call(Op("&").Id(x)))
		case kindUnion:
			add(Id("size" + t.Decl.Name).Call(Id(x)))
		}
	case refPtr:
		add(Lit(1))
		g.If(Id(x).Op("!=").Nil()).BlockFunc(func(g *Group) {
			sizeValue(g, "(*"+x+")", t.Elem, nil, depth)
		})
	case refSlice:
		add(Qual(wirePkg, "LenSize").Call(Len(Id(x))))
		if n, ok := fixedSize(t.Elem); ok {
			add(Len(Id(x)).Op("*").Lit(n))
			return
		}
		i := loopVar(depth)
		g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
			sizeValue(g, x+"["+i+"]", t.Elem, nil, depth+1)
		})
	}
}

// decodeValue appends the statements that read x of type t; path names
// the field in errors.
func decodeValue(g *Group, x string, t *typeRef, fl *field, path string, depth int) {
	set := func(e *Statement) { g.Id(x).Op("=").Add(e) }
	r := func(method string, args ...Code) *Statement {
		return Id("r").Dot(method).Call(append([]Code{Lit(path)}, args...)...)
	}
	switch t.Kind {
	case refPrim:
		switch t.Prim {
		case "uint8":
			set(r("U8"))
		case "uint16":
			set(r("U16"))
		case "uint32":
			set(r("U32"))
		case "uint64":
			set(r("U64"))
		case "int64":
			set(r("I64"))
		case "bool":
			set(r("Bool"))
		case "string":
			set(r("String", Lit(fl.Max)))
		}
	case refBytes:
		max := 0
		if fl != nil {
			max = fl.Max
		}
		if fl != nil && fl.Optional {
			g.If(r("Present")).Block(Id(x).Op("=").Add(r("Bytes", Lit(max)))).Else().Block(Id(x).Op("=").Nil())
			return
		}
		set(r("Bytes", Lit(max)))
	case refArray:
		g.Add(r("Fixed", Id(x+"[:]")))
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			set(Id(t.Decl.Name).Values(identityRead(t.Decl, Lit(path))))
		case kindEnum:
			set(Id(t.Decl.Name).Call(r("U8")))
		case kindStruct:
			g.Id("read"+t.Decl.Name).Call(Id("r"), Op("&").Id(x))
		case kindUnion:
			if unionComparable(t.Decl) {
				// DecodeInto keeps the value held when the bytes encode it
				// again: rows naming one partition decode it once.
				g.If(Op("!").Id("match"+t.Decl.Name).Call(Id("r"), Id(x))).Block(
					Id(x).Op("=").Id("read"+t.Decl.Name+"Interned").Call(Id("r"), Lit(path)),
				)
			} else {
				set(Id("read"+t.Decl.Name).Call(Id("r"), Lit(path)))
			}
		}
	case refPtr:
		g.If(r("Present")).BlockFunc(func(g *Group) {
			p := "p" + loopVar(depth)
			g.Var().Id(p).Add(goType(t.Elem))
			decodeValue(g, p, t.Elem, nil, path, depth+1)
			g.Id(x).Op("=").Op("&").Id(p)
		}).Else().Block(Id(x).Op("=").Nil())
	case refSlice:
		// A slice keeps its capacity (DecodeInto reuses it); nil stays nil
		// when empty, so a fresh decode gives what the encoder was given.
		n := "n" + loopVar(depth)
		g.BlockFunc(func(g *Group) {
			g.Id(n).Op(":=").Add(r("Len", Lit(fl.Max), Lit(minSize(t.Elem))))
			g.If(Cap(Id(x)).Op(">=").Id(n)).Block(
				Id(x).Op("=").Id(x).Index(Empty(), Id(n)),
			).Else().Block(
				Id(x).Op("=").Make(goType(t), Id(n)),
			)
			i := loopVar(depth)
			g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
				decodeValue(g, x+"["+i+"]", t.Elem, fl.elem(), path, depth+1)
			})
		})
	}
}
