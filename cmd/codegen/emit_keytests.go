package main

import (
	. "github.com/dave/jennifer/jen"
)

// emitKeyTests writes keys_test.go: per key class a round trip through
// the constructor, AppendKey, Parse and ParseKey, malformed inputs,
// invalid fields, a fuzz target and benchmarks; the class ranges; the
// identities' bounds; partition unions' tuple round trip and order.
func emitKeyTests(f *File, s *schema) {
	for _, d := range s.keys() {
		emitKeyTest(f, d)
	}
	f.Func().Id("TestClassRangesHoldOnlyTheirClass").Params(testingT()).BlockFunc(func(g *Group) {
		g.Var().Id("keys").Index().Id("ParsedKey")
		for _, d := range s.keys() {
			g.For(List(Id("_"), Id("k")).Op(":=").Range().Id("examples" + d.Name).Call()).Block(
				Id("keys").Op("=").Append(Id("keys"), Id("k")),
			)
		}
		g.For(List(Id("_"), Id("k")).Op(":=").Range().Id("keys")).Block(
			List(Id("b"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Nil()),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err())),
			For(List(Id("_"), Id("other")).Op(":=").Range().Id("keys")).Block(
				List(Id("start"), Id("end")).Op(":=").Id("ClassRange").Call(Id("other").Dot("Tag").Call()),
				Id("in").Op(":=").Qual("bytes", "Compare").Call(Id("b"), Id("start")).Op(">=").Lit(0).Op("&&").Qual("bytes", "Compare").Call(Id("b"), Id("end")).Op("<").Lit(0),
				If(Id("in").Op("!=").Parens(Id("other").Dot("Tag").Call().Op("==").Id("k").Dot("Tag").Call())).Block(
					Id("t").Dot("Errorf").Call(Lit("key %x of class %d in range of class %d: %v"), Id("b"), Id("k").Dot("Tag").Call(), Id("other").Dot("Tag").Call(), Id("in")),
				),
			),
		)
	})
	for _, d := range s.Decls {
		if d.Kind == kindIdentity {
			emitIdentityTest(f, d)
		}
		if d.Kind == kindEnum {
			emitEnumTest(f, d)
		}
		if d.Kind == kindUnion && d.Partition {
			emitPartitionTest(f, d)
		}
	}
}

func emitKeyTest(f *File, d *decl) {
	name := d.Name
	ctorArgs := []Code{Nil()}
	for _, fl := range d.Fields {
		ctorArgs = append(ctorArgs, Id("k").Dot(fl.Name))
	}
	f.Func().Id("Test" + name + "RoundTrip").Params(testingT()).Block(
		For(List(Id("i"), Id("k")).Op(":=").Range().Id("examples" + name).Call()).BlockFunc(func(g *Group) {
			g.List(Id("b"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Nil())
			g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("example %d: %v"), Id("i"), Err()))
			if keyFallible(d) {
				g.List(Id("viaCtor"), Err()).Op(":=").Id("Append" + name).Call(ctorArgs...)
				g.If(Err().Op("!=").Nil().Op("||").Op("!").Qual("bytes", "Equal").Call(Id("viaCtor"), Id("b"))).Block(
					Id("t").Dot("Errorf").Call(Lit("example %d: constructor gives %x (%v), AppendKey %x"), Id("i"), Id("viaCtor"), Err(), Id("b")),
				)
			} else {
				g.If(Id("viaCtor").Op(":=").Id("Append"+name).Call(ctorArgs...), Op("!").Qual("bytes", "Equal").Call(Id("viaCtor"), Id("b"))).Block(
					Id("t").Dot("Errorf").Call(Lit("example %d: constructor gives %x, AppendKey %x"), Id("i"), Id("viaCtor"), Id("b")),
				)
			}
			g.List(Id("got"), Err()).Op(":=").Id("Parse" + name).Call(Id("b"))
			g.If(Err().Op("!=").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("got"), Id("k"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d: Parse%s(%x) = %+v, %v; want %+v"), Id("i"), Lit(name), Id("b"), Id("got"), Err(), Id("k")),
			)
			g.List(Id("any"), Err()).Op(":=").Id("ParseKey").Call(Id("b"))
			g.If(Err().Op("!=").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("any"), Id("k"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d: ParseKey(%x) = %+v, %v; want %+v"), Id("i"), Id("b"), Id("any"), Err(), Id("k")),
			)
		}),
	)
	f.Commentf("malformed%s returns bytes that must not parse as %s.", name, article(name, false))
	f.Func().Id("malformed"+name).Params().Index().Index().Byte().Block(
		Var().Id("out").Index().Index().Byte(),
		Id("tagLen").Op(":=").Len(Qual(tuplePkg, "AppendUint").Call(Nil(), Uint64().Call(Id("Tag"+name)))),
		For(List(Id("_"), Id("k")).Op(":=").Range().Id("examples"+name).Call()).Block(
			List(Id("b"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Nil()),
			If(Err().Op("!=").Nil()).Block(Panic(Err())),
			Id("out").Op("=").Append(Id("out"),
				Id("b").Index(Empty(), Len(Id("b")).Op("-").Lit(1)),
				Append(Qual("bytes", "Clone").Call(Id("b")), Lit(0)),
				Append(Qual(tuplePkg, "AppendUint").Call(Nil(), Uint64().Call(Id("Tag"+name)).Op("+").Lit(1000)), Id("b").Index(Id("tagLen"), Empty()).Op("...")),
			),
		),
		// the unchecked encodings of names only gen can build invalid
		BlockFunc(func(g *Group) {
			for _, b := range breakages(d, "k") {
				if !b.decodeOnly {
					continue
				}
				g.BlockFunc(func(g *Group) {
					g.Id("k").Op(":=").Id("examples" + name).Call().Index(Lit(1))
					g.Add(b.change)
					g.Id("out").Op("=").Append(Id("out"), Id("append"+name).Call(Nil(), Op("&").Id("k")))
				})
			}
		}),
		Return(Append(Id("out"), Index().Byte().Values(), Index().Byte().Values(Lit(0xff)))),
	)
	f.Func().Id("Test" + name + "RejectsMalformed").Params(testingT()).Block(
		For(List(Id("i"), Id("b")).Op(":=").Range().Id("malformed" + name).Call()).Block(
			If(List(Id("_"), Err()).Op(":=").Id("Parse"+name).Call(Id("b")), Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
				Id("t").Dot("Errorf").Call(Lit("malformed key %d (%x): error %v does not wrap wire.ErrCorrupt"), Id("i"), Id("b"), Err()),
			),
		),
	)
	if bs := breakages(d, "k"); len(bs) > 0 {
		f.Func().Id("Test" + name + "RejectsInvalid").Params(testingT()).BlockFunc(func(g *Group) {
			for _, b := range bs {
				if b.decodeOnly {
					continue
				}
				g.BlockFunc(func(g *Group) {
					g.Id("k").Op(":=").Id("examples" + name).Call().Index(Lit(1))
					g.Add(b.change)
					g.List(Id("out"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Index().Byte().Call(Lit("keep")))
					g.If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrInvalid")).Op("||").String().Call(Id("out")).Op("!=").Lit("keep")).Block(
						Id("t").Dot("Errorf").Call(Lit(b.what+": got %q, %v; want dst unchanged and wire.ErrInvalid"), Id("out"), Err()),
					)
				})
			}
		})
	}
	f.Commentf("Fuzz%s: arbitrary bytes never panic; whatever parses re-encodes to", name)
	f.Comment("exactly the same bytes; everything else fails with wire.ErrCorrupt.")
	f.Func().Id("Fuzz"+name).Params(Id("f").Op("*").Qual("testing", "F")).Block(
		For(List(Id("_"), Id("k")).Op(":=").Range().Id("examples"+name).Call()).Block(
			List(Id("b"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Nil()),
			If(Err().Op("!=").Nil()).Block(Id("f").Dot("Fatal").Call(Err())),
			Id("f").Dot("Add").Call(Id("b")),
		),
		For(List(Id("_"), Id("b")).Op(":=").Range().Id("malformed"+name).Call()).Block(Id("f").Dot("Add").Call(Id("b"))),
		Id("f").Dot("Fuzz").Call(Func().Params(testingT(), Id("b").Index().Byte()).Block(
			List(Id("k"), Err()).Op(":=").Id("Parse"+name).Call(Id("b")),
			If(Err().Op("!=").Nil()).Block(
				If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
					Id("t").Dot("Fatalf").Call(Lit("error %v does not wrap wire.ErrCorrupt"), Err()),
				),
				Return(),
			),
			List(Id("again"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Nil()),
			If(Err().Op("!=").Nil().Op("||").Op("!").Qual("bytes", "Equal").Call(Id("again"), Id("b"))).Block(
				Id("t").Dot("Fatalf").Call(Lit("re-encoding gives %x, %v; want %x"), Id("again"), Err(), Id("b")),
			),
		)),
	)
	f.Func().Id("Benchmark"+name).Params(Id("b").Op("*").Qual("testing", "B")).Block(
		Id("examples").Op(":=").Id("examples"+name).Call(),
		Id("k").Op(":=").Id("examples").Index(Len(Id("examples")).Op("-").Lit(1)),
		List(Id("enc"), Err()).Op(":=").Id("k").Dot("AppendKey").Call(Nil()),
		If(Err().Op("!=").Nil()).Block(Id("b").Dot("Fatal").Call(Err())),
		Id("buf").Op(":=").Make(Index().Byte(), Lit(0), Len(Id("enc"))),
		Id("b").Dot("Run").Call(Lit("append"), Func().Params(Id("b").Op("*").Qual("testing", "B")).BlockFunc(func(g *Group) {
			g.Id("b").Dot("ReportAllocs").Call()
			if keyFallible(d) {
				g.For(Id("b").Dot("Loop").Call()).Block(
					List(Id("buf"), Id("_")).Op("=").Id("Append" + name).Call(append([]Code{Id("buf").Index(Empty(), Lit(0))}, ctorArgs[1:]...)...),
				)
			} else {
				g.For(Id("b").Dot("Loop").Call()).Block(
					Id("buf").Op("=").Id("Append" + name).Call(append([]Code{Id("buf").Index(Empty(), Lit(0))}, ctorArgs[1:]...)...),
				)
			}
		})),
		Id("b").Dot("Run").Call(Lit("parse"), Func().Params(Id("b").Op("*").Qual("testing", "B")).Block(
			Id("b").Dot("ReportAllocs").Call(),
			For(Id("b").Dot("Loop").Call()).Block(
				If(List(Id("_"), Err()).Op(":=").Id("Parse"+name).Call(Id("enc")), Err().Op("!=").Nil()).Block(Id("b").Dot("Fatal").Call(Err())),
			),
		)),
	)
}

func emitIdentityTest(f *File, d *decl) {
	type tc struct {
		in string
		ok bool
	}
	cases := []tc{
		{repeat("a", d.Min), true},
		{repeat("a", d.Max), true},
		{repeat("a", d.Max+1), false},
		{"\xff", false},
	}
	if d.Min > 0 {
		cases = append(cases, tc{repeat("a", d.Min-1), false})
	}
	if d.Max >= 3 {
		cases = append(cases, tc{"a\x00b", false}, tc{"a\nb", false}, tc{"a\u0085b", false}, tc{"é-ü", true})
	}
	var rows []Code
	for _, c := range cases {
		rows = append(rows, Values(Lit(c.in), Lit(c.ok)))
	}
	f.Func().Id("Test" + d.Name + "Bounds").Params(testingT()).Block(
		For(List(Id("_"), Id("c")).Op(":=").Range().Index().Struct(Id("in").String(), Id("ok").Bool()).Values(rows...)).Block(
			List(Id("v"), Err()).Op(":=").Id("New"+d.Name).Call(Id("c").Dot("in")),
			If(Parens(Err().Op("==").Nil()).Op("!=").Id("c").Dot("ok").Op("||").Err().Op("!=").Nil().Op("&&").Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrInvalid"))).Block(
				Id("t").Dot("Errorf").Call(Lit("New"+d.Name+"(%q) error %v, want ok=%v"), Id("c").Dot("in"), Err(), Id("c").Dot("ok")),
			),
			If(Err().Op("==").Nil().Op("&&").Id("v").Dot("String").Call().Op("!=").Id("c").Dot("in")).Block(
				Id("t").Dot("Errorf").Call(Lit("New"+d.Name+"(%q).String() = %q"), Id("c").Dot("in"), Id("v").Dot("String").Call()),
			),
			Id("u").Op(":=").Id("Must"+d.Name).Call(Lit(repeat("k", max(d.Min, 1)))),
			Id("before").Op(":=").Id("u"),
			Err().Op("=").Id("u").Dot("UnmarshalText").Call(Index().Byte().Call(Id("c").Dot("in"))),
			If(Parens(Err().Op("==").Nil()).Op("!=").Id("c").Dot("ok").Op("||").Err().Op("==").Nil().Op("&&").Id("u").Op("!=").Id("v").Op("||").Err().Op("!=").Nil().Op("&&").Id("u").Op("!=").Id("before")).Block(
				Id("t").Dot("Errorf").Call(Lit("UnmarshalText(%q) gave %q, %v; want ok=%v and no change on error"), Id("c").Dot("in"), Id("u"), Err(), Id("c").Dot("ok")),
			),
		),
	)
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func emitEnumTest(f *File, d *decl) {
	f.Func().Id("Test" + d.Name + "Values").Params(testingT()).BlockFunc(func(g *Group) {
		for _, v := range d.Values {
			g.If(Op("!").Id(v.Name).Dot("Valid").Call().Op("||").Id(v.Name).Dot("String").Call().Op("!=").Lit(v.Short)).Block(
				Id("t").Dot("Errorf").Call(Lit(v.Name+" valid=%v string=%q"), Id(v.Name).Dot("Valid").Call(), Id(v.Name).Dot("String").Call()),
			)
		}
		g.If(Id(d.Name).Call(Lit(int(badEnum(d)))).Dot("Valid").Call()).Block(
			Id("t").Dot("Errorf").Call(Lit("undeclared value %d is valid"), Lit(int(badEnum(d)))),
		)
	})
}

func emitPartitionTest(f *File, d *decl) {
	name := d.Name
	f.Func().Id("Test"+name+"TupleRoundTripAndOrder").Params(testingT()).Block(
		Id("examples").Op(":=").Id("examples"+name).Call(),
		Id("encoded").Op(":=").Make(Index().Index().Byte(), Len(Id("examples"))),
		For(List(Id("i"), Id("p")).Op(":=").Range().Id("examples")).Block(
			List(Id("b"), Err()).Op(":=").Id("p").Dot("AppendTuple").Call(Nil()),
			If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("example %d: %v"), Id("i"), Err())),
			List(Id("got"), Err()).Op(":=").Id("Parse"+name).Call(Id("b")),
			If(Err().Op("!=").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("got"), Id("p"))).Block(
				Id("t").Dot("Errorf").Call(Lit("example %d: Parse"+name+"(%x) = %v, %v; want %v"), Id("i"), Id("b"), Id("got"), Err(), Id("p")),
			),
			Id("encoded").Index(Id("i")).Op("=").Id("b"),
		),
		For(Id("i").Op(":=").Range().Id("examples")).Block(
			For(Id("j").Op(":=").Range().Id("examples")).Block(
				List(Id("want"), Id("got")).Op(":=").List(Qual("bytes", "Compare").Call(Id("encoded").Index(Id("i")), Id("encoded").Index(Id("j"))), Id("Compare"+name).Call(Id("examples").Index(Id("i")), Id("examples").Index(Id("j")))),
				If(Id("want").Op("!=").Id("got")).Block(
					Id("t").Dot("Errorf").Call(Lit("Compare"+name+"(%v, %v) = %d, tuple order %d"), Id("examples").Index(Id("i")), Id("examples").Index(Id("j")), Id("got"), Id("want")),
				),
			),
		),
		For(List(Id("_"), Id("p")).Op(":=").Range().Id("examples")).Block(
			If(List(Id("_"), Err()).Op(":=").Id("Parse"+name).Call(Append(Id("must").Call(Id("p").Dot("AppendTuple").Call(Nil())), Lit(0))), Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
				Id("t").Dot("Errorf").Call(Lit("trailing byte after %v: error %v"), Id("p"), Err()),
			),
		),
		Comment("The same partition under another namespace is another schema's: rejected,"),
		Comment("naming the namespace found."),
		Id("other").Op(":=").Id("SchemaNamespace").Op("+").Lit("_other"),
		For(List(Id("_"), Id("p")).Op(":=").Range().Id("examples")).Block(
			Id("b").Op(":=").Append(Qual(tuplePkg, "AppendString").Call(Nil(), Id("other")), Id("must").Call(Id("p").Dot("AppendTuple").Call(Nil())).Index(Len(Id("namespaceTuple")), Empty()).Op("...")),
			If(List(Id("_"), Err()).Op(":=").Id("Parse"+name).Call(Id("b")), Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt")).Op("||").Op("!").Qual("strings", "Contains").Call(Err().Dot("Error").Call(), Qual("strconv", "Quote").Call(Id("other")))).Block(
				Id("t").Dot("Errorf").Call(Lit("%v under namespace %q: error %v"), Id("p"), Id("other"), Err()),
			),
		),
	)
	f.Func().Id("must").Params(Id("b").Index().Byte(), Err().Error()).Index().Byte().Block(
		If(Err().Op("!=").Nil()).Block(Panic(Err())),
		Return(Id("b")),
	)
	f.Func().Id("FuzzParse"+name).Params(Id("f").Op("*").Qual("testing", "F")).Block(
		For(List(Id("_"), Id("p")).Op(":=").Range().Id("examples"+name).Call()).Block(
			Id("f").Dot("Add").Call(Id("must").Call(Id("p").Dot("AppendTuple").Call(Nil()))),
		),
		Id("f").Dot("Fuzz").Call(Func().Params(testingT(), Id("b").Index().Byte()).Block(
			List(Id("p"), Err()).Op(":=").Id("Parse"+name).Call(Id("b")),
			If(Err().Op("!=").Nil()).Block(
				If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
					Id("t").Dot("Fatalf").Call(Lit("error %v does not wrap wire.ErrCorrupt"), Err()),
				),
				Return(),
			),
			List(Id("again"), Err()).Op(":=").Id("p").Dot("AppendTuple").Call(Nil()),
			If(Err().Op("!=").Nil().Op("||").Op("!").Qual("bytes", "Equal").Call(Id("again"), Id("b"))).Block(
				Id("t").Dot("Fatalf").Call(Lit("re-encoding gives %x, %v; want %x"), Id("again"), Err(), Id("b")),
			),
		)),
	)
}
