package main

import (
	"strconv"

	. "github.com/dave/jennifer/jen"
)

// The generated tests of value families (values_test.go). The owner's
// conversions live in its own package, so the tests convert with
// testKVersions, which records what each conversion was given and returns
// a prepared value of the version it converts to: they hold the generated
// plumbing (which version decodes, which conversions run in which order,
// what is encoded at each format, which error a byte gets) to account,
// and the owner tests its conversions. For every family: the round trip
// of every version, the upgrade chain, Encode at every format, the errors
// of newer and unknown versions; for a family of more than one version a
// fuzz target and a benchmark of decoding each version.

// emitValueTests writes values_test.go.
func emitValueTests(f *File, s *schema) {
	gated := gatedDecls(s)
	for _, d := range s.keys() {
		if len(d.Family) == 0 {
			continue
		}
		emitTestVersions(f, d)
		emitFamilyRoundTrip(f, d)
		emitFamilyEncode(f, d, gated)
		emitFamilyErrors(f, d)
		if len(d.Family) > 1 {
			emitFamilyFuzz(f, d)
			emitFamilyBench(f, d)
		}
	}
}

func testVersions(d *decl) string { return "test" + d.Name + "Versions" }

// gotField and outField name what testKVersions records of conversion
// name and returns from it.
func gotField(name string) string { return "got" + name }

func outField(name string) string { return "out" + name }

// typical is the typical example of record r: its examples' last.
func typical(r *decl) *Statement {
	return Func().Params().Id(r.Name).Block(
		Id("e").Op(":=").Id("examples"+r.Name).Call(),
		Return(Id("e").Index(Len(Id("e")).Op("-").Lit(1))),
	).Call()
}

// emitTestVersions writes testKVersions and its constructor.
func emitTestVersions(f *File, d *decl) {
	fam := d.Family
	name := testVersions(d)
	f.Commentf("%s implements %sVersions for the generated tests: each", name, d.Name)
	f.Comment("conversion counts its call, records the value it was given and returns")
	f.Comment("the typical example of the version it converts to, or err when set.")
	f.Type().Id(name).StructFunc(func(g *Group) {
		g.Id("err").Error()
		g.Id("calls").Int()
		for i := range fam {
			if i+1 < len(fam) {
				g.Id(gotField(upgradeName(fam, i))).Id(fam[i].Name)
				g.Id(outField(upgradeName(fam, i))).Id(fam[i+1].Name)
			}
			if hasDowngrade(fam, i) {
				g.Id(gotField(downgradeName(fam, i))).Id(fam[i].Name)
				g.Id(outField(downgradeName(fam, i))).Id(fam[i-1].Name)
			}
		}
	})
	f.Func().Id("new" + upperFirst(name)).Params().Op("*").Id(name).Block(
		Return(Op("&").Id(name).Values(DictFunc(func(dict Dict) {
			for i := range fam {
				if i+1 < len(fam) {
					dict[Id(outField(upgradeName(fam, i)))] = typical(fam[i+1])
				}
				if hasDowngrade(fam, i) {
					dict[Id(outField(downgradeName(fam, i)))] = typical(fam[i-1])
				}
			}
		}))),
	)
	conv := func(method string, from, to *decl) {
		f.Func().Params(Id("x").Op("*").Id(name)).Id(method).Params(Id("v").Id(from.Name)).Params(Id(to.Name), Error()).Block(
			Id("x").Dot("calls").Op("++"),
			Id("x").Dot(gotField(method)).Op("=").Id("v"),
			If(Id("x").Dot("err").Op("!=").Nil()).Block(
				Var().Id("zero").Id(to.Name),
				Return(Id("zero"), Id("x").Dot("err")),
			),
			Return(Id("x").Dot(outField(method)), Nil()),
		)
	}
	for i := range fam {
		if i+1 < len(fam) {
			conv(upgradeName(fam, i), fam[i], fam[i+1])
		}
		if hasDowngrade(fam, i) {
			conv(downgradeName(fam, i), fam[i], fam[i-1])
		}
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// emitFamilyRoundTrip writes TestKValuesRoundTrip: every example of the
// newest version decodes as itself and encodes back to its bytes, with no
// conversion; every example of an older version is decoded as its own
// version and upgraded one version at a time to the newest.
func emitFamilyRoundTrip(f *File, d *decl) {
	fam := d.Family
	newest := d.newest()
	k := d.Name
	f.Commentf("Test%sValuesRoundTrip: every version of the family decodes; the", k)
	f.Comment("newest as itself, re-encoding to its bytes, an older one upgraded one")
	f.Comment("version at a time, each conversion given what the one before returned.")
	f.Func().Id("Test" + k + "ValuesRoundTrip").Params(testingT()).BlockFunc(func(g *Group) {
		g.Id("vs").Op(":=").Id("new" + upperFirst(testVersions(d))).Call()
		g.Id("x").Op(":=").Id("New" + k + "Values").Call(Id("vs"))
		for i, r := range fam {
			g.For(List(Id("i"), Id("v")).Op(":=").Range().Id("examples" + r.Name).Call()).BlockFunc(func(g *Group) {
				g.Id("vs").Dot("calls").Op("=").Lit(0)
				g.List(Id("b"), Err()).Op(":=").Id("Encode" + r.Name).Call(Id("v"))
				g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit(r.Name+" example %d: %v"), Id("i"), Err()))
				g.If(List(Id("ver"), Err()).Op(":=").Id("VersionOf"+k+"Value").Call(Id("b")), Err().Op("!=").Nil().Op("||").Id("ver").Op("!=").Id("Version"+r.Name)).Block(
					Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: VersionOf"+k+"Value = %d, %v; want %d"), Id("i"), Id("ver"), Err(), Id("Version"+r.Name)),
				)
				g.List(Id("got"), Err()).Op(":=").Id("x").Dot("Decode").Call(Id("b"))
				g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit(r.Name+" example %d: Decode: %v"), Id("i"), Err()))
				g.Var().Id("into").Id(newest.Name)
				g.If(Err().Op(":=").Id("x").Dot("DecodeInto").Call(Id("b"), Op("&").Id("into")), Err().Op("!=").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("into"), Id("got"))).Block(
					Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: DecodeInto gives %+v, %v; Decode %+v"), Id("i"), Id("into"), Err(), Id("got")),
				)
				if i == len(fam)-1 {
					g.If(Op("!").Qual("reflect", "DeepEqual").Call(Id("got"), Id("v"))).Block(
						Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: decoded %+v, want %+v"), Id("i"), Id("got"), Id("v")),
					)
					g.If(List(Id("again"), Err()).Op(":=").Id("x").Dot("Encode").Call(Id("got"), Id("SchemaFormat")), Err().Op("!=").Nil().Op("||").Op("!").Qual("bytes", "Equal").Call(Id("again"), Id("b"))).Block(
						Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: re-encoded as %x (%v), want %x"), Id("i"), Id("again"), Err(), Id("b")),
					)
					g.If(Id("vs").Dot("calls").Op("!=").Lit(0)).Block(
						Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: %d conversions ran; the newest version needs none"), Id("i"), Id("vs").Dot("calls")),
					)
					return
				}
				g.Comment("each conversion is given what the one before returned")
				g.List(Id("old"), Err()).Op(":=").Id("Decode" + r.Name).Call(Id("b"))
				g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err()))
				prev := Id("old")
				for j := i; j < len(fam)-1; j++ {
					up := upgradeName(fam, j)
					g.If(Op("!").Qual("reflect", "DeepEqual").Call(Id("vs").Dot(gotField(up)), prev.Clone())).Block(
						Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: "+up+" was given %+v, want %+v"), Id("i"), Id("vs").Dot(gotField(up)), prev.Clone()),
					)
					prev = Id("vs").Dot(outField(up))
				}
				g.If(Op("!").Qual("reflect", "DeepEqual").Call(Id("got"), prev.Clone())).Block(
					Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: decoded %+v, want the last upgrade's %+v"), Id("i"), Id("got"), prev.Clone()),
				)
				g.If(Id("vs").Dot("calls").Op("!=").Lit(2 * (len(fam) - 1 - i))).Block(
					Id("t").Dot("Errorf").Call(Lit(r.Name+" example %d: %d conversions ran, want %d (Decode and DecodeInto)"), Id("i"), Id("vs").Dot("calls"), Lit(2*(len(fam)-1-i))),
				)
			})
		}
	})
}

// emitFamilyEncode writes TestKValuesEncodesPerFormat: at each format
// Encode writes the newest version it allows, downgraded one version at a
// time; below the first version's format it fails with wire.ErrFormatTooOld;
// a failing downgrade's error is returned.
func emitFamilyEncode(f *File, d *decl, gated map[*decl]bool) {
	fam := d.Family
	newest := d.newest()
	k := d.Name
	f.Commentf("Test%sValuesEncodesPerFormat: at each store format Encode writes the", k)
	f.Comment("newest version the format allows, downgraded one version at a time, and")
	f.Comment("below the first version's format it refuses with wire.ErrFormatTooOld.")
	f.Func().Id("Test" + k + "ValuesEncodesPerFormat").Params(testingT()).BlockFunc(func(g *Group) {
		g.Id("vs").Op(":=").Id("new" + upperFirst(testVersions(d))).Call()
		g.Id("x").Op(":=").Id("New" + k + "Values").Call(Id("vs"))
		g.Id("v").Op(":=").Add(typical(newest))
		// one case per version that is the newest allowed at its format
		for i := len(fam) - 1; i >= 0; i-- {
			r := fam[i]
			if i+1 < len(fam) && fam[i+1].Format == r.Format {
				continue // the newer version of the same format is written
			}
			g.BlockFunc(func(g *Group) {
				g.Comment("at format " + strconv.Itoa(int(r.Format)) + ": " + r.Name)
				g.Id("vs").Dot("calls").Op("=").Lit(0)
				g.List(Id("b"), Id("encErr")).Op(":=").Id("x").Dot("Encode").Call(Id("v"), Id("Format"+r.Name))
				want := Id("v")
				prev := Id("v")
				for j := len(fam) - 1; j > i; j-- {
					down := downgradeName(fam, j)
					g.If(Op("!").Qual("reflect", "DeepEqual").Call(Id("vs").Dot(gotField(down)), prev.Clone())).Block(
						Id("t").Dot("Errorf").Call(Lit(down+" was given %+v, want %+v"), Id("vs").Dot(gotField(down)), prev.Clone()),
					)
					prev = Id("vs").Dot(outField(down))
					want = prev
				}
				g.List(Id("want"), Err()).Op(":=").Id("Encode" + r.Name).Call(want.Clone())
				g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err()))
				if gated[r] {
					// a value holding a variant or enum constant of a
					// newer format is refused, naming the format it needs
					g.If(Id("need").Op(":=").Id("formatOf"+r.Name).Call(recordArgOf(r, want.Clone())), Id("need").Op(">").Id("Format"+r.Name)).Block(
						Var().Id("fe").Op("*").Qual(wirePkg, "FormatError"),
						If(Op("!").Qual("errors", "As").Call(Id("encErr"), Op("&").Id("fe")).Op("||").Id("fe").Dot("Need").Op("!=").Id("need").Op("||").Id("b").Op("!=").Nil()).Block(
							Id("t").Dot("Errorf").Call(Lit("Encode at format %d of a value needing %d: %x, %v; want a *wire.FormatError"), Id("Format"+r.Name), Id("need"), Id("b"), Id("encErr")),
						),
						Return(),
					)
				}
				g.If(Id("encErr").Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("Encode at format %d: %v"), Id("Format"+r.Name), Id("encErr")))
				g.If(Op("!").Qual("bytes", "Equal").Call(Id("b"), Id("want"))).Block(
					Id("t").Dot("Errorf").Call(Lit("Encode at format %d wrote %x, want "+r.Name+" %x"), Id("Format"+r.Name), Id("b"), Id("want")),
				)
				g.If(Id("vs").Dot("calls").Op("!=").Lit(len(fam) - 1 - i)).Block(
					Id("t").Dot("Errorf").Call(Lit("Encode at format %d: %d downgrades ran, want %d"), Id("Format"+r.Name), Id("vs").Dot("calls"), Lit(len(fam)-1-i)),
				)
			})
		}
		g.Comment("a store format above every version's writes the newest")
		g.If(List(Id("b"), Err()).Op(":=").Id("x").Dot("Encode").Call(Id("v"), Id("SchemaFormat").Op("+").Lit(1)), Err().Op("!=").Nil().Op("||").Id("b").Index(Lit(0)).Op("!=").Id("Version"+newest.Name)).Block(
			Id("t").Dot("Errorf").Call(Lit("Encode above every format wrote %x, %v; want "+newest.Name), Id("b"), Err()),
		)
		g.Comment("below the first version's format nothing is allowed")
		g.List(Id("_"), Err()).Op(":=").Id("x").Dot("Encode").Call(Id("v"), Id("Format"+fam[0].Name).Op("-").Lit(1))
		g.Var().Id("fe").Op("*").Qual(wirePkg, "FormatError")
		g.If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrFormatTooOld")).Op("||").Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrInvalid")).Op("||").Op("!").Qual("errors", "As").Call(Err(), Op("&").Id("fe")).Op("||").Id("fe").Dot("Need").Op("!=").Id("Format" + fam[0].Name)).Block(
			Id("t").Dot("Errorf").Call(Lit("Encode below format %d: %v; want a *wire.FormatError needing it"), Id("Format"+fam[0].Name), Err()),
		)
		if hasDowngrade(fam, len(fam)-1) {
			g.Comment("a downgrade's error is returned")
			g.Id("vs").Dot("err").Op("=").Qual("errors", "New").Call(Lit("downgrade refused"))
			g.If(List(Id("_"), Err()).Op(":=").Id("x").Dot("Encode").Call(Id("v"), Id("Format"+fam[0].Name)), Op("!").Qual("errors", "Is").Call(Err(), Id("vs").Dot("err"))).Block(
				Id("t").Dot("Errorf").Call(Lit("Encode with a failing downgrade: %v; want its error"), Err()),
			)
		}
	})
}

// emitFamilyErrors writes TestKValuesRefusesUnknownVersions: a version
// byte above the family's is wire.ErrNewerVersion, as a
// *wire.VersionError, and not wire.ErrCorrupt; empty bytes, version 0 and
// every byte below the newest the family does not declare are
// wire.ErrCorrupt; a failing upgrade's error is returned; a nil
// KVersions panics.
func emitFamilyErrors(f *File, d *decl) {
	fam := d.Family
	newest := d.newest()
	k := d.Name
	last := int(d.lastVersion())
	declared := map[int]bool{}
	for _, v := range fam {
		declared[int(v.Version)] = true
	}
	f.Commentf("Test%sValuesRefusesUnknownVersions: a version above the family's is", k)
	f.Comment("wire.ErrNewerVersion (a *wire.VersionError), not wire.ErrCorrupt; empty")
	f.Comment("bytes, version 0 and a version the family does not declare below it are")
	f.Comment("wire.ErrCorrupt; an upgrade's error is returned; a nil conversion panics.")
	f.Func().Id("Test" + k + "ValuesRefusesUnknownVersions").Params(testingT()).BlockFunc(func(g *Group) {
		g.Id("vs").Op(":=").Id("new" + upperFirst(testVersions(d))).Call()
		g.Id("x").Op(":=").Id("New" + k + "Values").Call(Id("vs"))
		g.List(Id("valid"), Err()).Op(":=").Id("Encode" + newest.Name).Call(Id("examples" + newest.Name).Call().Index(Lit(0)))
		g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err()))
		g.Id("with").Op(":=").Func().Params(Id("ver").Byte()).Index().Byte().Block(
			Id("b").Op(":=").Qual("bytes", "Clone").Call(Id("valid")),
			Id("b").Index(Lit(0)).Op("=").Id("ver"),
			Return(Id("b")),
		)
		g.Id("decoders").Op(":=").Map(String()).Func().Params(Index().Byte()).Error().Values(Dict{
			Lit("Decode"): Func().Params(Id("b").Index().Byte()).Error().Block(
				List(Id("_"), Err()).Op(":=").Id("x").Dot("Decode").Call(Id("b")),
				Return(Err()),
			),
			Lit("DecodeInto"): Func().Params(Id("b").Index().Byte()).Error().Block(
				Id("v").Op(":=").Add(typical(newest)),
				Err().Op(":=").Id("x").Dot("DecodeInto").Call(Id("b"), Op("&").Id("v")),
				Var().Id("zero").Id(newest.Name),
				If(Err().Op("!=").Nil().Op("&&").Op("!").Qual("reflect", "DeepEqual").Call(Id("v"), Id("zero"))).Block(
					Return(Qual("fmt", "Errorf").Call(Lit("a failed DecodeInto left %+v (%v)"), Id("v"), Err())),
				),
				Return(Err()),
			),
			Lit("VersionOf" + k + "Value"): Func().Params(Id("b").Index().Byte()).Error().Block(
				List(Id("_"), Err()).Op(":=").Id("VersionOf"+k+"Value").Call(Id("b")),
				Return(Err()),
			),
		})
		if last < 255 {
			g.Comment("versions above the family's: written by a newer schema")
			g.For(List(Id("_"), Id("ver")).Op(":=").Range().Index().Byte().Values(Lit(last+1), Lit(255))).Block(
				For(List(Id("name"), Id("decode")).Op(":=").Range().Id("decoders")).Block(
					Err().Op(":=").Id("decode").Call(Id("with").Call(Id("ver"))),
					Var().Id("ve").Op("*").Qual(wirePkg, "VersionError"),
					If(Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrNewerVersion")).Op("||").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt")).Op("||").Op("!").Qual("errors", "As").Call(Err(), Op("&").Id("ve"))).Block(
						Id("t").Dot("Errorf").Call(Lit("%s of version %d: %v; want a *wire.VersionError, not corrupt"), Id("name"), Id("ver"), Err()),
						Continue(),
					),
					If(Id("ve").Dot("Family").Op("!=").Lit(k).Op("||").Id("ve").Dot("Version").Op("!=").Id("ver").Op("||").Id("ve").Dot("Newest").Op("!=").Id("Version"+newest.Name)).Block(
						Id("t").Dot("Errorf").Call(Lit("%s of version %d: %+v; want family "+k+", newest %d"), Id("name"), Id("ver"), Op("*").Id("ve"), Id("Version"+newest.Name)),
					),
				),
			)
		}
		corrupt := []Code{Index().Byte().Values(), Id("with").Call(Lit(0))}
		for b := 1; b < last; b++ {
			if !declared[b] {
				corrupt = append(corrupt, Id("with").Call(Lit(b)))
			}
		}
		g.Comment("empty, version 0, and versions the family does not declare below its last")
		g.For(List(Id("_"), Id("b")).Op(":=").Range().Index().Index().Byte().Values(corrupt...)).Block(
			For(List(Id("name"), Id("decode")).Op(":=").Range().Id("decoders")).Block(
				If(Err().Op(":=").Id("decode").Call(Id("b")), Op("!").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt")).Op("||").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrNewerVersion"))).Block(
					Id("t").Dot("Errorf").Call(Lit("%s of %x: %v; want wire.ErrCorrupt only"), Id("name"), Id("b"), Err()),
				),
			),
		)
		if len(fam) > 1 {
			g.Comment("an upgrade's error is returned, naming the versions")
			g.Id("vs").Dot("err").Op("=").Qual("errors", "New").Call(Lit("upgrade refused"))
			g.List(Id("old"), Err()).Op(":=").Id("Encode" + fam[0].Name).Call(typical(fam[0]))
			g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatal").Call(Err()))
			g.If(List(Id("_"), Err()).Op(":=").Id("x").Dot("Decode").Call(Id("old")), Op("!").Qual("errors", "Is").Call(Err(), Id("vs").Dot("err")).Op("||").Op("!").Qual("strings", "Contains").Call(Err().Dot("Error").Call(), Lit("upgrade "+fam[0].Name+" to "+fam[1].Name))).Block(
				Id("t").Dot("Errorf").Call(Lit("Decode with a failing upgrade: %v; want its error, naming the versions"), Err()),
			)
		}
		g.Func().Params().Block(
			Defer().Func().Params().Block(
				If(Recover().Op("==").Nil()).Block(Id("t").Dot("Error").Call(Lit("New"+k+"Values(nil) did not panic"))),
			).Call(),
			Id("New"+k+"Values").Call(Nil()),
		).Call()
	})
}

// emitFamilyFuzz writes FuzzKValues: arbitrary bytes never panic and fail
// with exactly one of wire.ErrNewerVersion (for a version above the
// family's) and wire.ErrCorrupt; what decodes re-encodes: a newest-version
// value to the same bytes, an older one, upgraded, as the newest.
func emitFamilyFuzz(f *File, d *decl) {
	fam := d.Family
	newest := d.newest()
	k := d.Name
	last := int(d.lastVersion())
	f.Commentf("Fuzz%sValues: arbitrary bytes never panic; an error wraps exactly one", k)
	f.Comment("of wire.ErrNewerVersion (a version above the family's) and wire.ErrCorrupt;")
	f.Comment("a newest-version value re-encodes to the same bytes, an older one is decoded")
	f.Comment("as its own version, upgraded, and encodes and decodes back as the newest.")
	f.Func().Id("Fuzz" + k + "Values").Params(Id("f").Op("*").Qual("testing", "F")).BlockFunc(func(g *Group) {
		for _, r := range fam {
			g.For(List(Id("_"), Id("v")).Op(":=").Range().Id("examples"+r.Name).Call()).Block(
				List(Id("b"), Err()).Op(":=").Id("Encode"+r.Name).Call(Id("v")),
				If(Err().Op("!=").Nil()).Block(Id("f").Dot("Fatal").Call(Err())),
				Id("f").Dot("Add").Call(Id("b")),
			)
			g.For(List(Id("_"), Id("b")).Op(":=").Range().Id("malformed" + r.Name).Call()).Block(Id("f").Dot("Add").Call(Id("b")))
		}
		if last < 255 {
			g.List(Id("newer"), Err()).Op(":=").Id("Encode" + newest.Name).Call(typical(newest))
			g.If(Err().Op("!=").Nil()).Block(Id("f").Dot("Fatal").Call(Err()))
			g.Id("newer").Index(Lit(0)).Op("=").Lit(last + 1)
			g.Id("f").Dot("Add").Call(Id("newer"))
		}
		g.Id("f").Dot("Fuzz").Call(Func().Params(testingT(), Id("b").Index().Byte()).BlockFunc(func(g *Group) {
			g.Id("vs").Op(":=").Id("new" + upperFirst(testVersions(d))).Call()
			g.Id("x").Op(":=").Id("New" + k + "Values").Call(Id("vs"))
			g.List(Id("v"), Err()).Op(":=").Id("x").Dot("Decode").Call(Id("b"))
			g.List(Id("ver"), Id("verr")).Op(":=").Id("VersionOf" + k + "Value").Call(Id("b"))
			g.If(Err().Op("!=").Nil()).Block(
				Id("newer").Op(":=").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrNewerVersion")),
				If(Id("newer").Op("==").Qual("errors", "Is").Call(Err(), Qual(wirePkg, "ErrCorrupt"))).Block(
					Id("t").Dot("Fatalf").Call(Lit("error %v: want exactly one of wire.ErrNewerVersion and wire.ErrCorrupt"), Err()),
				),
				If(Id("newer").Op("!=").Parens(Len(Id("b")).Op(">").Lit(0).Op("&&").Id("b").Index(Lit(0)).Op(">").Lit(last))).Block(
					Id("t").Dot("Fatalf").Call(Lit("input %x: error %v; newer is a version above %d only"), Id("b"), Err(), Lit(last)),
				),
				If(Id("newer").Op("&&").Op("!").Qual("errors", "Is").Call(Id("verr"), Qual(wirePkg, "ErrNewerVersion"))).Block(
					Id("t").Dot("Fatalf").Call(Lit("Decode says newer (%v), VersionOf"+k+"Value %v"), Err(), Id("verr")),
				),
				Return(),
			)
			g.If(Id("verr").Op("!=").Nil().Op("||").Id("ver").Op("!=").Id("b").Index(Lit(0))).Block(
				Id("t").Dot("Fatalf").Call(Lit("input %x decodes, but VersionOf"+k+"Value = %d, %v"), Id("b"), Id("ver"), Id("verr")),
			)
			g.List(Id("enc"), Err()).Op(":=").Id("x").Dot("Encode").Call(Id("v"), Id("SchemaFormat"))
			g.If(Err().Op("!=").Nil()).Block(Id("t").Dot("Fatalf").Call(Lit("decoded value does not encode: %v"), Err()))
			g.If(Id("ver").Op("==").Id("Version"+newest.Name)).Block(
				If(Op("!").Qual("bytes", "Equal").Call(Id("enc"), Id("b"))).Block(
					Id("t").Dot("Fatalf").Call(Lit("re-encoding differs:\n got %x\nwant %x"), Id("enc"), Id("b")),
				),
				Return(),
			)
			g.Comment("an older version: decoded as itself, then upgraded")
			g.Switch(Id("ver")).BlockFunc(func(g *Group) {
				for i, r := range fam[:len(fam)-1] {
					up := upgradeName(fam, i)
					g.Case(Id("Version"+r.Name)).Block(
						List(Id("old"), Err()).Op(":=").Id("Decode"+r.Name).Call(Id("b")),
						If(Err().Op("!=").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("vs").Dot(gotField(up)), Id("old"))).Block(
							Id("t").Dot("Fatalf").Call(Lit(up+" was given %+v; the bytes decode as %+v (%v)"), Id("vs").Dot(gotField(up)), Id("old"), Err()),
						),
					)
				}
			})
			g.If(List(Id("back"), Err()).Op(":=").Id("Decode"+newest.Name).Call(Id("enc")), Err().Op("!=").Nil().Op("||").Op("!").Qual("reflect", "DeepEqual").Call(Id("back"), Id("v"))).Block(
				Id("t").Dot("Fatalf").Call(Lit("the upgraded value encodes as %x, which decodes as %+v (%v), want %+v"), Id("enc"), Id("back"), Err(), Id("v")),
			)
		}))
	})
}

// emitFamilyBench writes BenchmarkKValues: Decode of the typical example
// of each version, the older ones with their upgrades (testKVersions',
// which return a prepared value: a service's own upgrades cost what they
// do on top).
func emitFamilyBench(f *File, d *decl) {
	k := d.Name
	f.Commentf("Benchmark%sValues decodes the typical example of each version of the", k)
	f.Comment("family through Decode: the newest as it is, an older one with its")
	f.Comment("upgrades (the tests' conversions, which return a prepared value).")
	f.Func().Id("Benchmark" + k + "Values").Params(Id("b").Op("*").Qual("testing", "B")).BlockFunc(func(g *Group) {
		g.Id("x").Op(":=").Id("New" + k + "Values").Call(Id("new" + upperFirst(testVersions(d))).Call())
		for _, r := range d.Family {
			g.BlockFunc(func(g *Group) {
				g.List(Id("enc"), Err()).Op(":=").Id("Encode" + r.Name).Call(typical(r))
				g.If(Err().Op("!=").Nil()).Block(Id("b").Dot("Fatal").Call(Err()))
				g.Id("b").Dot("Run").Call(Lit("decode-"+r.Name), Func().Params(Id("b").Op("*").Qual("testing", "B")).Block(
					Id("b").Dot("ReportAllocs").Call(),
					Id("b").Dot("SetBytes").Call(Int64().Call(Len(Id("enc")))),
					For(Id("b").Dot("Loop").Call()).Block(
						If(List(Id("_"), Err()).Op(":=").Id("x").Dot("Decode").Call(Id("enc")), Err().Op("!=").Nil()).Block(Id("b").Dot("Fatal").Call(Err())),
					),
				))
			})
		}
	})
}

// recordArgOf is recordArg of an expression.
func recordArgOf(r *decl, x *Statement) *Statement {
	if r.Kind == kindUnion {
		return x
	}
	return Op("&").Add(x)
}
