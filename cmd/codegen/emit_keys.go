package main

import (
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/tuple"

	. "github.com/dave/jennifer/jen"
)

// emitKeys writes the key classes and the tuple forms of the unions they
// use: constructors in append style, typed parsers, class ranges.
//
// Layout: a key is a FoundationDB tuple: the class tag as an integer, then
// the class's fields in order (integers, strings, bytes; identities as
// strings, enums as integers, unions as a nested tuple of the variant tag
// and the variant's fields). Byte order is therefore (tag, fields) order.
func emitKeys(f *File, s *schema) {
	f.Comment("Tag identifies a key class: the first element of every key of the class.")
	f.Type().Id("Tag").Uint32()
	f.Comment("ParsedKey is a parsed key of any class; switch on its concrete type.")
	f.Type().Id("ParsedKey").Interface(
		Comment("Tag returns the key's class tag."),
		Id("Tag").Params().Id("Tag"),
		Comment("AppendKey appends the key's encoding to dst; it fails with an error"),
		Comment("wrapping wire.ErrInvalid when a field breaks a rule of the schema."),
		Id("AppendKey").Params(Id("dst").Index().Byte()).Params(Index().Byte(), Error()),
	)
	var tags []Code
	for _, d := range s.keys() {
		tags = append(tags, Id("Tag"+d.Name).Id("Tag").Op("=").Lit(int(d.Tag)))
	}
	f.Comment("Class tags.")
	f.Const().Defs(tags...)
	f.Comment("ClassRange returns [start, end): every key of the class tag, in order.")
	f.Func().Id("ClassRange").Params(Id("tag").Id("Tag")).Params(Id("start"), Id("end").Index().Byte()).Block(
		Id("start").Op("=").Qual(tuplePkg, "AppendUint").Call(Nil(), Uint64().Call(Id("tag"))),
		Return(Id("start"), Qual(tuplePkg, "RangeEnd").Call(Id("start"))),
	)
	f.Comment("ParseKey parses a key of any class. Bytes that are no key of a declared")
	f.Comment("class fail with an error wrapping wire.ErrCorrupt.")
	f.Func().Id("ParseKey").Params(Id("b").Index().Byte()).Params(Id("ParsedKey"), Error()).Block(
		Id("r").Op(":=").Qual(tuplePkg, "NewReader").Call(Id("b")),
		List(Id("tag"), Err()).Op(":=").Id("readTupleUint").Call(Op("&").Id("r"), Lit("tag"), Lit(uint64(0xffffffff))),
		If(Err().Op("!=").Nil()).Block(Return(Nil(), Qual(wirePkg, "KeyError").Call(Lit("key"), Err()))),
		Switch(Id("Tag").Call(Id("tag"))).BlockFunc(func(g *Group) {
			for _, d := range s.keys() {
				g.Case(Id("Tag"+d.Name)).Block(
					List(Id("k"), Err()).Op(":=").Id("read"+d.Name).Call(Op("&").Id("r")),
					If(Err().Op("!=").Nil()).Block(Return(Nil(), Qual(wirePkg, "KeyError").Call(Lit(d.Name), Err()))),
					Return(Id("k"), Nil()),
				)
			}
		}),
		Return(Nil(), Qual(wirePkg, "KeyError").Call(Lit("key"), Qual(wirePkg, "Rule").Call(Lit(""), Lit("unknown class tag %d"), Id("tag")))),
	)
	f.Comment("finishKey fails unless r has no bytes left.")
	f.Func().Id("finishKey").Params(Id("r").Op("*").Qual(tuplePkg, "Reader")).Error().Block(
		If(Op("!").Id("r").Dot("Done").Call()).Block(
			Return(Qual(wirePkg, "Rule").Call(Lit(""), Lit("%d trailing bytes at offset %d"), Len(Id("r").Dot("Rest").Call()), Id("r").Dot("Offset").Call())),
		),
		Return(Nil()),
	)
	f.Comment("readTupleUint reads an unsigned integer of at most max.")
	f.Func().Id("readTupleUint").Params(Id("r").Op("*").Qual(tuplePkg, "Reader"), Id("field").String(), Id("max").Uint64()).Params(Uint64(), Error()).Block(
		List(Id("v"), Err()).Op(":=").Id("r").Dot("ReadUint").Call(),
		If(Err().Op("!=").Nil()).Block(Return(Lit(0), Err())),
		If(Id("v").Op(">").Id("max")).Block(Return(Lit(0), Qual(wirePkg, "Rule").Call(Id("field"), Lit("%d overflows its type"), Id("v")))),
		Return(Id("v"), Nil()),
	)
	emitNamespace(f, s)
	for _, d := range s.Decls {
		if d.Kind == kindUnion && d.usedInTuple {
			emitUnionTuple(f, d)
		}
	}
	for _, d := range s.keys() {
		emitKey(f, d)
	}
}

// keyFallible reports whether a key's fields can break a rule.
func keyFallible(d *decl) bool {
	for _, fl := range d.Fields {
		t := fl.Type
		if t.Kind == refBytes || t.Kind == refPrim && t.Prim == "string" || t.Kind == refNamed && t.Decl.Kind != kindEnum {
			return true
		}
		if t.Kind == refNamed && t.Decl.Kind == kindEnum {
			return true
		}
	}
	return false
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	if strings.ToUpper(s) == s {
		return strings.ToLower(s)
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func emitKey(f *File, d *decl) {
	name := d.Name
	fallible := keyFallible(d)
	f.Func().Params(Id(name)).Id("Tag").Params().Id("Tag").Block(Return(Id("Tag" + name)))

	f.Func().Id("append"+name).Params(Id("dst").Index().Byte(), Id("k").Op("*").Id(name)).Index().Byte().BlockFunc(func(g *Group) {
		g.Id("dst").Op("=").Qual(tuplePkg, "AppendUint").Call(Id("dst"), Uint64().Call(Id("Tag"+name)))
		for _, fl := range d.Fields {
			tupleAppend(g, "k."+fl.Name, fl.Type)
		}
		g.Return(Id("dst"))
	})
	f.Func().Id("check" + name).Params(Id("k").Op("*").Id(name)).Error().BlockFunc(func(g *Group) {
		for _, fl := range d.Fields {
			checkField(g, checkAll, d, fl, "k."+fl.Name, fl.Type, fl.Name, 0)
		}
		g.Return(Nil())
	})
	f.Commentf("AppendKey appends the encoding of k to dst; it fails with an error")
	f.Comment("wrapping wire.ErrInvalid, leaving dst as it was, when a field breaks a rule.")
	f.Func().Params(Id("k").Id(name)).Id("AppendKey").Params(Id("dst").Index().Byte()).Params(Index().Byte(), Error()).Block(
		If(Err().Op(":=").Id("check"+name).Call(Op("&").Id("k")), Err().Op("!=").Nil()).Block(
			Return(Id("dst"), Qual(wirePkg, "Within").Call(Lit(name), Err())),
		),
		Return(Id("append"+name).Call(Id("dst"), Op("&").Id("k")), Nil()),
	)
	params := []Code{Id("dst").Index().Byte()}
	values := Dict{}
	for _, fl := range d.Fields {
		params = append(params, Id(lowerFirst(fl.Name)).Add(goType(fl.Type)))
		values[Id(fl.Name)] = Id(lowerFirst(fl.Name))
	}
	lit := Id(name).Values(values)
	if fallible {
		f.Commentf("Append%s appends the %s with the given fields to dst; it fails", name, name)
		f.Comment("with an error wrapping wire.ErrInvalid when a field breaks a rule. It does")
		f.Comment("not allocate when dst has room.")
		f.Func().Id("Append"+name).Params(params...).Params(Index().Byte(), Error()).Block(
			Return(lit.Dot("AppendKey").Call(Id("dst"))),
		)
	} else {
		f.Commentf("Append%s appends the %s with the given fields to dst. It does not", name, name)
		f.Comment("allocate when dst has room.")
		f.Func().Id("Append"+name).Params(params...).Index().Byte().Block(
			Id("k").Op(":=").Add(lit),
			Return(Id("append"+name).Call(Id("dst"), Op("&").Id("k"))),
		)
	}
	f.Func().Id("read"+name).Params(Id("r").Op("*").Qual(tuplePkg, "Reader")).Params(Id("k").Id(name), Err().Error()).BlockFunc(func(g *Group) {
		for _, fl := range d.Fields {
			tupleRead(g, "k."+fl.Name, fl.Type, fl.Name)
		}
		g.If(Err().Op("=").Id("finishKey").Call(Id("r")), Err().Op("!=").Nil()).Block(Return())
		g.Return(Id("k"), Id("check"+name).Call(Op("&").Id("k")))
	})
	f.Commentf("Parse%s parses a key of class %s. Any other bytes fail with an", name, name)
	f.Comment("error wrapping wire.ErrCorrupt.")
	f.Func().Id("Parse"+name).Params(Id("b").Index().Byte()).Params(Id(name), Error()).Block(
		Id("r").Op(":=").Qual(tuplePkg, "NewReader").Call(Id("b")),
		List(Id("tag"), Err()).Op(":=").Id("readTupleUint").Call(Op("&").Id("r"), Lit("tag"), Lit(uint64(0xffffffff))),
		If(Err().Op("==").Nil().Op("&&").Id("Tag").Call(Id("tag")).Op("!=").Id("Tag"+name)).Block(
			Err().Op("=").Qual(wirePkg, "Rule").Call(Lit(""), Lit("class tag %d, want %d"), Id("tag"), Id("Tag"+name)),
		),
		If(Err().Op("!=").Nil()).Block(Return(Id(name).Values(), Qual(wirePkg, "KeyError").Call(Lit(name), Err()))),
		List(Id("k"), Err()).Op(":=").Id("read"+name).Call(Op("&").Id("r")),
		If(Err().Op("!=").Nil()).Block(Return(Id(name).Values(), Qual(wirePkg, "KeyError").Call(Lit(name), Err()))),
		Return(Id("k"), Nil()),
	)
}

// tupleAppend appends the statements that append x of type t as tuple
// elements.
func tupleAppend(g *Group, x string, t *typeRef) {
	set := func(e *Statement) { g.Id("dst").Op("=").Add(e) }
	switch t.Kind {
	case refPrim:
		switch t.Prim {
		case "int64":
			set(Qual(tuplePkg, "AppendInt").Call(Id("dst"), Id(x)))
		case "bool":
			set(Qual(tuplePkg, "AppendBool").Call(Id("dst"), Id(x)))
		case "string":
			set(Qual(tuplePkg, "AppendString").Call(Id("dst"), Id(x)))
		default:
			set(Qual(tuplePkg, "AppendUint").Call(Id("dst"), Uint64().Call(Id(x))))
		}
	case refBytes:
		set(Qual(tuplePkg, "AppendBytes").Call(Id("dst"), Id(x)))
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			set(Qual(tuplePkg, "AppendString").Call(Id("dst"), Id(x).Dot("s")))
		case kindEnum:
			set(Qual(tuplePkg, "AppendUint").Call(Id("dst"), Uint64().Call(Id(x))))
		case kindUnion:
			set(Qual(tuplePkg, "AppendNestedStart").Call(Id("dst")))
			set(Id("append"+t.Decl.Name+"Tuple").Call(Id("dst"), Id(x)))
			set(Qual(tuplePkg, "AppendNestedEnd").Call(Id("dst")))
		}
	}
}

var uintMax = map[string]uint64{"uint8": 0xff, "uint16": 0xffff, "uint32": 0xffffffff}

// tupleRead appends the statements that read x of type t from tuple
// reader r, returning on error (named results k, err).
func tupleRead(g *Group, x string, t *typeRef, path string) {
	onErr := If(Err().Op("!=").Nil()).Block(Return())
	switch t.Kind {
	case refPrim:
		switch t.Prim {
		case "int64":
			g.If(List(Id(x), Err()).Op("=").Id("r").Dot("ReadInt").Call(), Err().Op("!=").Nil()).Block(Return())
		case "bool":
			g.If(List(Id(x), Err()).Op("=").Id("r").Dot("ReadBool").Call(), Err().Op("!=").Nil()).Block(Return())
		case "string":
			g.If(List(Id(x), Err()).Op("=").Id("r").Dot("ReadString").Call(), Err().Op("!=").Nil()).Block(Return())
		case "uint64":
			g.If(List(Id(x), Err()).Op("=").Id("r").Dot("ReadUint").Call(), Err().Op("!=").Nil()).Block(Return())
		default:
			g.BlockFunc(func(g *Group) {
				g.Var().Id("v").Uint64()
				g.List(Id("v"), Err()).Op("=").Id("readTupleUint").Call(Id("r"), Lit(path), Lit(uintMax[t.Prim]))
				g.Add(onErr)
				g.Id(x).Op("=").Id(t.Prim).Call(Id("v"))
			})
		}
	case refBytes:
		g.If(List(Id(x), Err()).Op("=").Id("r").Dot("ReadBytes").Call(), Err().Op("!=").Nil()).Block(Return())
	case refNamed:
		switch t.Decl.Kind {
		case kindIdentity:
			g.BlockFunc(func(g *Group) {
				d := t.Decl
				g.Var().Id("b").Index().Byte()
				g.List(Id("b"), Err()).Op("=").Id("r").Dot("ReadStringBytes").Call()
				g.Add(onErr)
				g.Var().Id("s").String()
				g.Comment("validated in full here, or found among the names validated before: the key's own check rejects only the zero value")
				g.If(List(Id("s"), Err()).Op("=").Qual(wirePkg, "InternName").Call(Id("b"), Op("&").Id("intern"+d.Name), Lit(d.Name), Lit(d.Min), Id("Max"+d.Name+"Bytes")), Err().Op("!=").Nil()).Block(
					Err().Op("=").Qual(wirePkg, "Within").Call(Lit(path), Err()),
					Return(),
				)
				g.Id(x).Op("=").Id(d.Name).Values(Id("s"))
			})
		case kindEnum:
			g.BlockFunc(func(g *Group) {
				g.Var().Id("v").Uint64()
				g.List(Id("v"), Err()).Op("=").Id("readTupleUint").Call(Id("r"), Lit(path), Lit(uint64(0xff)))
				g.Add(onErr)
				g.Id(x).Op("=").Id(t.Decl.Name).Call(Id("v"))
			})
		case kindUnion:
			g.If(Err().Op("=").Id("r").Dot("EnterNested").Call(), Err().Op("!=").Nil()).Block(Return())
			g.If(List(Id(x), Err()).Op("=").Id("read"+t.Decl.Name+"Tuple").Call(Id("r")), Err().Op("!=").Nil()).Block(Return())
			g.If(Err().Op("=").Id("r").Dot("ExitNested").Call(), Err().Op("!=").Nil()).Block(Return())
		}
	}
}

// emitNamespace writes the schema's namespace and, when it declares a
// partition union, the helpers that put it first in every partition
// identity and check it there.
func emitNamespace(f *File, s *schema) {
	f.Comment("SchemaNamespace is the schema's namespace (its //mk:namespace): the first")
	f.Comment("element, a tuple string, of every partition identity it declares, so no")
	f.Comment("identity of another schema's partition is a tuple prefix of one of these.")
	f.Const().Id("SchemaNamespace").Op("=").Lit(s.Namespace)
	f.Comment("SchemaFormat is the newest store format the schema knows: the largest")
	f.Comment("format= it declares on a record, variant or enum constant (1 when none).")
	f.Comment("A store whose format of namespace SchemaNamespace is above it may hold")
	f.Comment("values this package cannot read.")
	f.Const().Id("SchemaFormat").Op("=").Lit(int(s.format()))
	if len(s.filter(func(d *decl) bool { return d.Kind == kindUnion && d.Partition })) == 0 {
		return
	}
	f.Comment("namespaceTuple is SchemaNamespace's tuple encoding, a partition identity's prefix.")
	f.Const().Id("namespaceTuple").Op("=").Lit(string(tuple.AppendString(nil, s.Namespace)))
	f.Comment("trimNamespace returns b after its first element, SchemaNamespace, and fails")
	f.Comment("when b does not start with it, naming the namespace b starts with instead.")
	f.Func().Id("trimNamespace").Params(Id("b").Index().Byte()).Params(Index().Byte(), Error()).Block(
		If(Len(Id("b")).Op(">=").Len(Id("namespaceTuple")).Op("&&").String().Call(Id("b").Index(Empty(), Len(Id("namespaceTuple")))).Op("==").Id("namespaceTuple")).Block(
			Return(Id("b").Index(Len(Id("namespaceTuple")), Empty()), Nil()),
		),
		Id("r").Op(":=").Qual(tuplePkg, "NewReader").Call(Id("b")),
		List(Id("ns"), Err()).Op(":=").Id("r").Dot("ReadString").Call(),
		If(Err().Op("!=").Nil()).Block(Return(Nil(), Qual(wirePkg, "Rule").Call(Lit("namespace"), Lit("no namespace first: %v"), Err()))),
		Return(Nil(), Qual(wirePkg, "Rule").Call(Lit("namespace"), Lit("identity of namespace %q, not %q"), Id("ns"), Id("SchemaNamespace"))),
	)
}

// emitUnionTuple writes the tuple form of a union: the variant tag as an
// integer, then the variant's fields. A partition union also gets its
// variants' AppendTuple (store.Partition) and ParsePartition.
func emitUnionTuple(f *File, d *decl) {
	name := d.Name
	f.Func().Id("append"+name+"Tuple").Params(Id("dst").Index().Byte(), Id("v").Id(name)).Index().Byte().Block(
		Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(Id(v.Type.Name)).Block(Return(Id("append"+v.Type.Name+"Tuple").Call(Id("dst"), Op("&").Id("x"))))
			}
		}),
		Return(Id("dst")),
	)
	for _, v := range d.Variants {
		f.Func().Id("append"+v.Type.Name+"Tuple").Params(Id("dst").Index().Byte(), Id("k").Op("*").Id(v.Type.Name)).Index().Byte().BlockFunc(func(g *Group) {
			g.Id("dst").Op("=").Qual(tuplePkg, "AppendUint").Call(Id("dst"), Lit(int(v.Tag)))
			for _, fl := range v.Type.Fields {
				tupleAppend(g, "k."+fl.Name, fl.Type)
			}
			g.Return(Id("dst"))
		})
		if d.Partition {
			f.Commentf("AppendTuple appends the tuple encoding of the partition's identity to dst:")
			f.Commentf("(SchemaNamespace, %d, fields...). It fails with an error wrapping", v.Tag)
			f.Comment("wire.ErrInvalid, leaving dst as it was, when the identity breaks a rule.")
			f.Func().Params(Id("v").Id(v.Type.Name)).Id("AppendTuple").Params(Id("dst").Index().Byte()).Params(Index().Byte(), Error()).BlockFunc(func(g *Group) {
				if len(v.Type.Fields) > 0 {
					g.If(Err().Op(":=").Id("check"+v.Type.Name).Call(Op("&").Id("v")), Err().Op("!=").Nil()).Block(
						Return(Id("dst"), Qual(wirePkg, "Within").Call(Lit(v.Type.Name), Err())),
					)
				}
				g.Return(Id("append"+v.Type.Name+"Tuple").Call(Append(Id("dst"), Id("namespaceTuple").Op("...")), Op("&").Id("v")), Nil())
			})
		}
	}
	f.Func().Id("read"+name+"Tuple").Params(Id("r").Op("*").Qual(tuplePkg, "Reader")).Params(Id(name), Error()).Block(
		List(Id("tag"), Err()).Op(":=").Id("readTupleUint").Call(Id("r"), Lit(name), Lit(uint64(0xff))),
		If(Err().Op("!=").Nil()).Block(Return(Nil(), Err())),
		Switch(Id("tag")).BlockFunc(func(g *Group) {
			for _, v := range d.Variants {
				g.Case(Lit(int(v.Tag))).BlockFunc(func(g *Group) {
					g.List(Id("k"), Err()).Op(":=").Id("read" + v.Type.Name + "Tuple").Call(Id("r"))
					g.If(Err().Op("!=").Nil()).Block(Return(Nil(), Err()))
					g.Return(Id("k"), Nil())
				})
			}
		}),
		Return(Nil(), Qual(wirePkg, "Rule").Call(Lit(name), Lit("unknown variant tag %d"), Id("tag"))),
	)
	for _, v := range d.Variants {
		f.Func().Id("read"+v.Type.Name+"Tuple").Params(Id("r").Op("*").Qual(tuplePkg, "Reader")).Params(Id("k").Id(v.Type.Name), Err().Error()).BlockFunc(func(g *Group) {
			for _, fl := range v.Type.Fields {
				tupleRead(g, "k."+fl.Name, fl.Type, v.Type.Name+"."+fl.Name)
			}
			if len(v.Type.Fields) > 0 {
				g.Return(Id("k"), Id("check"+v.Type.Name).Call(Op("&").Id("k")))
			} else {
				g.Return(Id("k"), Nil())
			}
		})
	}
	if d.Partition {
		f.Commentf("Parse%s parses the tuple encoding of a %s identity, as its", name, name)
		f.Comment("AppendTuple writes it. Any other bytes fail with an error wrapping")
		f.Comment("wire.ErrCorrupt, among them the identity of another schema's partition,")
		f.Comment("whose first element names another namespace than SchemaNamespace.")
		f.Func().Id("Parse"+name).Params(Id("b").Index().Byte()).Params(Id(name), Error()).Block(
			List(Id("rest"), Err()).Op(":=").Id("trimNamespace").Call(Id("b")),
			If(Err().Op("!=").Nil()).Block(Return(Nil(), Qual(wirePkg, "KeyError").Call(Lit(name), Err()))),
			Id("r").Op(":=").Qual(tuplePkg, "NewReader").Call(Id("rest")),
			List(Id("p"), Err()).Op(":=").Id("read"+name+"Tuple").Call(Op("&").Id("r")),
			If(Err().Op("==").Nil()).Block(Err().Op("=").Id("finishKey").Call(Op("&").Id("r"))),
			If(Err().Op("!=").Nil()).Block(Return(Nil(), Qual(wirePkg, "KeyError").Call(Lit(name), Err()))),
			Return(Id("p"), Nil()),
		)
		f.Commentf("Parse%sPrefix parses a %s identity at the start of b, as a raw", name, name)
		f.Comment("store key begins with one after its root prefix, and returns it with the")
		f.Comment("number of bytes it takes: the rest of b is not read. Bytes that begin with")
		f.Comment("no identity of the union fail with an error wrapping wire.ErrCorrupt.")
		f.Func().Id("Parse"+name+"Prefix").Params(Id("b").Index().Byte()).Params(Id(name), Int(), Error()).Block(
			List(Id("rest"), Err()).Op(":=").Id("trimNamespace").Call(Id("b")),
			If(Err().Op("!=").Nil()).Block(Return(Nil(), Lit(0), Qual(wirePkg, "KeyError").Call(Lit(name), Err()))),
			Id("r").Op(":=").Qual(tuplePkg, "NewReader").Call(Id("rest")),
			List(Id("p"), Err()).Op(":=").Id("read"+name+"Tuple").Call(Op("&").Id("r")),
			If(Err().Op("!=").Nil()).Block(Return(Nil(), Lit(0), Qual(wirePkg, "KeyError").Call(Lit(name), Err()))),
			Return(Id("p"), Len(Id("b")).Op("-").Len(Id("r").Dot("Rest").Call()), Nil()),
		)
	}
}
