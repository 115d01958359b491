package main

import (
	"fmt"
	"strings"
)

// check proves the model sound: every rule an emitter relies on holds, or
// the mistake is reported at its position.
func check(s *schema, errs *schemaErrors) {
	tags := map[uint32]*decl{}
	owner := map[*decl]*decl{} // variant struct -> its union
	for _, d := range s.Decls {
		if d.Key {
			// Tag 0 is a tag the loader found missing or out of range
			// (keyTagRange) and reported.
			if prev, dup := tags[d.Tag]; dup && d.Tag != 0 {
				errs.add(d.Pos, "key %s: tag %d already used by %s", d.Name, d.Tag, prev.Name)
			}
			tags[d.Tag] = d
			if r := retiredNum(s.RetiredKeys, uint64(d.Tag)); r != nil && d.Tag != 0 {
				errs.add(d.Pos, "key %s: tag %d is retired (//mk:retired at %s): %s", d.Name, d.Tag, r.Pos, ruleRetiredReused.text())
			}
			checkFamily(s, d, errs)
			for _, f := range d.Fields {
				checkKeyField(d, f, errs)
			}
			continue
		}
		switch d.Kind {
		case kindEnum:
			seen := map[uint8]string{}
			if len(d.Values) == 0 {
				errs.add(d.Pos, "enum %s: no constants declared", d.Name)
			}
			for _, v := range d.Values {
				if r := retiredNum(d.Retired, uint64(v.Value)); r != nil {
					errs.add(d.Pos, "enum %s: %s takes value %d, which retired= reserves: %s", d.Name, v.Name, v.Value, ruleRetiredReused.text())
				}
				if prev, dup := seen[v.Value]; dup {
					errs.add(d.Pos, "enum %s: %s and %s share value %d", d.Name, prev, v.Name, v.Value)
				}
				seen[v.Value] = v.Name
			}
		case kindUnion:
			checkUnion(d, owner, errs)
		case kindStruct:
			for _, f := range d.Fields {
				checkRecordField(d, f, errs)
			}
		}
	}
	for _, d := range s.Decls {
		if d.Kind == kindUnion && d.Partition {
			markTuple(d, errs)
		}
		if d.Record {
			if r := retiredName(s.RetiredRecords, d.Name); r != nil {
				errs.add(d.Pos, "record %s: the name is retired (//mk:retired at %s): %s", d.Name, r.Pos, ruleRetiredReused.text())
			}
		}
	}
	checkCycles(s, errs)
}

// checkFamily checks the value family of key class d: released records
// (for a released class), each listed once, versions strictly
// increasing, formats never decreasing, no retired version declared, and
// no declared type named as the API generated for it.
func checkFamily(s *schema, d *decl, errs *schemaErrors) {
	list := strings.Join(d.familyNames, ",")
	seen := map[*decl]bool{}
	for i, v := range d.Family {
		if seen[v] {
			errs.add(d.Pos, "key %s: value=%s lists %s twice", d.Name, list, v.Name)
			continue
		}
		seen[v] = true
		if v.Draft && !d.Draft {
			errs.add(d.Pos, "key %s: holds %s, a draft: a released key class holds released records (mark %s draft too, or release %s)", d.Name, v.Name, d.Name, v.Name)
		}
		if r := retiredNum(d.Retired, uint64(v.Version)); r != nil && v.Version != 0 {
			errs.add(d.Pos, "key %s: %s takes version %d of the family, which retired= reserves: %s", d.Name, v.Name, v.Version, ruleRetiredReused.text())
		}
		if i == 0 {
			continue
		}
		prev := d.Family[i-1]
		if v.Version <= prev.Version && v.Version != 0 && prev.Version != 0 {
			errs.add(d.Pos, "key %s: value=%s: %s (version %d) is not above %s (version %d): a family lists its versions oldest first, each version byte above the one before", d.Name, list, v.Name, v.Version, prev.Name, prev.Version)
		}
		if v.Format < prev.Format {
			errs.add(d.Pos, "key %s: value=%s: %s has format %d, below %s's %d: a newer version never needs an older store format", d.Name, list, v.Name, v.Format, prev.Name, prev.Format)
		}
	}
	if len(d.Family) == 0 {
		return
	}
	for _, name := range familyAPI(d) {
		if other := s.byName[name]; other != nil {
			errs.add(other.Pos, "type %s: the name of the API generated for the value family of key %s: rename one", name, d.Name)
		}
	}
}

// familyAPI lists the exported type names generated for key class d's
// value family.
func familyAPI(d *decl) []string {
	return []string{d.Name + "Versions", d.Name + "Values"}
}

func checkUnion(d *decl, owner map[*decl]*decl, errs *schemaErrors) {
	if len(d.Variants) == 0 {
		errs.add(d.Pos, "union %s: no variants", d.Name)
	}
	tags := map[uint8]string{}
	kinds := map[string]string{}
	for _, v := range d.Variants {
		if prev, dup := tags[v.Tag]; dup && v.Tag != 0 {
			errs.add(v.Pos, "union %s: variants %s and %s share tag %d", d.Name, prev, v.Name, v.Tag)
		}
		tags[v.Tag] = v.Name
		if r := retiredNum(d.Retired, uint64(v.Tag)); r != nil && v.Tag != 0 {
			errs.add(v.Pos, "union %s: variant %s takes tag %d, which retired= reserves: %s", d.Name, v.Name, v.Tag, ruleRetiredReused.text())
		}
		if prev, dup := owner[v.Type]; dup {
			errs.add(v.Pos, "union %s: %s is already a variant of %s", d.Name, v.Type.Name, prev.Name)
		}
		owner[v.Type] = d
		if d.Partition && v.Format > 1 {
			errs.add(v.Pos, "partition union %s: variant %s: format= gates values, and a partition identity is none", d.Name, v.Name)
		}
		if d.Partition {
			if v.KindName == "" && !v.guessed["kind"] {
				errs.add(v.Pos, "partition union %s: variant %s needs kind=name", d.Name, v.Name)
			} else if prev, dup := kinds[v.KindName]; dup {
				errs.add(v.Pos, "partition union %s: variants %s and %s share kind %q", d.Name, prev, v.Name, v.KindName)
			}
			kinds[v.KindName] = v.Name
		} else if v.KindName != "" {
			errs.add(v.Pos, "union %s: kind= is only for partition unions", d.Name)
		}
	}
}

// checkRecordField checks a field of a struct or record.
func checkRecordField(d *decl, f *field, errs *schemaErrors) {
	t := f.Type
	if t == nil {
		return
	}
	where := fmt.Sprintf("%s.%s", d.Name, f.Name)
	bounded := t.Kind == refBytes || t.Kind == refSlice || (t.Kind == refPrim && t.Prim == "string")
	if bounded && !f.HasMax && !f.guessed["max"] {
		errs.add(f.Pos, "%s: needs a bound (mk:\"max=N\"): records are bounded by construction", where)
	}
	if !bounded && f.HasMax {
		errs.add(f.Pos, "%s: max= applies to strings, []byte and slices only", where)
	}
	sizedElems := t.Kind == refSlice && t.Elem != nil && (t.Elem.Kind == refBytes || t.Elem.Kind == refPrim && t.Elem.Prim == "string")
	if sizedElems && !f.HasElemMax && !f.guessed["elem_max"] {
		errs.add(f.Pos, "%s: a slice of strings or []byte needs elem_max=N, the bound of each element", where)
	}
	if f.HasElemMax && !sizedElems {
		errs.add(f.Pos, "%s: elem_max= applies to slices of strings or []byte only", where)
	}
	if f.Optional && t.Kind != refBytes {
		errs.add(f.Pos, "%s: optional applies to []byte only (use a pointer for scalars)", where)
	}
	if (f.HasMin || f.Le != "") && !isInt(t) {
		errs.add(f.Pos, "%s: min= and le= apply to integers only", where)
	}
	if f.Le != "" {
		var other *field
		for _, g := range d.Fields {
			if g.Name == f.Le {
				other = g
			}
		}
		if other == nil || !isInt(other.Type) || other == f {
			errs.add(f.Pos, "%s: le=%s must name another integer field of %s", where, f.Le, d.Name)
		}
	}
	if f.Sorted {
		if t.Kind != refSlice || t.Elem == nil || !comparable(t.Elem) {
			errs.add(f.Pos, "%s: sorted applies to slices of unions, identities, integers, strings or []byte", where)
		}
	}
	checkElem(where, f, t, errs)
}

func checkElem(where string, f *field, t *typeRef, errs *schemaErrors) {
	if t == nil {
		return
	}
	switch t.Kind {
	case refNamed:
		if t.Decl == nil {
			return
		}
		if t.Decl.Key || t.Decl.Record {
			errs.add(f.Pos, "%s: %s is a key class or record and cannot be a field type", where, t.Decl.Name)
		}
	case refPtr:
		e := t.Elem
		if e == nil {
			return
		}
		if !(e.Kind == refPrim && e.Prim != "string") && !(e.Kind == refNamed && e.Decl != nil && e.Decl.Kind == kindEnum) {
			errs.add(f.Pos, "%s: pointers are optional scalars: point to an integer, bool or enum", where)
		}
	case refSlice:
		if t.Elem != nil && t.Elem.Kind == refPtr {
			errs.add(f.Pos, "%s: slices of pointers are not supported", where)
		}
		checkElem(where, f, t.Elem, errs)
	}
}

// checkKeyField checks a field of a key class: it must have a tuple form.
func checkKeyField(d *decl, f *field, errs *schemaErrors) {
	t := f.Type
	if t == nil {
		return
	}
	where := fmt.Sprintf("key %s.%s", d.Name, f.Name)
	switch {
	case t.Kind == refPrim && t.Prim == "string", t.Kind == refBytes:
		if !f.HasMax && !f.guessed["max"] {
			errs.add(f.Pos, "%s: needs a bound (mk:\"max=N\")", where)
		}
	case t.Kind == refPrim:
	case t.Kind == refNamed && t.Decl != nil && (t.Decl.Kind == kindIdentity || t.Decl.Kind == kindEnum):
	case t.Kind == refNamed && t.Decl != nil && t.Decl.Kind == kindUnion && !t.Decl.Record:
		markTuple(t.Decl, errs)
	case t.Kind == refNamed && t.Decl == nil:
	default:
		errs.add(f.Pos, "%s: key fields are integers, bools, strings, []byte, identities, enums or unions", where)
	}
	if f.HasElemMax || f.Sorted || f.Optional || f.Le != "" || f.HasMin {
		errs.add(f.Pos, "%s: only max= applies to key fields", where)
	}
}

// markTuple marks a union encoded in tuples and checks its variants' fields
// have a tuple form.
func markTuple(u *decl, errs *schemaErrors) {
	if u.usedInTuple {
		return
	}
	u.usedInTuple = true
	for _, v := range u.Variants {
		for _, f := range v.Type.Fields {
			t := f.Type
			ok := t != nil && (t.Kind == refPrim && t.Prim != "string" ||
				t.Kind == refNamed && t.Decl != nil && (t.Decl.Kind == kindIdentity || t.Decl.Kind == kindEnum))
			if !ok {
				errs.add(f.Pos, "%s.%s: variants of a union used in keys hold only integers, bools, identities and enums", v.Type.Name, f.Name)
			}
		}
	}
}

func isInt(t *typeRef) bool {
	return t != nil && t.Kind == refPrim && t.Prim != "string" && t.Prim != "bool"
}

// comparable reports whether the generator can order values of t.
func comparable(t *typeRef) bool {
	switch t.Kind {
	case refBytes:
		return true
	case refPrim:
		return t.Prim != "bool"
	case refNamed:
		return t.Decl != nil && (t.Decl.Kind == kindUnion && !t.Decl.Record || t.Decl.Kind == kindIdentity || t.Decl.Kind == kindEnum)
	}
	return false
}

// checkCycles rejects a struct that contains itself.
func checkCycles(s *schema, errs *schemaErrors) {
	state := map[*decl]int{}
	var visit func(d *decl) bool
	visit = func(d *decl) bool {
		switch state[d] {
		case 1:
			return false
		case 2:
			return true
		}
		state[d] = 1
		for _, next := range children(d) {
			if !visit(next) {
				errs.add(d.Pos, "type %s contains itself", d.Name)
				state[d] = 2
				return true
			}
		}
		state[d] = 2
		return true
	}
	for _, d := range s.Decls {
		visit(d)
	}
}

func children(d *decl) []*decl {
	var out []*decl
	var walk func(t *typeRef)
	walk = func(t *typeRef) {
		if t == nil {
			return
		}
		if t.Kind == refNamed && t.Decl != nil {
			out = append(out, t.Decl)
		}
		walk(t.Elem)
	}
	for _, f := range d.Fields {
		walk(f.Type)
	}
	for _, v := range d.Variants {
		out = append(out, v.Type)
	}
	return out
}
