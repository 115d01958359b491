package main

import (
	. "github.com/dave/jennifer/jen"
)

// The generated tests: for every record a round-trip test, a rejection
// test for invalid values and malformed bytes, a native fuzz target and an
// encode/decode benchmark; for every key class the same over its tuple
// form; for identities their bounds; for partition unions their tuple
// round trip and order.

func testingT() *Statement { return Id("t").Op("*").Qual("testing", "T") }

// emitRecordTests writes records_test.go.
func emitRecordTests(f *File, s *schema) {
	if len(s.records()) > 0 {
		emitMutations(f)
	}
	for _, d := range s.records() {
		emitRecordTest(f, d)
		emitFastPathTest(f, d)
	}
}

// emitMutations writes mutations, the inputs of the fast-path tests.
func emitMutations(f *File) {
	clone := func() *Statement { return Qual("slices", "Clone").Call(Id("b")) }
	f.Comment("mutations returns b and variants of it: every truncation, every byte")
	f.Comment("replaced by 0, 1, 2, 0x7f, 0x80, 0xff and its neighbours, every byte")
	f.Comment("removed, and 0 and 0x80 inserted everywhere (before a length, 0x80")
	f.Comment("makes a two-byte uvarint of it).")
	f.Func().Id("mutations").Params(Id("b").Index().Byte()).Index().Index().Byte().Block(
		Var().Id("out").Index().Index().Byte(),
		For(Id("i").Op(":=").Lit(0), Id("i").Op("<=").Len(Id("b")), Id("i").Op("++")).Block(
			Id("out").Op("=").Append(Id("out"), Id("b").Index(Empty(), Id("i"), Id("i")),
				Qual("slices", "Insert").Call(clone(), Id("i"), Lit(0)),
				Qual("slices", "Insert").Call(clone(), Id("i"), Lit(0x80))),
			If(Id("i").Op("==").Len(Id("b"))).Block(Break()),
			Id("out").Op("=").Append(Id("out"), Qual("slices", "Delete").Call(clone(), Id("i"), Id("i").Op("+").Lit(1))),
			For(List(Id("_"), Id("c")).Op(":=").Range().Index().Byte().Values(Lit(0), Lit(1), Lit(2), Lit(0x7f), Lit(0x80), Lit(0xff), Id("b").Index(Id("i")).Op("+").Lit(1), Id("b").Index(Id("i")).Op("-").Lit(1))).Block(
				Id("m").Op(":=").Add(clone()),
				Id("m").Index(Id("i")).Op("=").Id("c"),
				Id("out").Op("=").Append(Id("out"), Id("m")),
			),
		),
		Return(Id("out")),
	)
}

// emitFastPathTest writes agreeX, which holds the fast path of DecodeXInto
// to the Reader path's result, and TestXFastPathAgrees, which runs it on
// the mutations of every example's encoding and on the malformed inputs
// (FuzzX runs it on everything the fuzzer finds).
func emitFastPathTest(f *File, d *decl) {
	name := d.Name
	f.Commentf("agree%s decodes b with the fast path and with the Reader path, into", name)
	f.Comment("a new value and into one that held the decoding of held, and fails t")
	f.Comment("unless both paths give the same value or both fail.")
	f.Func().Id("agree"+name).Params(testingT(), Id("held"), Id("b").Index().Byte()).Block(
		Id("t").Dot("Helper").Call(),
		For(List(Id("_"), Id("reuse")).Op(":=").Range().Index().Bool().Values(False(), True())).Block(
			Var().List(Id("fast"), Id("slow")).Id(name),
			If(Id("reuse")).Block(
				// two decodings: the values share no slices
				If(Id("readerDecode"+name).Call(Id("held"), Op("&").Id("fast")).Op("!=").Nil().Op("||").Id("readerDecode"+name).Call(Id("held"), Op("&").Id("slow")).Op("!=").Nil()).Block(
					Id("t").Dot("Fatalf").Call(Lit("held encoding %x does not decode"), Id("held")),
				),
			),
			Id("ok").Op(":=").Id("fastDecode"+name).Call(Id("b"), Op("&").Id("fast")),
			Err().Op(":=").Id("readerDecode"+name).Call(Id("b"), Op("&").Id("slow")),
			If(Id("ok").Op("!=").Parens(Err().Op("==").Nil())).Block(
				Id("t").Dot("Fatalf").Call(Lit("input %x (reuse %v): fast path decodes: %v, Reader path fails with %v"), Id("b"), Id("reuse"), Id("ok"), Err()),
			),
			If(Id("ok").Op("&&").Op("!").Qual("reflect", "DeepEqual").Call(Id("fast"), Id("slow"))).Block(
				Id("t").Dot("Fatalf").Call(Lit("input %x (reuse %v): fast path decodes %+v, Reader path %+v"), Id("b"), Id("reuse"), Id("fast"), Id("slow")),
			),
		),
	)
	f.Commentf("Test%sFastPathAgrees holds Decode%sInto's fast path to its Reader", name, name)
	f.Comment("path on the mutations of every example's encoding and on the malformed")
	f.Comment("inputs: both decode to the same value or both fail.")
	f.Func().Id("Test"+name+"FastPathAgrees").Params(testingT()).Block(
		Id("examples").Op(":=").Id("examples"+name).Call(),
		List(Id("held"), Err()).Op(":=").Id("Encode"+name).Call(Id("examples").Index(Len(Id("examples")).Op("-").Lit(1))),
		If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
		For(List(Id("_"), Id("v")).Op(":=").Range().Id("examples")).Block(
			List(Id("b"), Err()).Op(":=").Id("Encode"+name).Call(Id("v")),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
			For(List(Id("_"), Id("m")).Op(":=").Range().Id("mutations").Call(Id("b"))).Block(
				Id("agree"+name).Call(Id("t"), Id("held"), Id("m")),
			),
		),
		For(List(Id("_"), Id("b")).Op(":=").Range().Id("malformed"+name).Call()).Block(
			Id("agree"+name).Call(Id("t"), Id("held"), Id("b")),
		),
	)
}

// recordArg is how a record value passes to its internal size and append
// functions.
func recordArg(d *decl, v string) *Statement {
	if d.Kind == kindUnion {
		return Id(v)
	}
	return Op("&").Id(v)
}

func emitRecordTest(f *File, d *decl) {
	name := d.Name
	// invalid values, and the raw encodings of those that must not decode
	f.Commentf("invalid%s returns %s values that break a rule of the schema.", name, name)
	f.Func().Id("invalid" + name).Params().Index().Id(name).BlockFunc(func(g *Group) {
		g.Var().Id("out").Index().Id(name)
		forEachBreakage(d, func(variantIdx int, b breakage, base Code) {
			if b.decodeOnly {
				return
			}
			g.BlockFunc(func(g *Group) {
				g.Id("v").Op(":=").Add(base)
				g.Add(b.change)
				g.Id("out").Op("=").Append(Id("out"), Id("v"))
			})
		})
		g.Return(Id("out"))
	})
	f.Commentf("malformed%s returns bytes that must not decode as %s: truncated,", name, article(name, false))
	f.Comment("with a trailing byte, of an unknown version or variant, and the unchecked")
	f.Comment("encodings of values that break a rule (oversize lengths, unknown enum values).")
	f.Func().Id("malformed" + name).Params().Index().Index().Byte().BlockFunc(func(g *Group) {
		g.List(Id("valid"), Err()).Op(":=").Id("Encode" + name).Call(Id("examples" + name).Call().Index(Lit(0)))
		g.If(Err().Op("!=").Nil()).Block(Panic(Err()))
		g.Id("with").Op(":=").Func().Params(Id("i").Int(), Id("b").Byte()).Index().Byte().Block(
			Id("c").Op(":=").Qual("bytes", "Clone").Call(Id("valid")),
			Id("c").Index(Id("i")).Op("=").Id("b"),
			Return(Id("c")),
		)
		entries := []Code{
			Index().Byte().Values(),
			Id("valid").Index(Empty(), Len(Id("valid")).Op("-").Lit(1)),
			Append(Qual("bytes", "Clone").Call(Id("valid")), Lit(0)),
			Id("with").Call(Lit(0), Id("Version"+name).Op("+").Lit(1)),
		}
		if d.Kind == kindUnion || len(d.Fields) > 0 && d.Fields[0].Type.Kind == refNamed && d.Fields[0].Type.Decl.Kind == kindUnion {
			entries = append(entries, Id("with").Call(Lit(1), Lit(0xff)))
		}
		g.Id("out").Op(":=").Index().Index().Byte().Values(entries...)
		forEachBreakage(d, func(variantIdx int, b breakage, base Code) {
			if !b.corrupt {
				return
			}
			g.BlockFunc(func(g *Group) {
				g.Id("v").Op(":=").Add(base)
				g.Add(b.change)
				if d.Kind == kindUnion {
					g.Id("out").Op("=").Append(Id("out"), Id("append"+name).Call(Index().Byte().Values(Id("Version"+name)), Id("v")))
				} else {
					g.Id("out").Op("=").Append(Id("out"), Id("append"+name).Call(Index().Byte().Values(Id("Version"+name)), Op("&").Id("v")))
				}
			})
		})
		g.Return(Id("out"))
	})

	f.Func().Id("Test" + name + "RoundTrip").Params(testingT()).Block(
		For(List(Id("i"), Id("v")).Op(":=").Range().Id("examples"+name).Call()).Block(
			List(Id("b"), Err()).Op(":=").Id("Encode"+name).Call(Id("v")),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("example %d: encode: %v"), Id("i"), Err())),
			If(Len(Id("b")).Op("!=").Lit(1).Op("+").Id("size"+name).Call(recordArg(d, "v"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d: encoded %d bytes, size says %d"), Id("i"), Len(Id("b")), Lit(1).Op("+").Id("size"+name).Call(recordArg(d, "v"))),
			),
			List(Id("got"), Err()).Op(":=").Id("Decode"+name).Call(Id("b")),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("example %d: decode: %v"), Id("i"), Err())),
			If(Op("!").Qual("reflect", "DeepEqual").Call(Id("got"), Id("v"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d: decoded %+v, want %+v"), Id("i"), Id("got"), Id("v")),
			),
			List(Id("again"), Err()).Op(":=").Id("Append"+name).Call(Index().Byte().Call(Lit("prefix")), Id("got")),
			If(Err().Op("!=").Nil().Op("||").String().Call(Id("again")).Op("!=").Lit("prefix").Op("+").String().Call(Id("b"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d: re-encoding after a prefix differs (%v)"), Id("i"), Err()),
			),
		),
	)
	f.Commentf("Test%sDecodeIntoReuses decodes every example into one value, in", name)
	f.Comment("turn, and checks each decode holds exactly that example.")
	f.Func().Id("Test" + name + "DecodeIntoReuses").Params(testingT()).BlockFunc(func(g *Group) {
		g.Var().Id("v").Id(name)
		g.Id("examples").Op(":=").Id("examples" + name).Call()
		g.For(List(Id("_"), Id("i")).Op(":=").Range().Index().Int().Values(Lit(1), Lit(0), Lit(1), Lit(1), Lit(0), Lit(2), Lit(3), Lit(3), Lit(2), Lit(1))).Block(
			List(Id("want"), Err()).Op(":=").Id("Encode"+name).Call(Id("examples").Index(Id("i").Op("%").Len(Id("examples")))),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
			If(Err().Op(":=").Id("Decode"+name+"Into").Call(Id("want"), Op("&").Id("v")), Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
			List(Id("got"), Err()).Op(":=").Id("Encode"+name).Call(Id("v")),
			If(Err().Op("!=").Nil().Op("||").Op("!").Qual("bytes", "Equal").Call(Id("got"), Id("want"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d decoded into a reused value re-encodes as %x (%v), want %x"), Id("i"), Id("got"), Err(), Id("want")),
			),
		)
		if d.Kind == kindUnion {
			g.Comment("the same variant again is decoded in place")
			g.Id("held").Op(":=").Id("v")
			g.List(Id("b"), Id("_")).Op(":=").Id("Encode" + name).Call(Id("v"))
			g.If(Err().Op(":=").Id("Decode"+name+"Into").Call(Id("b"), Op("&").Id("v")), Err().Op("!=").Nil().Op("||").Id("v").Op("!=").Id("held")).Block(
				Id("t").Dot("Errorf").Call(Lit("decoding the variant *v holds gave a new %T (%v), want it reused"), Id("v"), Err()),
			)
			g.If(Err().Op(":=").Id("Decode"+name+"Into").Call(Index().Byte().Values(), Op("&").Id("v")), Err().Op("==").Nil().Op("||").Id("v").Op("!=").Nil()).Block(
				Id("t").Dot("Errorf").Call(Lit("a failed decode left %+v, %v; want nil and an error"), Id("v"), Err()),
			)
			return
		}
		g.If(Err().Op(":=").Id("Decode"+name+"Into").Call(Index().Byte().Values(), Op("&").Id("v")), Err().Op("==").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("v"), Id(name).Values())).Block(
			Id("t").Dot("Errorf").Call(Lit("a failed decode left %+v, %v; want the zero value and an error"), Id("v"), Err()),
		)
	})
	f.Func().Id("Test" + name + "RejectsInvalid").Params(testingT()).Block(
		For(List(Id("i"), Id("v")).Op(":=").Range().Id("invalid"+name).Call()).Block(
			List(Id("out"), Err()).Op(":=").Id("Append"+name).Call(Index().Byte().Call(Lit("keep")), Id("v")),
			If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrInvalid"))).Block(
				Id("t").Dot("Errorf").Call(Lit("invalid value %d: error %v does not wrap wire.ErrInvalid"), Id("i"), Err()),
			),
			If(String().Call(Id("out")).Op("!=").Lit("keep")).Block(
				Id("t").Dot("Errorf").Call(Lit("invalid value %d: dst changed to %q"), Id("i"), Id("out")),
			),
		),
	)
	f.Func().Id("Test" + name + "RejectsMalformed").Params(testingT()).Block(
		For(List(Id("i"), Id("b")).Op(":=").Range().Id("malformed"+name).Call()).Block(
			List(Id("_"), Err()).Op(":=").Id("Decode"+name).Call(Id("b")),
			If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
				Id("t").Dot("Errorf").Call(Lit("malformed input %d (%x): error %v does not wrap wire.ErrCorrupt"), Id("i"), Id("b"), Err()),
			).Else().If(Op("!").Qual("strings", "Contains").Call(Err().Dot("Error").Call(), Lit(name))).Block(
				Id("t").Dot("Errorf").Call(Lit("malformed input %d: error %q does not name %s"), Id("i"), Err(), Lit(name)),
			),
		),
	)
	f.Commentf("Fuzz%s: arbitrary bytes never panic; the fast path and the Reader", name)
	f.Comment("path agree; whatever decodes re-encodes to exactly the same bytes;")
	f.Comment("everything else fails with wire.ErrCorrupt.")
	f.Func().Id("Fuzz"+name).Params(Id("f").Op("*").Qual("testing", "F")).Block(
		For(List(Id("_"), Id("v")).Op(":=").Range().Id("examples"+name).Call()).Block(
			List(Id("b"), Err()).Op(":=").Id("Encode"+name).Call(Id("v")),
			If(Err().Op("!=").Nil()).Block(Id("f").Dot("Fatal").Call(Err())),
			Id("f").Dot("Add").Call(Id("b")),
		),
		For(List(Id("_"), Id("b")).Op(":=").Range().Id("malformed"+name).Call()).Block(Id("f").Dot("Add").Call(Id("b"))),
		List(Id("held"), Err()).Op(":=").Id("Encode"+name).Call(Id("examples"+name).Call().Index(Lit(0))),
		If(Err().Op("!=").Nil()).Block(Id("f").Dot("Fatal").Call(Err())),
		Id("f").Dot("Fuzz").Call(Func().Params(testingT(), Id("b").Index().Byte()).Block(
			Id("agree"+name).Call(Id("t"), Id("held"), Id("b")),
			List(Id("v"), Err()).Op(":=").Id("Decode"+name).Call(Id("b")),
			If(Err().Op("!=").Nil()).Block(
				If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
					Id("t").Dot("Fatalf").Call(Lit("error %v does not wrap wire.ErrCorrupt"), Err()),
				),
				Return(),
			),
			List(Id("again"), Err()).Op(":=").Id("Encode"+name).Call(Id("v")),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("decoded value does not re-encode: %v"), Err())),
			If(Op("!").Qual("bytes", "Equal").Call(Id("again"), Id("b"))).Block(
				Id("t").Dot("Fatalf").Call(Lit("re-encoding differs:\n got %x\nwant %x"), Id("again"), Id("b")),
			),
		)),
	)
	f.Commentf("Benchmark%s encodes and decodes the example with the largest encoding.", name)
	f.Func().Id("Benchmark"+name).Params(Id("b").Op("*").Qual("testing", "B")).Block(
		Var().Id("v").Id(name),
		Var().Id("enc").Index().Byte(),
		For(List(Id("_"), Id("x")).Op(":=").Range().Id("examples"+name).Call()).Block(
			List(Id("e"), Err()).Op(":=").Id("Encode"+name).Call(Id("x")),
			If(Err().Op("!=").Nil()).Block(Id("b").Dot("Fatal").Call(Err())),
			If(Len(Id("e")).Op(">").Len(Id("enc"))).Block(List(Id("v"), Id("enc")).Op("=").List(Id("x"), Id("e"))),
		),
		Id("buf").Op(":=").Make(Index().Byte(), Lit(0), Len(Id("enc"))),
		Id("b").Dot("Run").Call(Lit("encode"), Func().Params(Id("b").Op("*").Qual("testing", "B")).Block(
			Id("b").Dot("ReportAllocs").Call(),
			Id("b").Dot("SetBytes").Call(Int64().Call(Len(Id("enc")))),
			For(Id("b").Dot("Loop").Call()).Block(
				List(Id("buf"), Id("_")).Op("=").Id("Append"+name).Call(Id("buf").Index(Empty(), Lit(0)), Id("v")),
			),
		)),
		Id("b").Dot("Run").Call(Lit("decode"), Func().Params(Id("b").Op("*").Qual("testing", "B")).Block(
			Id("b").Dot("ReportAllocs").Call(),
			Id("b").Dot("SetBytes").Call(Int64().Call(Len(Id("enc")))),
			For(Id("b").Dot("Loop").Call()).Block(
				If(List(Id("_"), Err()).Op(":=").Id("Decode"+name).Call(Id("enc")), Err().Op("!=").Nil()).Block(Id("b").Dot("Fatal").Call(Err())),
			),
		)),
	)
}

// forEachBreakage calls fn for each way to break a typical example of d:
// a struct record's own fields, or each variant's fields of a union record.
func forEachBreakage(d *decl, fn func(variantIdx int, b breakage, base Code)) {
	if d.Kind == kindUnion {
		for i, v := range d.Variants {
			for _, b := range breakages(v.Type, "v") {
				fn(i, b, Op("&").Add(exampleStruct(v.Type, true, i)))
			}
		}
		return
	}
	for _, b := range breakages(d, "v") {
		fn(0, b, Id("examples"+d.Name).Call().Index(Lit(1)))
	}
}
