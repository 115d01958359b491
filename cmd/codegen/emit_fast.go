package main

import (
	. "github.com/dave/jennifer/jen"
)

// The fast path of the record decoders (see the design note in
// codec/wire/fast.go): for every record, fastDecodeX decodes well-formed
// bytes in one pass over b with the offset p in a local variable, and
// reports false on anything else, after which DecodeXInto decodes the
// bytes again with a wire.Reader (readerDecodeX) for its error. For every
// struct it reaches, fastReadX(b, p, v) reads the struct's fields from
// b[p:] and returns the offset after them, or -1. Every check of the
// Reader path holds: bounds, canonical lengths, counts against the bytes
// left, booleans, presence bytes, identity names (wire.NameAt, through the
// same Intern tables), versions, variant tags, trailing bytes, and the
// record's verifier (enums, sorted, min, le). Unions and runs of strings,
// whose reading shares the Reader's interning or allocation, are read by
// the Reader path's own code on a Reader over the bytes left.

// fastNative reports whether the fast path reads values of t itself;
// any other field is read by a Reader over the bytes left.
func fastNative(t *typeRef) bool {
	switch t.Kind {
	case refNamed:
		return t.Decl.Kind != kindUnion
	case refPtr, refSlice:
		return fastNative(t.Elem)
	}
	return true
}

// fastStructs lists the structs that need a fastReadX: every struct
// record, every variant of a union record, and every struct their native
// fields reach that is not read in place (fastInline).
func fastStructs(s *schema) map[*decl]bool {
	need := map[*decl]bool{}
	var walkType func(t *typeRef)
	var walk func(d *decl)
	walk = func(d *decl) {
		if need[d] {
			return
		}
		need[d] = true
		for _, u := range readUnits(d) {
			if len(u.fields) == 1 && fastNative(u.fields[0].Type) {
				walkType(u.fields[0].Type)
			}
		}
	}
	walkType = func(t *typeRef) {
		switch t.Kind {
		case refNamed:
			if t.Decl.Kind == kindStruct && !fastInline(t.Decl) {
				walk(t.Decl)
			}
		case refPtr, refSlice:
			walkType(t.Elem)
		}
	}
	for _, d := range s.records() {
		if d.Kind != kindUnion {
			walk(d)
			continue
		}
		for _, v := range d.Variants {
			if len(v.Type.Fields) > 0 {
				walk(v.Type)
			}
		}
	}
	return need
}

// emitFastRead writes fastReadX for struct d.
func emitFastRead(f *File, d *decl) {
	f.Commentf("fastRead%s reads the fields of %s from b[p:] as read%s does, and", d.Name, d.Name, d.Name)
	f.Comment("returns the offset after them, or -1 where read" + d.Name + " would fail.")
	f.Func().Id("fastRead"+d.Name).Params(Id("b").Index().Byte(), Id("p").Int(), Id("v").Op("*").Id(d.Name)).Int().BlockFunc(func(g *Group) {
		fastFields(g, d, "v", 0)
		g.Return(Id("p"))
	})
}

// fastFields appends the statements that read the fields of x, a struct
// d, at b[p:], advancing p; depth names its loop variables.
func fastFields(g *Group, d *decl, x string, depth int) {
	for _, u := range readUnits(d) {
		fl := u.fields[0]
		switch {
		case u.fixed:
			fastFixed(g, x, u.fields)
		case len(u.fields) == 1 && fastNative(fl.Type):
			fastValue(g, x+"."+fl.Name, fl.Type, fl, depth)
		default:
			// only in fastReadX, where x is v as in the Reader path's
			// code: an inlined struct has no such field
			g.BlockFunc(func(g *Group) {
				g.Comment("as read" + d.Name + " reads it, with a Reader over the bytes left")
				g.Id("rd").Op(":=").Qual(wirePkg, "NewReader").Call(Id("b").Index(Id("p").Op(":")), Lit(d.Name))
				g.Id("r").Op(":=").Op("&").Id("rd")
				emitReaderUnit(g, d, u)
				g.If(Id("r").Dot("Err").Call().Op("!=").Nil()).Block(Return(Lit(-1)))
				g.Id("p").Op("+=").Id("r").Dot("Offset").Call()
			})
		}
	}
}

// fastInline reports whether a struct d held by another is read in place
// rather than by a call of fastReadX: when it holds no struct (so no
// recursion) and no field read with a Reader. The call costs RelayV1's
// decode about a seventh of its time, one call per put.
func fastInline(d *decl) bool {
	var holdsStruct func(t *typeRef) bool
	holdsStruct = func(t *typeRef) bool {
		switch t.Kind {
		case refNamed:
			return t.Decl.Kind == kindStruct
		case refPtr, refSlice:
			return holdsStruct(t.Elem)
		}
		return false
	}
	for _, u := range readUnits(d) {
		if u.fixed {
			continue
		}
		if u.strings || !fastNative(u.fields[0].Type) || holdsStruct(u.fields[0].Type) {
			return false
		}
	}
	return true
}

// emitFastDecode writes fastDecodeX for record d: it decodes b into *v and
// reports true, or reports false where readerDecodeX fails (having perhaps
// written part of *v, which readerDecodeX then decodes into again).
func emitFastDecode(f *File, d *decl) {
	name := d.Name
	f.Commentf("fastDecode%s decodes b into *v and reports true when b is a valid", name)
	f.Commentf("%s; otherwise it reports false, leaving *v perhaps partly written.", name)
	fn := f.Func().Id("fastDecode"+name).Params(Id("b").Index().Byte(), Id("v").Op("*").Id(name)).Bool()
	if d.Kind != kindUnion {
		fn.Block(Return(
			Len(Id("b")).Op(">").Lit(0).Op("&&").Id("b").Index(Lit(0)).Op("==").Id("Version"+name).
				Op("&&").Id("fastRead"+name).Call(Id("b"), Lit(1), Id("v")).Op("==").Len(Id("b")).
				Op("&&").Id("verify" + name).Call(Id("v")).Op("==").Nil(),
		))
		return
	}
	fn.Block(
		If(Len(Id("b")).Op("<").Lit(2).Op("||").Id("b").Index(Lit(0)).Op("!=").Id("Version"+name)).Block(Return(False())),
		Switch(Id("b").Index(Lit(1))).BlockFunc(func(g *Group) {
			for _, vr := range d.Variants {
				g.Case(Lit(int(vr.Tag))).BlockFunc(func(g *Group) {
					if len(vr.Type.Fields) == 0 {
						g.If(Len(Id("b")).Op("!=").Lit(2)).Block(Return(False()))
					}
					g.List(Id("x"), Id("_")).Op(":=").Parens(Op("*").Id("v")).Assert(Op("*").Id(vr.Type.Name))
					g.If(Id("x").Op("==").Nil()).Block(Id("x").Op("=").New(Id(vr.Type.Name)))
					if len(vr.Type.Fields) > 0 {
						g.If(Id("fastRead"+vr.Type.Name).Call(Id("b"), Lit(2), Id("x")).Op("!=").Len(Id("b")).
							Op("||").Id("verify" + vr.Type.Name).Call(Id("x")).Op("!=").Nil()).Block(Return(False()))
					}
					g.Op("*").Id("v").Op("=").Id("x")
					g.Return(True())
				})
			}
		}),
		Return(False()),
	)
}

// fastFixed appends the statements that read run, consecutive fixedInt
// fields of x, after one length check.
func fastFixed(g *Group, x string, run []*field) {
	size := 0
	for _, fl := range run {
		n, _ := fixedSize(fl.Type)
		size += n
	}
	g.If(Len(Id("b")).Op("-").Id("p").Op("<").Lit(size)).Block(Return(Lit(-1)))
	at := 0
	for _, fl := range run {
		g.Id(x + "." + fl.Name).Op("=").Add(fixedRead(fl.Type, Id("b"), fastAt(at)))
		n, _ := fixedSize(fl.Type)
		at += n
	}
	g.Id("p").Op("+=").Lit(size)
}

// fastAt is the offset p+at.
func fastAt(at int) *Statement {
	if at == 0 {
		return Id("p")
	}
	return Id("p").Op("+").Lit(at)
}

// fastLen appends the statements that read a length or count of at most
// max into n, with q the offset after it, failing unless the bytes left
// hold n values of at least minElem bytes each.
func fastLen(g *Group, max, minElem int) {
	g.List(Id("n"), Id("q")).Op(":=").Qual(wirePkg, "ShortLen").Call(Id("b"), Id("p"), Lit(max))
	g.If(Id("q").Op("<").Lit(0)).Block(
		List(Id("n"), Id("q")).Op("=").Qual(wirePkg, "LenAt").Call(Id("b"), Id("p"), Lit(max)),
	)
	left := Len(Id("b")).Op("-").Id("q")
	switch minElem {
	case 0:
		g.If(Id("q").Op("<").Lit(0)).Block(Return(Lit(-1)))
	case 1:
		g.If(Id("q").Op("<").Lit(0).Op("||").Id("n").Op(">").Add(left)).Block(Return(Lit(-1)))
	default:
		g.If(Id("q").Op("<").Lit(0).Op("||").Id("n").Op(">").Parens(left).Op("/").Lit(minElem)).Block(Return(Lit(-1)))
	}
}

// fastPresent appends the statements that read a presence byte, failing
// unless it is 0 or 1; b[p-1] is then 1 for a present value.
func fastPresent(g *Group) {
	g.If(Id("p").Op(">=").Len(Id("b")).Op("||").Id("b").Index(Id("p")).Op(">").Lit(1)).Block(Return(Lit(-1)))
	g.Id("p").Op("++")
}

// fastValue appends the statements that read x of type t (fastNative) at
// b[p:], advancing p, as decodeValue's do with a Reader.
func fastValue(g *Group, x string, t *typeRef, fl *field, depth int) {
	fail := Return(Lit(-1))
	present := Id("b").Index(Id("p").Op("-").Lit(1)).Op("==").Lit(1)
	switch {
	case t.Kind == refPrim && t.Prim == "bool":
		fastPresent(g)
		g.Id(x).Op("=").Add(present)
		return
	case t.Kind == refPrim && t.Prim == "string":
		g.BlockFunc(func(g *Group) {
			fastLen(g, fl.Max, 1)
			g.Id(x).Op("=").String().Call(Id("b").Index(Id("q").Op(":").Id("q").Op("+").Id("n")))
			g.Id("p").Op("=").Id("q").Op("+").Id("n")
		})
		return
	case t.Kind == refPrim || t.Kind == refNamed && t.Decl.Kind == kindEnum:
		n, _ := fixedSize(t)
		g.If(Len(Id("b")).Op("-").Id("p").Op("<").Lit(n)).Block(fail)
		g.Id(x).Op("=").Add(fixedRead(t, Id("b"), Id("p")))
		g.Id("p").Op("+=").Lit(n)
		return
	}
	switch t.Kind {
	case refBytes:
		max := 0
		if fl != nil {
			max = fl.Max
		}
		read := func(g *Group) {
			g.BlockFunc(func(g *Group) {
				fastLen(g, max, 1)
				g.Id(x).Op("=").Id("b").Index(Id("q").Op(":").Id("q").Op("+").Id("n").Op(":").Id("q").Op("+").Id("n"))
				g.Id("p").Op("=").Id("q").Op("+").Id("n")
			})
		}
		if fl != nil && fl.Optional {
			fastPresent(g)
			g.If(present).BlockFunc(read).Else().Block(Id(x).Op("=").Nil())
			return
		}
		read(g)
	case refArray:
		g.If(Len(Id("b")).Op("-").Id("p").Op("<").Lit(t.Len)).Block(fail)
		g.Copy(Id(x+"[:]"), Id("b").Index(Id("p").Op(":")))
		g.Id("p").Op("+=").Lit(t.Len)
	case refNamed:
		if d := t.Decl; d.Kind == kindIdentity {
			g.BlockFunc(func(g *Group) {
				g.List(Id("s"), Id("q")).Op(":=").Qual(wirePkg, "NameAt").Call(Id("b"), Id("p"), Op("&").Id("intern"+d.Name), Lit(d.Name), Lit(d.Min), Id("Max"+d.Name+"Bytes"))
				g.If(Id("q").Op("<").Lit(0)).Block(fail)
				g.Id(x).Op("=").Id(d.Name).Values(Id("s"))
				g.Id("p").Op("=").Id("q")
			})
			return
		}
		if fastInline(t.Decl) {
			fastFields(g, t.Decl, x, depth)
			return
		}
		g.If(Id("p").Op("=").Id("fastRead"+t.Decl.Name).Call(Id("b"), Id("p"), Op("&").Id(x)), Id("p").Op("<").Lit(0)).Block(fail)
	case refPtr:
		fastPresent(g)
		g.If(present).BlockFunc(func(g *Group) {
			p := "p" + loopVar(depth)
			g.Var().Id(p).Add(goType(t.Elem))
			fastValue(g, p, t.Elem, nil, depth+1)
			g.Id(x).Op("=").Op("&").Id(p)
		}).Else().Block(Id(x).Op("=").Nil())
	case refSlice:
		g.BlockFunc(func(g *Group) {
			fastLen(g, fl.Max, minSize(t.Elem))
			g.Id("p").Op("=").Id("q")
			g.If(Cap(Id(x)).Op(">=").Id("n")).Block(
				Id(x).Op("=").Id(x).Index(Empty(), Id("n")),
			).Else().Block(
				Id(x).Op("=").Make(goType(t), Id("n")),
			)
			if e := t.Elem; e.Kind == refNamed && e.Decl.Kind == kindStruct && len(e.Decl.Fields) == 0 {
				return // nothing to read
			}
			i := loopVar(depth)
			g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
				fastValue(g, x+"["+i+"]", t.Elem, fl.elem(), depth+1)
			})
		})
	}
}
