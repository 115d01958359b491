package main

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Schema evolution: the schema is compared with its layout lock
// (lock.go), and every change that would make bytes already stored read
// differently or fail is refused, each as a file:line error naming the
// rule it breaks. Identities in the comparison are what the bytes hold: a
// key class is its tag, a variant its tag, an enum constant its value, a
// field its position; a record, which has no number of its own, is its
// name, and a type a field uses is compared by its layout, whatever its
// name. Names the bytes do not hold may change.

// rule is one rule of the layout lock: id names it in errors and in the
// table of package schema's doc, why says what breaking it would do.
type rule struct{ id, why string }

func (r rule) text() string { return r.why + " (layout rule " + r.id + ")" }

var (
	ruleNamespace = rule{"namespace",
		"every partition identity starts with the namespace: stored partitions would no longer be found"}
	ruleFieldAdded = rule{"field-added",
		"stored bytes end where the layout ended and would fail to decode: declare a new record version (or key class) instead"}
	ruleFieldRemoved = rule{"field-removed",
		"stored bytes hold it and would fail to decode or read shifted: declare a new record version (or key class) instead"}
	ruleFieldMoved = rule{"field-moved",
		"stored bytes are read by position: each value would be read into another field"}
	ruleRetyped = rule{"retyped",
		"stored bytes were written with the old type and would read differently or fail: declare a new record version (or key class) instead"}
	ruleBoundTightened = rule{"bound-tightened",
		"values already stored may break the new bound and would fail to decode; loosening is allowed"}
	ruleKeyValue = rule{"key-value",
		"rows already stored under the key class hold the versions its value family named: a family only gains versions at its end, and a version leaves it only retired"}
	ruleRenumbered = rule{"renumbered",
		"stored bytes hold the number, not the name: rows written with the old number would read as something else or fail"}
	// ruleFormat is renumbered's for a format lowered: the number is not
	// in the bytes, but decides which stores a process writes them to.
	// Raising one is allowed: processes then write the older version until
	// the store's format reaches it, which every process reads.
	ruleFormat = rule{"renumbered",
		"a version's format says which stores it is written to, so that no process writes what another running one cannot read: lowered, it would be written to stores where processes older than it still run; raising it is allowed"}
	ruleRemoved = rule{"removed",
		"stored bytes may hold it, and only a retirement keeps its number from being used again"}
	ruleRetiredReused = rule{"retired-reused",
		"a retired number or record name stays reserved for ever: rows written before it was retired may still hold it"}
	ruleRetiredDropped = rule{"retired-dropped",
		"a retirement stays for ever, so that the number is never reused: keep it in the schema"}
	ruleReleasedDraft = rule{"released-draft",
		"the layout is locked (rows may hold it): only a layout never released is a draft"}
)

// lockRules lists every rule, in the order of package schema's table.
var lockRules = []rule{ruleNamespace, ruleFieldAdded, ruleFieldRemoved, ruleFieldMoved,
	ruleRetyped, ruleBoundTightened, ruleKeyValue, ruleRenumbered, ruleRemoved,
	ruleRetiredReused, ruleRetiredDropped, ruleReleasedDraft}

// evolve reads the lock in dir, refuses every change of s that breaks a
// rule of it, and returns the lock s makes: the one to write.
func evolve(dir string, s *schema) ([]byte, error) {
	lock, err := readLock(dir)
	if err != nil {
		return nil, fmt.Errorf("codegen: %w", err)
	}
	if lock != nil {
		if errs := compareLock(lock, s); len(errs) > 0 {
			return nil, errs
		}
	}
	return renderLock(s), nil
}

// lockFresh reports whether the lock in dir is lock, byte for byte.
func lockFresh(dir string, lock []byte) (bool, error) {
	have, err := os.ReadFile(filepath.Join(dir, lockName))
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return string(have) == string(lock), nil
}

// comparer compares a lock with a schema.
type comparer struct {
	errs schemaErrors
	seen map[string]bool // errors reported, each once
	// done holds the pairs (locked, declared) compared already: a type
	// used by several layouts is reported once.
	done map[[2]*decl]bool
}

func (c *comparer) add(pos token.Position, r rule, format string, args ...any) {
	msg := fmt.Sprintf("%s: %s: %s", pos, fmt.Sprintf(format, args...), r.text())
	if !c.seen[msg] {
		c.seen[msg] = true
		c.errs = append(c.errs, msg)
	}
}

// compareLock returns every break of a lock rule by s, and fills in the
// names the lock knows for s's retirements.
func compareLock(lock, s *schema) schemaErrors {
	c := &comparer{done: map[[2]*decl]bool{}, seen: map[string]bool{}}
	if lock.Namespace != s.Namespace {
		c.add(s.nsPos, ruleNamespace, "namespace %q: the lock holds %q", s.Namespace, lock.Namespace)
	}
	c.keys(lock, s)
	c.records(lock, s)
	c.partitions(lock, s)
	return c.errs
}

// keys compares the locked key classes with s's, by tag.
func (c *comparer) keys(lock, s *schema) {
	byTag := map[uint32]*decl{}
	// moved holds the key classes whose name the lock holds at another
	// tag: their code now reads and writes another class's rows.
	moved := map[*decl]bool{}
	for _, d := range s.keys() {
		byTag[d.Tag] = d
		if lk := lock.byName[d.Name]; lk != nil && lk.Key && lk.Tag != d.Tag {
			moved[d] = true
			c.add(d.Pos, ruleRenumbered, "key %s: tag %d: the lock holds it at tag %d", d.Name, d.Tag, lk.Tag)
		}
	}
	for _, lk := range lock.keys() {
		sk := byTag[lk.Tag]
		switch {
		case sk != nil && sk.Draft:
			c.add(sk.Pos, ruleReleasedDraft, "key %s: tag %d is released in the lock (%s) and cannot be a draft", sk.Name, sk.Tag, lk.Pos)
		case sk != nil && moved[sk]:
		case sk != nil:
			c.decl(lk, sk, "key class "+sk.Name)
			c.family(lk, sk)
		case retiredNum(s.RetiredKeys, uint64(lk.Tag)) != nil:
			retiredNum(s.RetiredKeys, uint64(lk.Tag)).Name = lk.Name
		case s.byName[lk.Name] != nil && s.byName[lk.Name].Key:
			// renumbered: reported above
		default:
			c.add(lk.Pos, ruleRemoved, "key class %s (tag %d) is no longer declared: keep it, or retire it with //mk:retired key=%d", lk.Name, lk.Tag, lk.Tag)
		}
	}
	for _, lr := range lock.RetiredKeys {
		if sr := retiredNum(s.RetiredKeys, lr.Num); sr != nil {
			if sr.Name == "" {
				sr.Name = lr.Name
			}
			continue
		}
		if sk := byTag[uint32(lr.Num)]; sk != nil {
			c.add(sk.Pos, ruleRetiredReused, "key %s: tag %d was retired (%s)", sk.Name, sk.Tag, lr.Pos)
		} else {
			c.add(lr.Pos, ruleRetiredDropped, "key tag %d is retired in the lock but no //mk:retired line of the schema lists it", lr.Num)
		}
	}
}

// family compares the value family of lk, a locked key class, with that
// of sk, its declaration: a released family only gains versions at its
// end; a version leaves it only retired (retired=N on the //mk:key), its
// byte reserved for ever. Dropping value= altogether is allowed: the rows
// keep their bytes, and tools then show them undecoded.
func (c *comparer) family(lk, sk *decl) {
	for _, lr := range lk.Retired {
		if sr := retiredNum(sk.Retired, lr.Num); sr != nil {
			if sr.Name == "" {
				sr.Name = lr.Name
			}
			continue
		}
		if v := familyVersion(sk, uint8(lr.Num)); v != nil {
			c.add(sk.Pos, ruleRetiredReused, "key %s: %s takes version %d of the family, which was retired", sk.Name, v.Name, lr.Num)
		} else {
			c.add(sk.Pos, ruleRetiredDropped, "key %s: version %d of its value family is retired in the lock: keep it in retired=", sk.Name, lr.Num)
		}
	}
	if len(sk.Family) == 0 {
		return
	}
	list := familyList(sk.Family)
	if len(lk.Family) == 0 {
		c.add(sk.Pos, ruleKeyValue, "key %s: value=%s: the released class declared no record", sk.Name, list)
		return
	}
	held := "value=" + familyList(lk.Family)
	// next is the position in sk.Family after the last locked version
	// found; last is the largest version byte the locked family held.
	next, last := 0, uint8(0)
	for _, r := range lk.Retired {
		last = max(last, uint8(r.Num))
	}
	for _, lv := range lk.Family {
		last = max(last, lv.Version)
		at := slices.IndexFunc(sk.Family, func(v *decl) bool { return v.Name == lv.Name })
		switch {
		case at >= next:
			for _, v := range sk.Family[next:at] {
				c.add(sk.Pos, ruleKeyValue, "key %s: value=%s: %s is listed before the released %s (the class holds %s): a family gains versions only at its end", sk.Name, list, v.Name, lv.Name, held)
			}
			next = at + 1
		case at >= 0:
			c.add(sk.Pos, ruleKeyValue, "key %s: value=%s: %s is listed before %s, the released class holds %s: versions keep their order, oldest first", sk.Name, list, sk.Family[next-1].Name, lv.Name, held)
		case retiredNum(sk.Retired, uint64(lv.Version)) != nil:
			retiredNum(sk.Retired, uint64(lv.Version)).Name = lv.Name
		default:
			c.add(sk.Pos, ruleKeyValue, "key %s: value=%s: the released class holds %s, whose %s (version %d) is no longer listed: keep it, or retire its version with retired=%d once no row holds it", sk.Name, list, held, lv.Name, lv.Version, lv.Version)
		}
	}
	for _, v := range sk.Family[next:] {
		if v.Version <= last && familyVersion(lk, v.Version) == nil && retiredNum(lk.Retired, uint64(v.Version)) == nil {
			c.add(sk.Pos, ruleKeyValue, "key %s: value=%s: %s (version %d) is added below version %d, which the released class held (%s): a version added to a family takes a version byte above all of them", sk.Name, list, v.Name, v.Version, last, held)
		}
	}
}

// familyVersion returns the version of key class d's family whose version
// byte is n, or nil.
func familyVersion(d *decl, n uint8) *decl {
	for _, v := range d.Family {
		if v.Version == n {
			return v
		}
	}
	return nil
}

// familyList is a family as value= writes it.
func familyList(family []*decl) string {
	names := make([]string, len(family))
	for i, v := range family {
		names[i] = v.Name
	}
	return strings.Join(names, ",")
}

// records compares the locked records with s's, by name.
func (c *comparer) records(lock, s *schema) {
	byName := map[string]*decl{}
	for _, d := range s.records() {
		byName[d.Name] = d
	}
	for _, lr := range lock.records() {
		sr := byName[lr.Name]
		switch {
		case sr != nil && sr.Draft:
			c.add(sr.Pos, ruleReleasedDraft, "record %s is released in the lock (%s) and cannot be a draft", sr.Name, lr.Pos)
		case sr != nil && sr.Version != lr.Version:
			c.add(sr.Pos, ruleRenumbered, "record %s: version=%d: the lock holds version %d", sr.Name, sr.Version, lr.Version)
		case sr != nil && sr.Format < lr.Format:
			c.add(sr.Pos, ruleFormat, "record %s: format=%d: the lock holds format %d", sr.Name, sr.Format, lr.Format)
		case sr != nil && sr.Kind != lr.Kind:
			c.add(sr.Pos, ruleRetyped, "record %s: a %s in the lock, a %s now", sr.Name, shape(lr), shape(sr))
		case sr != nil:
			c.decl(lr, sr, "record "+sr.Name)
		case retiredName(s.RetiredRecords, lr.Name) != nil:
		default:
			c.add(lr.Pos, ruleRemoved, "record %s is no longer declared (a record is known by its name: a rename is a removal): keep it, or retire it with //mk:retired record=%s", lr.Name, lr.Name)
		}
	}
	for _, lr := range lock.RetiredRecords {
		if retiredName(s.RetiredRecords, lr.Name) != nil {
			continue
		}
		if sr := byName[lr.Name]; sr != nil {
			c.add(sr.Pos, ruleRetiredReused, "record %s was retired (%s)", sr.Name, lr.Pos)
		} else {
			c.add(lr.Pos, ruleRetiredDropped, "record %s is retired in the lock but no //mk:retired line of the schema lists it", lr.Name)
		}
	}
}

// partitions compares the locked partition unions with s's, by name; one
// left over on each side is the same union renamed.
func (c *comparer) partitions(lock, s *schema) {
	isPartition := func(d *decl) bool { return d.Kind == kindUnion && d.Partition }
	declared := s.filter(isPartition)
	var left []*decl
	matched := map[*decl]bool{}
	for _, lp := range lock.filter(isPartition) {
		if sp := s.byName[lp.Name]; sp != nil && isPartition(sp) {
			matched[sp] = true
			c.decl(lp, sp, "partition union "+sp.Name)
			continue
		}
		left = append(left, lp)
	}
	var rest []*decl
	for _, sp := range declared {
		if !matched[sp] {
			rest = append(rest, sp)
		}
	}
	if len(left) == 1 && len(rest) == 1 {
		c.decl(left[0], rest[0], "partition union "+rest[0].Name)
		return
	}
	for _, lp := range left {
		c.add(lp.Pos, ruleRemoved, "partition union %s is no longer declared: keep it, and retire the variants no longer used with retired=", lp.Name)
	}
}

// describe names d with what it is: "record OrderV1".
func describe(d *decl) string {
	switch {
	case d.Key:
		return "key class " + d.Name
	case d.Record:
		return "record " + d.Name
	}
	return shape(d) + " " + d.Name
}

// shape names what a declaration is.
func shape(d *decl) string {
	switch d.Kind {
	case kindUnion:
		return "union"
	case kindEnum:
		return "enum"
	case kindIdentity:
		return "identity"
	}
	return "struct"
}

// decl compares l, locked, with s, declared, of the same kind; via names
// the released layout that reaches them, for errors.
func (c *comparer) decl(l, s *decl, via string) {
	pair := [2]*decl{l, s}
	if c.done[pair] {
		return
	}
	c.done[pair] = true
	in := ""
	if via != "key class "+s.Name && via != "record "+s.Name && via != "partition union "+s.Name {
		in = " (in " + via + ")"
	}
	switch s.Kind {
	case kindStruct:
		c.fields(l, s, in, via)
	case kindUnion:
		c.variants(l, s, in, via)
	case kindEnum:
		c.enum(l, s, in)
	case kindIdentity:
		if s.Min > l.Min {
			c.add(s.Pos, ruleBoundTightened, "identity %s%s: min=%d: the lock holds min=%d", s.Name, in, s.Min, l.Min)
		}
		if s.Max < l.Max {
			c.add(s.Pos, ruleBoundTightened, "identity %s%s: max=%d: the lock holds max=%d", s.Name, in, s.Max, l.Max)
		}
	}
}

// fields compares the fields of l and s by position: a field of the same
// name at another position moved; one of a new name where the locked
// field's name is gone is that field renamed.
func (c *comparer) fields(l, s *decl, in, via string) {
	lAt := map[string]int{}
	for i, fl := range l.Fields {
		lAt[fl.Name] = i
	}
	// pair[j] is the locked field position j of s stands for, or -1.
	pair := make([]int, len(s.Fields))
	lPaired := make([]bool, len(l.Fields))
	for j, fl := range s.Fields {
		pair[j] = -1
		if i, ok := lAt[fl.Name]; ok {
			pair[j], lPaired[i] = i, true
		}
	}
	for j := range s.Fields {
		// lPaired[j] is false only when no field of s has the locked
		// field's name: a field of a new name in its place renames it.
		if pair[j] < 0 && j < len(l.Fields) && !lPaired[j] {
			pair[j], lPaired[j] = j, true
		}
	}
	for j, fl := range s.Fields {
		i := pair[j]
		where := s.Name + "." + fl.Name
		switch {
		case i < 0:
			c.add(fl.Pos, ruleFieldAdded, "%s%s: field added to released %s", where, in, describe(s))
		case i != j:
			c.add(fl.Pos, ruleFieldMoved, "%s%s: field %d, the lock holds it as field %d", where, in, j+1, i+1)
		default:
			c.field(l, s, l.Fields[i], fl, where+in, via)
		}
	}
	for i, fl := range l.Fields {
		if !lPaired[i] {
			c.add(s.Pos, ruleFieldRemoved, "%s%s: field %d (%s %s) removed from released %s", s.Name, in, i+1, fl.Name, typeString(fl.Type), describe(s))
		}
	}
}

// field compares lf, a field of l, with sf, the field of s at its
// position.
func (c *comparer) field(l, s *decl, lf, sf *field, where, via string) {
	renamed := ""
	if lf.Name != sf.Name {
		renamed = " (renamed from " + lf.Name + ")"
	}
	if !c.sameType(lf.Type, sf.Type, via) || lf.Optional != sf.Optional {
		c.add(sf.Pos, ruleRetyped, "%s%s: %s, the lock holds %s", where, renamed, fieldType(sf), fieldType(lf))
		return
	}
	tight := func(what string, now, was any) {
		c.add(sf.Pos, ruleBoundTightened, "%s: %s=%v: the lock holds %v", where, what, now, was)
	}
	if lf.HasMax && sf.HasMax && sf.Max < lf.Max {
		tight("max", sf.Max, "max="+fmt.Sprint(lf.Max))
	}
	if lf.HasElemMax && sf.HasElemMax && sf.ElemMax < lf.ElemMax {
		tight("elem_max", sf.ElemMax, "elem_max="+fmt.Sprint(lf.ElemMax))
	}
	if sf.Min > lf.Min {
		was := "no min"
		if lf.HasMin {
			was = "min=" + fmt.Sprint(lf.Min)
		}
		tight("min", sf.Min, was)
	}
	if sf.Le != "" {
		li, si := fieldIndex(l, lf.Le), fieldIndex(s, sf.Le)
		switch {
		case lf.Le == "":
			tight("le", sf.Le, "no le")
		case li != si:
			tight("le", sf.Le, "le="+lf.Le+" (field "+fmt.Sprint(li+1)+")")
		}
	}
	if sf.Sorted && !lf.Sorted {
		c.add(sf.Pos, ruleBoundTightened, "%s: sorted: the lock holds it unsorted", where)
	}
}

// fieldType is fl's type as the lock writes it, with optional.
func fieldType(fl *field) string {
	if fl.Optional {
		return typeString(fl.Type) + " optional"
	}
	return typeString(fl.Type)
}

// fieldIndex is the position of the field named name in d, or -1.
func fieldIndex(d *decl, name string) int {
	for i, fl := range d.Fields {
		if fl.Name == name {
			return i
		}
	}
	return -1
}

// sameType reports whether st, declared, has the shape of lt, locked: the
// same kind, integer width, array length, element type, and for a named
// type the same kind of declaration, whose layouts it then compares.
func (c *comparer) sameType(lt, st *typeRef, via string) bool {
	if lt == nil || st == nil || lt.Kind != st.Kind {
		return false
	}
	switch lt.Kind {
	case refPrim:
		return lt.Prim == st.Prim
	case refArray:
		return lt.Len == st.Len
	case refSlice, refPtr:
		return c.sameType(lt.Elem, st.Elem, via)
	case refNamed:
		if lt.Decl == nil || st.Decl == nil || lt.Decl.Kind != st.Decl.Kind {
			return false
		}
		c.decl(lt.Decl, st.Decl, via)
	}
	return true
}

// variants compares the variants of two unions by tag.
func (c *comparer) variants(l, s *decl, in, via string) {
	byTag, byName := map[uint8]*variant{}, map[string]*variant{}
	// moved holds the variants whose name the lock holds at another tag.
	moved := map[*variant]bool{}
	for _, v := range s.Variants {
		byTag[v.Tag], byName[v.Name] = v, v
		if lv := lockedVariant(l, v.Name); lv != nil && lv.Tag != v.Tag {
			moved[v] = true
			c.add(v.Pos, ruleRenumbered, "union %s%s: variant %s: tag %d, the lock holds tag %d", s.Name, in, v.Name, v.Tag, lv.Tag)
		}
	}
	for _, lv := range l.Variants {
		sv := byTag[lv.Tag]
		switch {
		case sv != nil && moved[sv]:
		case sv != nil:
			if sv.Format < lv.Format {
				c.add(sv.Pos, ruleFormat, "union %s%s: variant %s: format=%d, the lock holds format %d", s.Name, in, sv.Name, sv.Format, lv.Format)
			}
			c.decl(lv.Type, sv.Type, via)
		case retiredNum(s.Retired, uint64(lv.Tag)) != nil:
			retiredNum(s.Retired, uint64(lv.Tag)).Name = lv.Name
		case byName[lv.Name] != nil:
			// renumbered: reported above
		default:
			c.add(s.Pos, ruleRemoved, "union %s%s: variant %s (tag %d) is no longer declared: keep it, or retire it with retired=%d", s.Name, in, lv.Name, lv.Tag, lv.Tag)
		}
	}
	for _, lr := range l.Retired {
		if sr := retiredNum(s.Retired, lr.Num); sr != nil {
			if sr.Name == "" {
				sr.Name = lr.Name
			}
			continue
		}
		if sv := byTag[uint8(lr.Num)]; sv != nil {
			c.add(sv.Pos, ruleRetiredReused, "union %s%s: variant %s: tag %d was retired", s.Name, in, sv.Name, lr.Num)
		} else {
			c.add(s.Pos, ruleRetiredDropped, "union %s%s: tag %d is retired in the lock: keep it in retired=", s.Name, in, lr.Num)
		}
	}
}

// lockedVariant returns the variant of l named name, or nil.
func lockedVariant(l *decl, name string) *variant {
	for _, v := range l.Variants {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// enum compares the constants of two enums by value.
func (c *comparer) enum(l, s *decl, in string) {
	byValue, byName := map[uint8]enumValue{}, map[string]enumValue{}
	for _, v := range s.Values {
		byValue[v.Value], byName[v.Name] = v, v
	}
	for _, lv := range l.Values {
		_, kept := byValue[lv.Value]
		sv, named := byName[lv.Name]
		switch {
		case named && sv.Value != lv.Value:
			c.add(s.Pos, ruleRenumbered, "enum %s%s: %s = %d, the lock holds %d", s.Name, in, sv.Name, sv.Value, lv.Value)
		case kept && byValue[lv.Value].Format < lv.Format:
			c.add(s.Pos, ruleFormat, "enum %s%s: %s: format=%d, the lock holds format %d", s.Name, in, byValue[lv.Value].Name, byValue[lv.Value].Format, lv.Format)
		case kept:
		case retiredNum(s.Retired, uint64(lv.Value)) != nil:
			retiredNum(s.Retired, uint64(lv.Value)).Name = lv.Name
		default:
			c.add(s.Pos, ruleRemoved, "enum %s%s: %s (%d) is no longer declared: keep it, or retire it with retired=%d", s.Name, in, lv.Name, lv.Value, lv.Value)
		}
	}
	for _, lr := range l.Retired {
		if sr := retiredNum(s.Retired, lr.Num); sr != nil {
			if sr.Name == "" {
				sr.Name = lr.Name
			}
			continue
		}
		if _, reused := byValue[uint8(lr.Num)]; reused {
			c.add(s.Pos, ruleRetiredReused, "enum %s%s: %s takes value %d, which was retired", s.Name, in, nameOfValue(s, uint8(lr.Num)), lr.Num)
		} else {
			c.add(s.Pos, ruleRetiredDropped, "enum %s%s: value %d is retired in the lock: keep it in retired=", s.Name, in, lr.Num)
		}
	}
}

func nameOfValue(d *decl, v uint8) string {
	for _, x := range d.Values {
		if x.Value == v {
			return x.Name
		}
	}
	return ""
}
