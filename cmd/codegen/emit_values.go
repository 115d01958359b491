package main

import (
	"fmt"
	"strconv"
	"strings"

	. "github.com/dave/jennifer/jen"
)

// Value families: for every key class with value=A,B (oldest first), the
// API that reads a row's value in any version the family declares and
// returns the newest, and writes the newest version a store's format
// allows:
//
//	type KVersions interface {            // the rows' owner implements it
//		UpgradeA(v A) (B, error)          // one per adjacent pair
//		DowngradeB(v B) (A, error)        // for B whose format is above A's
//	}
//	func NewKValues(v KVersions) *KValues
//	func (x *KValues) Decode(b []byte) (B, error)
//	func (x *KValues) DecodeInto(b []byte, v *B) error
//	func (x *KValues) Encode(v B, format uint32) ([]byte, error)
//	func VersionOfKValue(b []byte) (uint8, error)
//
// A family of one version has an empty KVersions: adding a version adds a
// method, so every implementation passed to NewKValues stops compiling
// until it converts the new version. The newest version decodes through
// its own DecodeBInto, the fast path, unchanged.

// hasFamilies reports whether s declares a value family.
func hasFamilies(s *schema) bool {
	for _, d := range s.keys() {
		if len(d.Family) > 0 {
			return true
		}
	}
	return false
}

// emitValues writes values.go: the families' API and the formatOfX walks
// Encode checks values with.
func emitValues(f *File, s *schema) {
	gated := gatedDecls(s)
	for _, d := range s.Decls {
		if gated[d] {
			emitFormatOf(f, d, gated)
		}
	}
	for _, d := range s.keys() {
		if len(d.Family) > 0 {
			emitFamily(f, d, s.pkg, gated)
		}
	}
}

// upgrades and downgrades name the conversions of family fam: upgrade i
// converts fam[i] to fam[i+1]; downgrade i converts fam[i] to fam[i-1],
// declared only when fam[i]'s format is above fam[0]'s (below it, no
// store format allows fam[i] but not fam[i-1]).
func upgradeName(fam []*decl, i int) string { return "Upgrade" + fam[i].Name }

func downgradeName(fam []*decl, i int) string { return "Downgrade" + fam[i].Name }

func hasDowngrade(fam []*decl, i int) bool { return i > 0 && fam[i].Format > fam[0].Format }

// versionList is the version bytes of fam as "1, 2".
func versionList(fam []*decl) string {
	var out []string
	for _, v := range fam {
		out = append(out, strconv.Itoa(int(v.Version)))
	}
	return strings.Join(out, ", ")
}

// para writes text as comment lines of g, each paragraph (separated by
// a blank line) refilled to 76 columns, as gofmt'd doc comments read.
func para(g *Group, format string, args ...any) {
	for _, line := range wrap(fmt.Sprintf(format, args...), 76) {
		g.Comment(line)
	}
}

// emitFamily writes the API of key class d's value family.
func emitFamily(f *File, d *decl, pkg string, gated map[*decl]bool) {
	fam := d.Family
	newest := d.newest()
	k := d.Name
	iface, values := k+"Versions", k+"Values"
	list := familyList(fam)

	if len(fam) == 1 {
		para(f.Group, "%s converts the value of a %s row between adjacent versions of its "+
			"family (value=%s), for [New%s]. The owner of the rows implements it in its own "+
			"package. With one version it has no method, and struct{}{} satisfies it: a version "+
			"added to the family adds one, and every implementation then stops compiling until it "+
			"converts the new version.", iface, k, list, values)
	} else {
		para(f.Group, "%s converts the value of a %s row between adjacent versions of its "+
			"family (value=%s, oldest first), for [New%s]. The owner of the rows implements it in "+
			"its own package: a version added to the family adds a method, and every implementation "+
			"then stops compiling until it converts the new version. A conversion's error is "+
			"returned, wrapped, by the call that needed it: an upgrade that finds a value "+
			"unacceptable should wrap wire.ErrCorrupt, a downgrade that cannot express one "+
			"wire.ErrFormatTooOld.", iface, k, list, values)
	}
	f.Type().Id(iface).InterfaceFunc(func(g *Group) {
		for i := range fam {
			if i+1 < len(fam) {
				para(g, "%s returns v as a %s: Decode calls it for a row stored as %s or older.",
					upgradeName(fam, i), fam[i+1].Name, fam[i].Name)
				g.Id(upgradeName(fam, i)).Params(Id("v").Id(fam[i].Name)).Params(Id(fam[i+1].Name), Error())
			}
		}
		for i := range fam {
			if hasDowngrade(fam, i) {
				para(g, "%s returns v as a %s: Encode calls it for a store whose format is below %d, %s's.",
					downgradeName(fam, i), fam[i-1].Name, fam[i].Format, fam[i].Name)
				g.Id(downgradeName(fam, i)).Params(Id("v").Id(fam[i].Name)).Params(Id(fam[i-1].Name), Error())
			}
		}
	})

	para(f.Group, "%s reads and writes the value of a %s row in every version of its family "+
		"(value=%s): Decode returns any version as the newest, %s, and Encode writes the newest "+
		"version a store's format allows. Build one with [New%s]; it is safe for concurrent use "+
		"when its %s is.", values, k, list, newest.Name, values, iface)
	f.Type().Id(values).Struct(Id("versions").Id(iface))

	para(f.Group, "New%s returns the %s of a %s row's value, converting between versions "+
		"with v. It panics when v is nil: pass the %s of the rows' owner (struct{}{} while the "+
		"family has no conversion), so that the compiler names each conversion a version added "+
		"to the family needs.", values, values, k, iface)
	f.Func().Id("New"+values).Params(Id("v").Id(iface)).Op("*").Id(values).Block(
		If(Id("v").Op("==").Nil()).Block(Panic(Lit(pkg+": New"+values+"(nil): pass the "+iface+" of the rows' owner"))),
		Return(Op("&").Id(values).Values(Dict{Id("versions"): Id("v")})),
	)

	para(f.Group, "VersionOf%sValue returns the version byte that opens b, the value of a %s "+
		"row, without decoding the rest. It fails with a *wire.VersionError, which wraps "+
		"wire.ErrNewerVersion and not wire.ErrCorrupt, for a version above every version the "+
		"family has held (%d): a row written by a newer schema. Empty bytes, version 0 and any "+
		"other version the family does not declare (never declared, or retired) fail with an "+
		"error wrapping wire.ErrCorrupt.", k, k, d.lastVersion())
	f.Func().Id("VersionOf"+k+"Value").Params(Id("b").Index().Byte()).Params(Uint8(), Error()).Block(
		If(Len(Id("b")).Op(">").Lit(0)).Block(
			Switch(Id("b").Index(Lit(0))).Block(
				CaseFunc(func(g *Group) {
					for _, v := range fam {
						g.Id("Version" + v.Name)
					}
				}).Block(Return(Id("b").Index(Lit(0)), Nil())),
			),
		),
		Return(Lit(0), Qual(wirePkg, "UnknownVersion").Call(Lit(k), Id("b"), Id("Version"+newest.Name), Lit(int(d.lastVersion())), Lit(versionList(fam)))),
	)

	recv := func() *Statement { return Params(Id("x").Op("*").Id(values)) }
	if len(fam) == 1 {
		para(f.Group, "Decode decodes b, the value of a %s row, as Decode%s does, and fails "+
			"as VersionOf%sValue does for a version byte the family does not declare: a newer "+
			"one is wire.ErrNewerVersion, a row to hold and retry, never to skip. It never panics. "+
			"Byte slices of the result alias b.", k, newest.Name, k)
	} else {
		para(f.Group, "Decode decodes b, the value of a %s row, in whichever version of the "+
			"family it was written, and returns it as the newest, %s: an older version is decoded "+
			"strictly, as its own DecodeX does, then upgraded one version at a time through the "+
			"%s. It fails as VersionOf%sValue does for a version byte the family does not declare "+
			"(a newer one is wire.ErrNewerVersion: hold the row and retry, never skip it), with an "+
			"error wrapping wire.ErrCorrupt for bytes that do not decode as their version, and with "+
			"an upgrade's error, wrapped. It never panics. Byte slices of the result may alias b.",
			k, newest.Name, iface, k)
	}
	f.Func().Add(recv()).Id("Decode").Params(Id("b").Index().Byte()).Params(Id(newest.Name), Error()).Block(
		Var().Id("v").Id(newest.Name),
		Err().Op(":=").Id("x").Dot("DecodeInto").Call(Id("b"), Op("&").Id("v")),
		Return(Id("v"), Err()),
	)
	if len(fam) == 1 {
		para(f.Group, "DecodeInto decodes b into *v as Decode does, through Decode%sInto, "+
			"reusing v's slices. On error *v is the zero value.", newest.Name)
	} else {
		para(f.Group, "DecodeInto decodes b into *v as Decode does. The newest version decodes "+
			"through Decode%sInto, reusing v's slices; an older one is upgraded, then assigned. "+
			"On error *v is the zero value.", newest.Name)
	}
	f.Func().Add(recv()).Id("DecodeInto").Params(Id("b").Index().Byte(), Id("v").Op("*").Id(newest.Name)).Error().BlockFunc(func(g *Group) {
		g.If(Len(Id("b")).Op(">").Lit(0).Op("&&").Id("b").Index(Lit(0)).Op("==").Id("Version" + newest.Name)).Block(
			Return(Id("Decode"+newest.Name+"Into").Call(Id("b"), Id("v"))),
		)
		if len(fam) == 1 {
			g.If(List(Id("_"), Err()).Op(":=").Id("VersionOf"+k+"Value").Call(Id("b")), Err().Op("!=").Nil()).Block(
				Var().Id("zero").Id(newest.Name),
				Op("*").Id("v").Op("=").Id("zero"),
				Return(Err()),
			)
			g.Return(Id("Decode"+newest.Name+"Into").Call(Id("b"), Id("v")))
			return
		}
		g.If(Err().Op(":=").Id("x").Dot("older").Call(Id("b"), Id("v")), Err().Op("!=").Nil()).Block(
			Var().Id("zero").Id(newest.Name),
			Op("*").Id("v").Op("=").Id("zero"),
			Return(Err()),
		)
		g.Return(Nil())
	})
	if len(fam) > 1 {
		// older writes the last upgrade's result through v: a value
		// returned, then copied, costs the upgrade of a small record
		// twice its decode (BenchmarkTimerRefKeyValues).
		f.Commentf("older decodes b, a value of a version older than %s, into *v,", newest.Name)
		f.Comment("upgrading it; on error *v is left for the caller to clear.")
		f.Func().Add(recv()).Id("older").Params(Id("b").Index().Byte(), Id("v").Op("*").Id(newest.Name)).Error().BlockFunc(func(g *Group) {
			g.List(Id("ver"), Err()).Op(":=").Id("VersionOf" + k + "Value").Call(Id("b"))
			g.If(Err().Op("!=").Nil()).Block(Return(Err()))
			last := len(fam) - 1
			var vars []Code
			for i, v := range fam[:last] {
				vars = append(vars, Id(stepVar(i)).Id(v.Name))
			}
			if len(vars) == 1 {
				g.Var().Add(vars[0])
			} else {
				g.Var().Defs(vars...)
			}
			for i := 0; i < last; i++ {
				from, to := fam[i], fam[i+1]
				g.If(Id("ver").Op("==").Id("Version" + from.Name)).Block(
					If(Err().Op("=").Id("Decode"+from.Name+"Into").Call(Id("b"), Op("&").Id(stepVar(i))), Err().Op("!=").Nil()).Block(
						Return(Err()),
					),
				)
				wrapped := Return(Qual("fmt", "Errorf").Call(Lit(k+" value: upgrade "+from.Name+" to "+to.Name+": %w"), Err()))
				if i+1 == last {
					g.Comment("ver is below the newest version, which DecodeInto decodes itself")
					g.List(Id("u"), Err()).Op(":=").Id("x").Dot("versions").Dot(upgradeName(fam, i)).Call(Id(stepVar(i)))
					g.If(Err().Op("!=").Nil()).Block(wrapped)
					g.Op("*").Id("v").Op("=").Id("u")
					g.Return(Nil())
					break
				}
				g.If(Id("ver").Op("<=").Id("Version" + from.Name)).Block(
					If(List(Id(stepVar(i+1)), Err()).Op("=").Id("x").Dot("versions").Dot(upgradeName(fam, i)).Call(Id(stepVar(i))), Err().Op("!=").Nil()).Block(wrapped),
				)
			}
		})
	}

	para(f.Group, "Encode returns the encoding of v in the newest version of the family that a "+
		"store of the given format allows (format is the store's format of namespace "+
		"SchemaNamespace, 1 for a store that keeps none): going down from the newest, the first "+
		"version whose format is at most format, v downgraded to it through the %s. It fails, "+
		"encoding nothing, with an error wrapping wire.ErrInvalid as that version's Encode does, "+
		"with a *wire.FormatError (wire.ErrFormatTooOld, which wraps wire.ErrInvalid) when no "+
		"version is allowed or the value holds a variant or enum constant of a newer format, and "+
		"with a downgrade's error, wrapped.", iface)
	f.Func().Add(recv()).Id("Encode").Params(Id("v").Id(newest.Name), Id("format").Uint32()).Params(Index().Byte(), Error()).BlockFunc(func(g *Group) {
		cur := "v"
		for i := len(fam) - 1; i >= 0; i-- {
			ver := fam[i]
			g.If(Id("format").Op(">=").Id("Format" + ver.Name)).BlockFunc(func(g *Group) {
				if gated[ver] {
					g.If(Id("need").Op(":=").Id("formatOf"+ver.Name).Call(recordArg(ver, cur)), Id("need").Op(">").Id("format")).Block(
						Return(Nil(), Op("&").Qual(wirePkg, "FormatError").Values(Dict{
							Id("Family"): Lit(k), Id("Record"): Lit(ver.Name), Id("Format"): Id("format"), Id("Need"): Id("need"),
						})),
					)
				}
				g.Return(Id("Encode" + ver.Name).Call(Id(cur)))
			})
			if !hasDowngrade(fam, i) {
				g.Return(Nil(), Op("&").Qual(wirePkg, "FormatError").Values(Dict{
					Id("Family"): Lit(k), Id("Record"): Lit(fam[0].Name), Id("Format"): Id("format"), Id("Need"): Id("Format" + fam[0].Name),
				}))
				break
			}
			next := stepVar(i - 1)
			g.List(Id(next), Err()).Op(":=").Id("x").Dot("versions").Dot(downgradeName(fam, i)).Call(Id(cur))
			g.If(Err().Op("!=").Nil()).Block(
				Return(Nil(), Qual("fmt", "Errorf").Call(Lit(k+" value: downgrade "+ver.Name+" to "+fam[i-1].Name+": %w"), Err())),
			)
			cur = next
		}
	})
}

// stepVar names the value of version i in a conversion chain.
func stepVar(i int) string { return "v" + strconv.Itoa(i) }

// gatedDecls returns the declarations whose values may hold a variant or
// enum constant of a format above 1: enums with such a constant, unions
// with such a variant or one holding a gated type, and the structs (and
// records) whose fields hold a gated type.
func gatedDecls(s *schema) map[*decl]bool {
	gated := map[*decl]bool{}
	for changed := true; changed; {
		changed = false
		for _, d := range s.Decls {
			if gated[d] || d.Key {
				continue
			}
			g := false
			switch d.Kind {
			case kindEnum:
				for _, v := range d.Values {
					g = g || v.Format > 1
				}
			case kindUnion:
				for _, v := range d.Variants {
					g = g || v.Format > 1 || gated[v.Type]
				}
			case kindStruct:
				for _, fl := range d.Fields {
					g = g || typeGated(fl.Type, gated)
				}
			}
			if g {
				gated[d], changed = true, true
			}
		}
	}
	return gated
}

// typeGated reports whether a value of t may hold a gated declaration.
func typeGated(t *typeRef, gated map[*decl]bool) bool {
	switch t.Kind {
	case refNamed:
		return gated[t.Decl]
	case refPtr, refSlice:
		return typeGated(t.Elem, gated)
	}
	return false
}

// emitFormatOf writes formatOfX for gated declaration d: the largest
// format a variant or enum constant a value of d holds declares, 1 when
// none is above 1.
func emitFormatOf(f *File, d *decl, gated map[*decl]bool) {
	f.Commentf("formatOf%s returns the store format v needs: the largest format of a", d.Name)
	f.Comment("variant or enum constant it holds, 1 when it holds none above 1.")
	switch d.Kind {
	case kindEnum:
		byFormat := map[uint32][]Code{}
		var formats []uint32
		for _, v := range d.Values {
			if v.Format > 1 {
				if byFormat[v.Format] == nil {
					formats = append(formats, v.Format)
				}
				byFormat[v.Format] = append(byFormat[v.Format], Id(v.Name))
			}
		}
		f.Func().Id("formatOf"+d.Name).Params(Id("v").Id(d.Name)).Uint32().Block(
			Switch(Id("v")).BlockFunc(func(g *Group) {
				for _, fm := range formats {
					g.Case(byFormat[fm]...).Block(Return(Lit(int(fm))))
				}
			}),
			Return(Lit(1)),
		)
	case kindUnion:
		f.Func().Id("formatOf"+d.Name).Params(Id("v").Id(d.Name)).Uint32().Block(
			Switch(Id("x").Op(":=").Id("v").Assert(Type())).BlockFunc(func(g *Group) {
				for _, vr := range d.Variants {
					switch {
					case gated[vr.Type] && vr.Format <= 1:
						g.Case(variantType(d, vr)).Block(Return(Id("formatOf" + vr.Type.Name).Call(variantArg(d, "x"))))
					case gated[vr.Type]:
						g.Case(variantType(d, vr)).Block(Return(Max(Lit(int(vr.Format)), Id("formatOf"+vr.Type.Name).Call(variantArg(d, "x")))))
					case vr.Format > 1:
						g.Case(variantType(d, vr)).Block(Return(Lit(int(vr.Format))))
					}
				}
			}),
			Return(Lit(1)),
		)
	default:
		f.Func().Id("formatOf" + d.Name).Params(valueParam(d)).Uint32().BlockFunc(func(g *Group) {
			g.Id("n").Op(":=").Uint32().Call(Lit(1))
			for _, fl := range d.Fields {
				if typeGated(fl.Type, gated) {
					formatOfValue(g, "v."+fl.Name, fl.Type, 0)
				}
			}
			g.Return(Id("n"))
		})
	}
}

// formatOfValue appends the statements that raise n to the format x, of
// gated type t, needs.
func formatOfValue(g *Group, x string, t *typeRef, depth int) {
	switch t.Kind {
	case refNamed:
		arg := Id(x)
		if t.Decl.Kind == kindStruct {
			arg = Op("&").Id(x)
		}
		g.Id("n").Op("=").Max(Id("n"), Id("formatOf"+t.Decl.Name).Call(arg))
	case refPtr:
		g.If(Id(x).Op("!=").Nil()).BlockFunc(func(g *Group) {
			formatOfValue(g, "(*"+x+")", t.Elem, depth)
		})
	case refSlice:
		i := loopVar(depth)
		g.For(Id(i).Op(":=").Range().Id(x)).BlockFunc(func(g *Group) {
			formatOfValue(g, x+"["+i+"]", t.Elem, depth+1)
		})
	default:
		panic(fmt.Sprintf("codegen: formatOfValue of ungated type %s", typeString(t)))
	}
}
