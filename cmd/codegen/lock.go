package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The layout lock: a text file beside the schema (lockName, committed
// with it) that records every layout cmd/codegen has generated from the
// schema, which rows already stored may hold. Each run reads it, compares
// the schema with it (evolve.go) and, when no rule is broken, renders it
// again from the schema: additions extend it, renames and loosened bounds
// update it, drafts are listed but not locked.
//
// The format is line-oriented, sorted and free of positions, so that a
// diff of it shows exactly the layouts a change adds, renames or retires:
//
//	namespace orders
//
//	key 100 OrderKey value=OrderV1,OrderV2
//		Customer CustomerID            a key class: tag, name, its value family
//		PlacedAtMs uint64              (oldest first); its fields in order:
//		retired 3 OrderV3              name, type, bounds; a retired version
//
//	record OrderV1 version=1           a released record version
//		Lines []Line max=50
//	record OrderV2 version=2 format=2  the store format that introduced it
//
//	record ReservationV1 version=1 union
//		1 Ticketed ReservationTicketed a variant: tag, name, struct
//		2 Expired Expired format=2     (format= when not 1)
//		retired 4 Expired              a retired tag, reserved for ever
//
//	union Shard partition              a partition union (kind= per variant)
//	struct Line                        a struct a locked layout uses
//	enum Status                        values: number, name [format=N]
//	identity CustomerID min=1 max=40
//	retired key 7 OldKey               a retired key class tag
//	retired record OrderV0             a retired record name
//	draft record OrderV2 version=2     a draft: listed, not locked
//
// Sections come in that order: the namespace, key classes by tag,
// records by name, partition unions by name, then the types they use by
// name, the retired key classes and records, the drafts. Every line but
// a comment (#) or a blank line is generated; the lock is never edited by
// hand.

// lockName is the lock's file name, in the schema package's directory.
const lockName = "layout.lock"

// lockHeader opens every lock. It does not carry the generated-code
// header (header): tools that fold generated files away in a review would
// fold this one, whose every change a reviewer must see.
const lockHeader = `# Written by cmd/codegen: edit the schema, never this file.
#
# The layout lock of this schema package: every layout cmd/codegen has
# generated from it, which rows already stored may hold. On every run
# (go generate, codegen -check) the generator compares the schema with
# this file and refuses, naming the rule, a change that would make stored
# bytes read differently or fail: a field added, removed, moved or
# retyped, a key class's fields or value changed, a tag, version, variant
# or enum value renumbered, removed without retirement or reused, a bound
# tightened, the namespace changed. Additions extend the lock; a layout
# marked draft is listed but not locked. The rules: go doc
# github.com/mkit-dev/mkitfdb/schema (Evolving a schema). Commit this file
# with the schema.
`

// lockFormat is the first line after the header: the version of this
// file's format. Format 2 adds value families of more than one version,
// a family's retired versions and format=; a lock that uses none of them
// is written as format 1, which generators before format 2 read too.
const (
	lockFormat  = "layout-lock 1"
	lockFormat2 = "layout-lock 2"
)

// lockFormatOf is the format line of a lock holding the entries of
// locked: the first format that can hold them.
func lockFormatOf(locked []*decl) string {
	for _, d := range locked {
		if d.Format > 1 || d.Key && (len(d.Family) > 1 || len(d.Retired) > 0) {
			return lockFormat2
		}
		for _, v := range d.Variants {
			if v.Format > 1 {
				return lockFormat2
			}
		}
		for _, v := range d.Values {
			if v.Format > 1 {
				return lockFormat2
			}
		}
	}
	return lockFormat
}

// renderLock renders the lock of s: its namespace, its released key
// classes and records and partition unions, the types they use, its
// retirements and its drafts.
func renderLock(s *schema) []byte {
	var b bytes.Buffer
	b.WriteString(lockHeader)

	keys := slices.Clone(s.keys())
	slices.SortFunc(keys, func(a, b *decl) int { return cmpUint(uint64(a.Tag), uint64(b.Tag)) })
	records := slices.Clone(s.records())
	slices.SortFunc(records, func(a, b *decl) int { return strings.Compare(a.Name, b.Name) })
	partitions := s.filter(func(d *decl) bool { return d.Kind == kindUnion && d.Partition })
	slices.SortFunc(partitions, func(a, b *decl) int { return strings.Compare(a.Name, b.Name) })

	// used holds every type a released layout reaches.
	used := map[*decl]bool{}
	var reach func(d *decl)
	reach = func(d *decl) {
		for _, c := range children(d) {
			if !used[c] {
				used[c] = true
				reach(c)
			}
		}
	}
	var roots []*decl
	for _, d := range keys {
		if !d.Draft {
			roots = append(roots, d)
		}
	}
	for _, d := range records {
		if !d.Draft {
			roots = append(roots, d)
		}
	}
	roots = append(roots, partitions...)
	for _, d := range roots {
		reach(d)
	}
	var types []*decl
	for _, d := range s.Decls {
		if used[d] && !d.Key && !d.Record && !(d.Kind == kindUnion && d.Partition) {
			types = append(types, d)
		}
	}
	slices.SortFunc(types, func(a, b *decl) int { return strings.Compare(a.Name, b.Name) })

	locked := append(roots, types...)
	b.WriteString("\n" + lockFormatOf(locked) + "\n")
	fmt.Fprintf(&b, "\nnamespace %s\n", s.Namespace)
	for _, d := range locked {
		b.WriteString("\n")
		writeLockDecl(&b, d)
	}

	retiredKeys := slices.Clone(s.RetiredKeys)
	slices.SortFunc(retiredKeys, func(a, b *retired) int { return cmpUint(a.Num, b.Num) })
	retiredRecords := slices.Clone(s.RetiredRecords)
	slices.SortFunc(retiredRecords, func(a, b *retired) int { return strings.Compare(a.Name, b.Name) })
	if len(retiredKeys)+len(retiredRecords) > 0 {
		b.WriteString("\n")
	}
	for _, r := range retiredKeys {
		fmt.Fprintf(&b, "retired key %d%s\n", r.Num, optName(r.Name))
	}
	for _, r := range retiredRecords {
		fmt.Fprintf(&b, "retired record %s\n", r.Name)
	}

	var drafts []string
	for _, d := range keys {
		if d.Draft {
			drafts = append(drafts, fmt.Sprintf("draft key %d %s\n", d.Tag, d.Name))
		}
	}
	for _, d := range records {
		if d.Draft {
			drafts = append(drafts, fmt.Sprintf("draft record %s version=%d\n", d.Name, d.Version))
		}
	}
	if len(drafts) > 0 {
		b.WriteString("\n")
	}
	for _, line := range drafts {
		b.WriteString(line)
	}
	return b.Bytes()
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// optName is " name", or "" for no name.
func optName(name string) string {
	if name == "" {
		return ""
	}
	return " " + name
}

// writeLockDecl writes the entry of d: its header line, then its fields,
// variants or values, one a line, indented by a tab.
func writeLockDecl(b *bytes.Buffer, d *decl) {
	switch {
	case d.Key:
		fmt.Fprintf(b, "key %d %s", d.Tag, d.Name)
		if len(d.Family) > 0 {
			names := make([]string, len(d.Family))
			for i, v := range d.Family {
				names[i] = v.Name
			}
			fmt.Fprintf(b, " value=%s", strings.Join(names, ","))
		}
	case d.Record:
		fmt.Fprintf(b, "record %s version=%d", d.Name, d.Version)
		if d.Kind == kindUnion {
			b.WriteString(" union")
		}
		b.WriteString(formatOpt(d.Format))
	case d.Kind == kindUnion:
		fmt.Fprintf(b, "union %s", d.Name)
		if d.Partition {
			b.WriteString(" partition")
		}
	case d.Kind == kindEnum:
		fmt.Fprintf(b, "enum %s", d.Name)
	case d.Kind == kindIdentity:
		fmt.Fprintf(b, "identity %s min=%d max=%d", d.Name, d.Min, d.Max)
	default:
		fmt.Fprintf(b, "struct %s", d.Name)
	}
	b.WriteString("\n")
	switch d.Kind {
	case kindStruct:
		for _, fl := range d.Fields {
			fmt.Fprintf(b, "\t%s %s", fl.Name, typeString(fl.Type))
			for _, opt := range fieldOpts(fl) {
				b.WriteString(" " + opt)
			}
			b.WriteString("\n")
		}
	case kindUnion:
		vs := slices.Clone(d.Variants)
		slices.SortFunc(vs, func(a, b *variant) int { return cmpUint(uint64(a.Tag), uint64(b.Tag)) })
		for _, v := range vs {
			fmt.Fprintf(b, "\t%d %s %s", v.Tag, v.Name, v.Type.Name)
			if d.Partition {
				fmt.Fprintf(b, " kind=%s", v.KindName)
			}
			b.WriteString(formatOpt(v.Format) + "\n")
		}
	case kindEnum:
		vs := slices.Clone(d.Values)
		slices.SortFunc(vs, func(a, b enumValue) int { return cmpUint(uint64(a.Value), uint64(b.Value)) })
		for _, v := range vs {
			fmt.Fprintf(b, "\t%d %s%s\n", v.Value, v.Name, formatOpt(v.Format))
		}
	}
	rs := slices.Clone(d.Retired)
	slices.SortFunc(rs, func(a, b *retired) int { return cmpUint(a.Num, b.Num) })
	for _, r := range rs {
		fmt.Fprintf(b, "\tretired %d%s\n", r.Num, optName(r.Name))
	}
}

// formatOpt is " format=N", or "" for format 1 (the default).
func formatOpt(f uint32) string {
	if f <= 1 {
		return ""
	}
	return " format=" + strconv.FormatUint(uint64(f), 10)
}

// typeString is t in Go syntax, as the lock writes and reads it.
func typeString(t *typeRef) string {
	switch t.Kind {
	case refPrim:
		return t.Prim
	case refBytes:
		return "[]byte"
	case refArray:
		return "[" + strconv.Itoa(t.Len) + "]byte"
	case refNamed:
		if t.Decl != nil {
			return t.Decl.Name
		}
		return t.name
	case refSlice:
		return "[]" + typeString(t.Elem)
	case refPtr:
		return "*" + typeString(t.Elem)
	}
	return "?"
}

// fieldOpts are the options of fl, in a fixed order, as the lock writes
// them.
func fieldOpts(fl *field) []string {
	var out []string
	if fl.HasMax {
		out = append(out, "max="+strconv.Itoa(fl.Max))
	}
	if fl.HasElemMax {
		out = append(out, "elem_max="+strconv.Itoa(fl.ElemMax))
	}
	if fl.HasMin {
		out = append(out, "min="+strconv.FormatUint(fl.Min, 10))
	}
	if fl.Le != "" {
		out = append(out, "le="+fl.Le)
	}
	if fl.Sorted {
		out = append(out, "sorted")
	}
	if fl.Optional {
		out = append(out, "optional")
	}
	return out
}

// errLock is wrapped by every error reading a lock that is not one
// cmd/codegen wrote.
var errLock = errors.New("the layout lock is generated by cmd/codegen and was changed by hand or damaged: restore it from version control")

// readLock reads the lock in dir: nil, and no error, when there is none
// (the first run writes it).
func readLock(dir string) (*schema, error) {
	path := filepath.Join(dir, lockName)
	src, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseLock(path, src)
}

// parseLock parses a lock written by renderLock; path names it in errors.
func parseLock(path string, src []byte) (*schema, error) {
	p := &lockParser{path: path, s: &schema{byName: map[string]*decl{}}}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	sawFormat := false
	for sc.Scan() {
		p.line++
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if !sawFormat {
			if text != lockFormat && text != lockFormat2 {
				if n, ok := strings.CutPrefix(text, "layout-lock "); ok && newerLockFormat(n) {
					p.err = fmt.Errorf("%s: %s is written by a newer cmd/codegen than this one, which reads %q and %q: generate with the cmd/codegen of the mkitfdb version the module requires", p.pos(), text, lockFormat, lockFormat2)
					break
				}
				p.fail("want %q or %q, the lock formats this generator reads, found %q", lockFormat, lockFormat2, text)
				break
			}
			sawFormat = true
			continue
		}
		if member, ok := strings.CutPrefix(text, "\t"); ok {
			p.member(strings.Fields(member))
		} else {
			p.entry(strings.Fields(text))
		}
		if p.err != nil {
			break
		}
	}
	if err := sc.Err(); err != nil && p.err == nil {
		p.err = fmt.Errorf("%s: %w", path, err)
	}
	if p.err == nil && !sawFormat {
		p.fail("no %q line", lockFormat)
	}
	if p.err == nil && p.s.Namespace == "" {
		p.fail("no namespace line")
	}
	if p.err == nil {
		p.resolve()
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.s, nil
}

type lockParser struct {
	path string
	line int
	s    *schema
	cur  *decl // the entry member lines belong to, or nil
	err  error
}

func (p *lockParser) pos() token.Position {
	return token.Position{Filename: p.path, Line: p.line}
}

func (p *lockParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: %s (%w)", p.pos(), fmt.Sprintf(format, args...), errLock)
	}
}

// num parses s as an integer in 0..hi.
func (p *lockParser) num(s string, hi uint64) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > hi {
		p.fail("%q is not a number in 0-%d", s, hi)
	}
	return n
}

// newerLockFormat reports whether n is a lock format number above the
// ones this generator reads.
func newerLockFormat(n string) bool {
	v, err := strconv.ParseUint(n, 10, 32)
	return err == nil && v > 2
}

// format parses the optional format=N that may end w, for an entry or
// member line: its value (1 when absent) and w without it.
func (p *lockParser) format(w []string) (uint32, []string) {
	if len(w) == 0 || !strings.HasPrefix(w[len(w)-1], "format=") {
		return 1, w
	}
	f := p.arg(w[len(w)-1], "format", 1<<32-1)
	if f < 2 {
		p.fail("format=%d is the default and is not written", f)
	}
	return uint32(f), w[:len(w)-1]
}

// arg parses s as key=N with N in 0..hi.
func (p *lockParser) arg(s, key string, hi uint64) uint64 {
	v, ok := strings.CutPrefix(s, key+"=")
	if !ok {
		p.fail("want %s=N, found %q", key, s)
		return 0
	}
	return p.num(v, hi)
}

// add declares d, an entry of the lock.
func (p *lockParser) add(d *decl) {
	if _, dup := p.s.byName[d.Name]; dup {
		p.fail("%s is locked twice", d.Name)
		return
	}
	if d.Key {
		for _, k := range p.s.keys() {
			if k.Tag == d.Tag {
				p.fail("key tag %d is locked twice", d.Tag)
				return
			}
		}
	}
	p.s.byName[d.Name] = d
	p.s.Decls = append(p.s.Decls, d)
	p.cur = d
}

func (p *lockParser) entry(w []string) {
	p.cur = nil
	d := &decl{Pos: p.pos()}
	want := func(n int, form string) bool {
		if len(w) != n {
			p.fail("want %q", form)
			return false
		}
		return true
	}
	switch {
	case len(w) == 2 && w[0] == "namespace":
		if p.s.Namespace != "" {
			p.fail("second namespace line")
		}
		p.s.Namespace, p.s.nsPos = w[1], p.pos()
	case len(w) >= 3 && w[0] == "key":
		if len(w) > 4 {
			p.fail("want \"key TAG Name [value=Record,...]\"")
			return
		}
		d.Key, d.Kind, d.Tag, d.Name = true, kindStruct, uint32(p.num(w[1], 1<<32-1)), w[2]
		if len(w) == 4 {
			v, ok := strings.CutPrefix(w[3], "value=")
			if !ok || v == "" {
				p.fail("want value=Record,..., found %q", w[3])
			}
			d.familyNames = strings.Split(v, ",")
		}
		p.add(d)
	case len(w) >= 3 && w[0] == "record":
		var f uint32
		f, w = p.format(w)
		if len(w) > 4 || len(w) == 4 && w[3] != "union" {
			p.fail("want \"record Name version=N [union] [format=N]\"")
			return
		}
		d.Record, d.Kind, d.Name, d.Version, d.Format = true, kindStruct, w[1], uint8(p.arg(w[2], "version", 255)), f
		if len(w) == 4 {
			d.Kind = kindUnion
		}
		p.add(d)
	case len(w) >= 2 && w[0] == "union":
		if len(w) > 3 || len(w) == 3 && w[2] != "partition" {
			p.fail("want \"union Name [partition]\"")
			return
		}
		d.Kind, d.Name, d.Partition = kindUnion, w[1], len(w) == 3
		p.add(d)
	case len(w) >= 1 && w[0] == "struct":
		if want(2, "struct Name") {
			d.Kind, d.Name = kindStruct, w[1]
			p.add(d)
		}
	case len(w) >= 1 && w[0] == "enum":
		if want(2, "enum Name") {
			d.Kind, d.Name = kindEnum, w[1]
			p.add(d)
		}
	case len(w) >= 1 && w[0] == "identity":
		if want(4, "identity Name min=N max=N") {
			d.Kind, d.Name = kindIdentity, w[1]
			d.Min, d.Max = int(p.arg(w[2], "min", 1<<31-1)), int(p.arg(w[3], "max", 1<<31-1))
			p.add(d)
		}
	case len(w) >= 3 && w[0] == "retired" && w[1] == "key":
		if len(w) > 4 {
			p.fail("want \"retired key TAG [Name]\"")
			return
		}
		r := &retired{Num: p.num(w[2], 1<<32-1), Pos: p.pos()}
		if len(w) == 4 {
			r.Name = w[3]
		}
		if retiredNum(p.s.RetiredKeys, r.Num) != nil {
			p.fail("key tag %d is retired twice", r.Num)
		}
		p.s.RetiredKeys = append(p.s.RetiredKeys, r)
	case len(w) >= 2 && w[0] == "retired" && w[1] == "record":
		if want(3, "retired record Name") {
			if retiredName(p.s.RetiredRecords, w[2]) != nil {
				p.fail("record %s is retired twice", w[2])
			}
			p.s.RetiredRecords = append(p.s.RetiredRecords, &retired{Name: w[2], Pos: p.pos()})
		}
	case len(w) >= 2 && w[0] == "draft" && w[1] == "key":
		// Drafts are listed for the reader; nothing is locked.
		want(4, "draft key TAG Name")
	case len(w) >= 2 && w[0] == "draft" && w[1] == "record":
		want(4, "draft record Name version=N")
	default:
		p.fail("unknown line %q", strings.Join(w, " "))
	}
}

func (p *lockParser) member(w []string) {
	d := p.cur
	if d == nil || len(w) == 0 {
		p.fail("an indented line belongs to a key, record, union, struct or enum entry")
		return
	}
	if w[0] == "retired" {
		if d.Kind != kindUnion && d.Kind != kindEnum && !(d.Key && d.familyNames != nil) || len(w) < 2 || len(w) > 3 {
			p.fail("want \"retired N [Name]\" in a union, an enum or a key class with value=")
			return
		}
		hi := uint64(255)
		r := &retired{Num: p.num(w[1], hi), Pos: p.pos()}
		if len(w) == 3 {
			r.Name = w[2]
		}
		d.Retired = append(d.Retired, r)
		return
	}
	switch d.Kind {
	case kindStruct:
		if len(w) < 2 {
			p.fail("want \"Field Type [options]\"")
			return
		}
		fl := &field{Name: w[0], Pos: p.pos(), Type: p.typeRef(w[1])}
		for _, opt := range w[2:] {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "max":
				fl.Max, fl.HasMax = int(p.num(v, 1<<31-1)), true
			case "elem_max":
				fl.ElemMax, fl.HasElemMax = int(p.num(v, 1<<31-1)), true
			case "min":
				fl.Min, fl.HasMin = p.num(v, 1<<64-1), true
			case "le":
				fl.Le = v
			case "sorted":
				fl.Sorted = true
			case "optional":
				fl.Optional = true
			default:
				p.fail("unknown field option %q", opt)
			}
		}
		d.Fields = append(d.Fields, fl)
	case kindUnion:
		var f uint32
		f, w = p.format(w)
		if len(w) != 3 && !(d.Partition && len(w) == 4) {
			p.fail("want \"TAG Name Struct [kind=name] [format=N]\"")
			return
		}
		v := &variant{Tag: uint8(p.num(w[0], 255)), Name: w[1], Pos: p.pos(), Format: f}
		v.Type = &decl{Name: w[2]} // resolved by resolve
		if len(w) == 4 {
			k, ok := strings.CutPrefix(w[3], "kind=")
			if !ok {
				p.fail("want kind=name, found %q", w[3])
			}
			v.KindName = k
		}
		d.Variants = append(d.Variants, v)
	case kindEnum:
		var f uint32
		f, w = p.format(w)
		if len(w) != 2 {
			p.fail("want \"VALUE Name [format=N]\"")
			return
		}
		d.Values = append(d.Values, enumValue{Value: uint8(p.num(w[0], 255)), Name: w[1], Format: f})
	default:
		p.fail("%s %s has no indented lines", "identity", d.Name)
	}
}

// typeRef parses a type written by typeString.
func (p *lockParser) typeRef(s string) *typeRef {
	switch {
	case s == "[]byte":
		return &typeRef{Kind: refBytes}
	case strings.HasPrefix(s, "[]"):
		return &typeRef{Kind: refSlice, Elem: p.typeRef(s[2:])}
	case strings.HasPrefix(s, "*"):
		return &typeRef{Kind: refPtr, Elem: p.typeRef(s[1:])}
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]byte"):
		return &typeRef{Kind: refArray, Len: int(p.num(s[1:len(s)-len("]byte")], 4096))}
	case prims[s]:
		return &typeRef{Kind: refPrim, Prim: s}
	case token.IsIdentifier(s):
		return &typeRef{Kind: refNamed, name: s}
	}
	p.fail("malformed type %q", s)
	return &typeRef{Kind: refPrim, Prim: "bool"}
}

// resolve binds the lock's named types and variant structs to its
// entries.
func (p *lockParser) resolve() {
	var walk func(pos token.Position, t *typeRef)
	walk = func(pos token.Position, t *typeRef) {
		if t == nil {
			return
		}
		if t.Kind == refNamed {
			t.Decl = p.s.byName[t.name]
			if t.Decl == nil || t.Decl.Key || t.Decl.Record {
				p.line = pos.Line
				p.fail("type %s has no struct, union, enum or identity entry", t.name)
			}
		}
		walk(pos, t.Elem)
	}
	for _, d := range p.s.Decls {
		for _, fl := range d.Fields {
			walk(fl.Pos, fl.Type)
		}
		for _, name := range d.familyNames {
			r := p.s.byName[name]
			if r == nil || !r.Record {
				p.line = d.Pos.Line
				p.fail("key %s: value %s has no record entry", d.Name, name)
				continue
			}
			d.Family = append(d.Family, r)
		}
		for _, v := range d.Variants {
			st := p.s.byName[v.Type.Name]
			if st == nil || st.Kind != kindStruct || st.Key || st.Record {
				p.line = v.Pos.Line
				p.fail("variant %s: %s has no struct entry", v.Name, v.Type.Name)
				continue
			}
			v.Type = st
		}
	}
}
