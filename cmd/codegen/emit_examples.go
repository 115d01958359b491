package main

import (
	"strings"

	. "github.com/dave/jennifer/jen"
)

// Example values: every record, key class and partition union gets a
// minimal example (zero integers, empty collections, the shortest
// identities) and typical ones (every field set, two elements per
// collection, one per union variant). They seed the fuzz targets and drive
// the round-trip tests and benchmarks, so an importing project's schema
// gets all of that without writing a value by hand.

func emitExamples(f *File, s *schema) {
	f.Comment("ptr returns a pointer to a copy of v.")
	f.Func().Id("ptr").Types(Id("T").Any()).Params(Id("v").Id("T")).Op("*").Id("T").Block(Return(Op("&").Id("v")))
	f.Comment("sortedBy sorts s by cmp and returns it.")
	f.Func().Id("sortedBy").Types(Id("T").Any()).Params(Id("s").Index().Id("T"), Id("cmp").Func().Params(Id("a"), Id("b").Id("T")).Int()).Index().Id("T").Block(
		Qual("slices", "SortFunc").Call(Id("s"), Id("cmp")),
		Return(Id("s")),
	)
	for _, d := range s.Decls {
		switch {
		case d.Record || d.Key:
			f.Commentf("examples%s returns valid %s values, minimal first, typical last.", d.Name, d.Name)
			f.Func().Id("examples" + d.Name).Params().Index().Id(d.Name).Block(Return(Index().Id(d.Name).Values(examplesOf(d)...)))
		case d.Kind == kindUnion && d.Partition:
			f.Commentf("examples%s returns valid %s values: a minimal one, then one per variant.", d.Name, d.Name)
			f.Func().Id("examples" + d.Name).Params().Index().Id(d.Name).Block(Return(Index().Id(d.Name).Values(examplesOf(d)...)))
		}
	}
}

// examplesOf lists example literals of d.
func examplesOf(d *decl) []Code {
	if d.Kind == kindUnion {
		out := []Code{exampleNamed(d, false, 0)}
		for i := range d.Variants {
			out = append(out, exampleNamed(d, true, i))
		}
		return out
	}
	return []Code{exampleStruct(d, false, 0), exampleStruct(d, true, 0)}
}

// exampleNamed is an example of a declared type.
func exampleNamed(d *decl, typical bool, seed int) Code {
	switch d.Kind {
	case kindIdentity:
		return Id("Must" + d.Name).Call(Lit(identityExample(d, typical, seed)))
	case kindEnum:
		v := d.Values[0]
		if typical {
			v = d.Values[len(d.Values)-1]
		}
		return Id(v.Name)
	case kindUnion:
		v := d.Variants[0]
		if typical {
			v = d.Variants[seed%len(d.Variants)]
		}
		if d.Record {
			return Op("&").Add(exampleStruct(v.Type, typical, seed))
		}
		return exampleStruct(v.Type, typical, seed)
	}
	return exampleStruct(d, typical, seed)
}

func identityExample(d *decl, typical bool, seed int) string {
	if !typical {
		return strings.Repeat("a", d.Min)
	}
	s := strings.ToLower(d.Name) + "-" + string(rune('a'+seed%26))
	if len(s) > d.Max {
		s = s[len(s)-d.Max:]
	}
	for len(s) < d.Min {
		s += "x"
	}
	return s
}

func exampleStruct(d *decl, typical bool, seed int) Code {
	byName := map[string]*field{}
	for _, fl := range d.Fields {
		byName[fl.Name] = fl
	}
	values := Dict{}
	for _, fl := range d.Fields {
		src := fl
		if fl.Le != "" {
			src = byName[fl.Le] // at most the other field: equal to it
		}
		v := exampleValue(src.Type, src, typical, seed)
		if v != nil {
			values[Id(fl.Name)] = v
		}
	}
	return Id(d.Name).Values(values)
}

var typicalInts = map[string]uint64{"uint8": 7, "uint16": 300, "uint32": 70000, "uint64": 1<<40 + 7}

// exampleValue is an example literal of t; nil means the zero value.
func exampleValue(t *typeRef, fl *field, typical bool, seed int) Code {
	switch t.Kind {
	case refPrim:
		switch t.Prim {
		case "bool":
			if typical {
				return True()
			}
			return nil
		case "string":
			if !typical || fl == nil || fl.Max == 0 {
				return nil
			}
			return Lit(strings.Repeat(string(rune('s'+seed%4)), min(fl.Max, 12)))
		case "int64":
			if typical {
				return Id("int64").Call(Lit(-1234567 - seed))
			}
			return nil
		}
		var v uint64
		if typical {
			v = typicalInts[t.Prim] + uint64(seed)
		}
		if fl != nil && fl.HasMin && v < fl.Min {
			v = fl.Min
		}
		if v == 0 {
			return nil
		}
		return Id(t.Prim).Call(num(v))
	case refBytes:
		optional := fl != nil && fl.Optional
		if !typical {
			if optional {
				return nil
			}
			return Index().Byte().Values()
		}
		n := 16
		if fl != nil {
			n = min(n, fl.Max)
		}
		lits := make([]Code, n)
		for i := range lits {
			lits[i] = Lit(int((i*37 + seed*11) % 256))
		}
		return Index().Byte().Values(lits...)
	case refArray:
		if !typical {
			return nil
		}
		if t.Len == 1 {
			return Index(Lit(1)).Byte().Values(Lit(1))
		}
		return Index(Lit(t.Len)).Byte().Values(Lit(0).Op(":").Lit(1), Lit(t.Len-1).Op(":").Lit(0xff))
	case refNamed:
		return exampleNamed(t.Decl, typical, seed)
	case refPtr:
		if !typical {
			return nil
		}
		inner := exampleValue(t.Elem, nil, true, seed)
		if inner == nil {
			inner = goType(t.Elem).Call(Lit(0))
		}
		return Id("ptr").Call(inner)
	case refSlice:
		if !typical || fl == nil || fl.Max == 0 {
			return nil
		}
		n := min(fl.Max, 2)
		elems := make([]Code, n)
		for i := range elems {
			elems[i] = exampleValue(t.Elem, fl.elem(), true, seed+i)
			if elems[i] == nil {
				elems[i] = goType(t.Elem).Values()
			}
		}
		lit := goType(t).Values(elems...)
		if fl.Sorted {
			cmpFn := Func().Params(Id("a"), Id("b").Add(goType(t.Elem))).Int().Block(Return(compareExpr(t.Elem, "a", "b")))
			return Id("sortedBy").Call(lit, cmpFn)
		}
		return lit
	}
	return nil
}

// breakage is a way to make a valid example invalid: a statement that
// changes v, and whether the raw encoding of the result is guaranteed not
// to decode (some breakages, like a nil union, change the layout itself).
type breakage struct {
	what    string
	change  Code
	corrupt bool
	// decodeOnly marks a value only code inside gen can build (an
	// identity's fields are unexported): encoders trust it, so it serves
	// only as the unchecked encoding a decoder must reject.
	decodeOnly bool
}

// breakages lists the ways to break the fields of d, a struct, as
// statements on the variable v.
func breakages(d *decl, v string) []breakage {
	var out []breakage
	at := func(fl *field) *Statement { return Id(v + "." + fl.Name) }
	for _, fl := range d.Fields {
		t := fl.Type
		switch {
		case t.Kind == refBytes && fl.HasMax:
			out = append(out, breakage{fl.Name + " over its bound", at(fl).Op("=").Make(Index().Byte(), Lit(fl.Max+1)), true, false})
		case t.Kind == refPrim && t.Prim == "string" && fl.HasMax:
			out = append(out, breakage{fl.Name + " over its bound", at(fl).Op("=").Qual("strings", "Repeat").Call(Lit("x"), Lit(fl.Max+1)), true, false})
		case t.Kind == refSlice:
			out = append(out, breakage{fl.Name + " over its bound", at(fl).Op("=").Make(goType(t), Lit(fl.Max+1)), true, false})
			if fl.HasElemMax && fl.Max >= 1 {
				long := Make(Index().Byte(), Lit(fl.ElemMax+1))
				if t.Elem.Kind == refPrim {
					long = Qual("strings", "Repeat").Call(Lit("x"), Lit(fl.ElemMax+1))
				}
				out = append(out, breakage{fl.Name + " element over elem_max", at(fl).Op("=").Add(goType(t)).Values(long), true, false})
			}
			if fl.Sorted && fl.Max >= 2 {
				out = append(out, breakage{fl.Name + " out of order", Qual("slices", "Reverse").Call(at(fl)), true, false})
			}
		case t.Kind == refNamed && t.Decl.Kind == kindIdentity:
			// Only the zero value of an identity reaches an encoder invalid:
			// every other one was validated when it was built.
			out = append(out, breakage{fl.Name + " over its bound", at(fl).Op("=").Id(t.Decl.Name).Values(Qual("strings", "Repeat").Call(Lit("x"), Lit(t.Decl.Max+1))), true, true})
			out = append(out, breakage{fl.Name + " with a control character", at(fl).Op("=").Id(t.Decl.Name).Values(Lit("\x01")), true, true})
			if t.Decl.Min > 0 {
				out = append(out, breakage{fl.Name + " empty", at(fl).Op("=").Id(t.Decl.Name).Values(), true, false})
			}
		case t.Kind == refNamed && t.Decl.Kind == kindEnum:
			out = append(out, breakage{fl.Name + " unknown value", at(fl).Op("=").Id(t.Decl.Name).Call(Lit(int(badEnum(t.Decl)))), true, false})
		case t.Kind == refNamed && t.Decl.Kind == kindUnion:
			out = append(out, breakage{fl.Name + " unset", at(fl).Op("=").Nil(), false, false})
		case isInt(t) && fl.HasMin && fl.Min > 0:
			out = append(out, breakage{fl.Name + " under its minimum", at(fl).Op("=").Add(num(fl.Min - 1)), true, false})
		case isInt(t) && fl.Le != "":
			out = append(out, breakage{fl.Name + " over " + fl.Le, at(fl).Op("=").Id(v + "." + fl.Le).Op("+").Lit(1), true, false})
		}
	}
	return out
}

// badEnum is the least byte that is no value of the enum.
func badEnum(d *decl) uint8 {
	used := map[uint8]bool{}
	for _, v := range d.Values {
		used[v.Value] = true
	}
	for b := 0; b < 256; b++ {
		if !used[uint8(b)] {
			return uint8(b)
		}
	}
	return 0
}
