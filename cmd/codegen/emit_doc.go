package main

import (
	"fmt"
	"strings"

	. "github.com/dave/jennifer/jen"
)

// emitDoc writes the generated package's doc: what it holds, named from
// the schema, and the contract every generated function keeps, so that
// `go doc` on any generated package explains it without the generator.
func emitDoc(f *File, s *schema) {
	var keys, records, identities, partitions []string
	for _, d := range s.Decls {
		switch {
		case d.Key:
			keys = append(keys, d.Name)
		case d.Record:
			records = append(records, d.Name)
		case d.Kind == kindIdentity:
			identities = append(identities, d.Name)
		case d.Kind == kindUnion && d.Partition:
			partitions = append(partitions, d.Name)
		}
	}
	pkg := s.pkg
	var b strings.Builder
	fmt.Fprintf(&b, "Package %s holds the Go types and codecs cmd/codegen generates from a\n", pkg)
	b.WriteString("schema package (the one whose //go:generate line names this directory).\n")
	b.WriteString("Edit the schema, not this package: go generate rewrites it.\n")
	if len(keys) > 0 {
		fmt.Fprintf(&b, "\nKey classes (%s): for a class K, AppendK(dst, fields...) appends its key\n", list(keys))
		b.WriteString("(a FoundationDB tuple: the class tag, then the fields, so byte order is\n")
		b.WriteString("field order; no allocation when dst has room), K.AppendKey does the same\n")
		b.WriteString("for a value, ParseK parses one, ParseKey parses a key of any class and\n")
		b.WriteString("ClassRange(tag) is the range that holds a class.\n")
	}
	if len(records) > 0 {
		fmt.Fprintf(&b, "\nRecords (%s): for a record R, AppendR and EncodeR encode a value after\n", list(records))
		b.WriteString("checking every rule of the schema (an error wrapping wire.ErrInvalid\n")
		b.WriteString("otherwise, nothing appended); DecodeR decodes strictly: truncated input,\n")
		b.WriteString("trailing bytes, an unknown version, variant or enum value, a length over\n")
		b.WriteString("its bound or a broken rule is an error wrapping wire.ErrCorrupt that\n")
		b.WriteString("names the record, the field and the reason, and no input makes a decoder\n")
		b.WriteString("panic. Decoded []byte fields alias the input; DecodeRInto decodes into a\n")
		b.WriteString("value, reusing its slices.\n")
	}
	if len(identities) > 0 {
		fmt.Fprintf(&b, "\nIdentities (%s) are valid by construction: NewX validates a\n", list(identities))
		b.WriteString("name (an error wrapping wire.ErrInvalid), MustX panics instead, for\n")
		b.WriteString("constants; every value but the zero one is valid.\n")
	}
	if len(partitions) > 0 {
		fmt.Fprintf(&b, "\nPartition unions (%s): each variant is a store.Partition, identified\n", list(partitions))
		b.WriteString("by its tuple encoding.\n")
	}
	b.WriteString("\nEvery function is safe for concurrent use.")
	for _, line := range wrap(b.String(), 76) {
		f.PackageComment(line)
	}
}

// wrap refills each paragraph of text (separated by blank lines) to lines
// of at most width bytes, or one word where a word is longer; a blank line
// stays between paragraphs.
func wrap(text string, width int) []string {
	var out []string
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			out = append(out, "")
		}
		line := ""
		for _, w := range strings.Fields(para) {
			switch {
			case line == "":
				line = w
			case len(line)+1+len(w) > width:
				out = append(out, line)
				line = w
			default:
				line += " " + w
			}
		}
		out = append(out, line)
	}
	return out
}

// list names at most four declarations, then how many more there are.
func list(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:4], ", "), len(names)-4)
}
