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
	var keys, families, records, identities, partitions []string
	for _, d := range s.Decls {
		switch {
		case d.Key:
			keys = append(keys, d.Name)
			if len(d.Family) > 0 {
				families = append(families, d.Name+"Values")
			}
		case d.Record:
			records = append(records, d.Name)
		case d.Kind == kindIdentity:
			identities = append(identities, d.Name)
		case d.Kind == kindUnion && d.Partition:
			partitions = append(partitions, d.Name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Package %s holds the Go types and codecs cmd/codegen generates from a "+
		"schema package (the one whose //go:generate line names this directory). "+
		"Edit the schema, not this package: go generate rewrites it.\n", s.pkg)
	for _, para := range []struct {
		names []string
		text  string
	}{
		{keys, "Key classes (%s): for a class K, AppendK(dst, fields...) appends its key " +
			"(a FoundationDB tuple: the class tag, then the fields, so byte order is field order; " +
			"no allocation when dst has room), K.AppendKey does the same for a value, ParseK " +
			"parses one, [ParseKey] parses a key of any class and [ClassRange](tag) is the range " +
			"that holds a class. Tags 1-99 are the library's key classes, in any partition; an " +
			"importing schema's are 100 and above."},
		{records, "Records (%s): for a record R, AppendR and EncodeR encode a value after " +
			"checking every rule of the schema (an error wrapping [wire.ErrInvalid] otherwise, " +
			"nothing appended); DecodeR decodes strictly: truncated input, trailing bytes, an " +
			"unknown version, variant or enum value, a length over its bound or a broken rule " +
			"is an error wrapping [wire.ErrCorrupt] that names the record, the field and the " +
			"reason, and no input makes a decoder panic. Decoded []byte fields alias the input; " +
			"DecodeRInto decodes into a value, reusing its slices."},
		{families, "Value families (%s): for a key class K whose schema lists the records its " +
			"rows hold (value=A,B, oldest first), KVersions is the interface the rows' owner " +
			"implements to convert between adjacent versions (UpgradeA(A) (B, error); DowngradeB " +
			"for a version whose format is above the first's), and NewKValues(v) builds KValues: " +
			"Decode returns a value of any declared version as the newest (an older one decoded " +
			"strictly, then upgraded), DecodeInto decodes the newest through its own fast path, " +
			"Encode(v, format) writes the newest version a store's format allows (downgrading; " +
			"an error wrapping [wire.ErrFormatTooOld] when none is, or when v holds a variant or enum " +
			"constant of a newer format), and VersionOfKValue reads the version byte. A version " +
			"above the family's is not corrupt: it fails with a [wire.VersionError] wrapping " +
			"[wire.ErrNewerVersion], a row a newer binary wrote. A version added to a family adds a " +
			"method to KVersions, so the owner's call of NewKValues stops compiling until it " +
			"converts it. [SchemaFormat] is the newest store format the schema knows."},
		{identities, "Identities (%s) are valid by construction: NewX validates a name (an " +
			"error wrapping [wire.ErrInvalid]), MustX panics instead, for constants; every value " +
			"but the zero one is valid."},
		{partitions, "Partition unions (%s): each variant is a store.Partition, identified by " +
			"its tuple encoding ([SchemaNamespace], the variant tag, the fields...): the schema's " +
			"namespace first, so no identity of another schema's partition is a tuple prefix of " +
			"one of these, and ParseX refuses an identity of another namespace (an error wrapping " +
			"[wire.ErrCorrupt] that names the namespace found)."},
	} {
		if len(para.names) > 0 {
			b.WriteString("\n")
			fmt.Fprintf(&b, para.text+"\n", list(para.names))
		}
	}
	if s.unregistered {
		b.WriteString("\nThe package does not register itself in package registry (codec/registry): it was " +
			"generated with codegen -unregistered, for tests that link it beside the registered package of " +
			"its namespace, " + s.Namespace + ", as the codecs of an older or newer binary of the same schema. " +
			"Tools that look schemas up by namespace (package registry, the version gate) see the registered " +
			"package only.")
	} else {
		b.WriteString("\nThe package registers itself in package registry (codec/registry) when it " +
			"is initialised: its namespace, " + s.Namespace + ", its known format, its import path, and what parses its " +
			"partitions and keys and decodes its records (with their value families and formats). A second package declaring the namespace, " +
			"linked into the same program, makes it fail at start.")
	}
	if len(partitions) > 0 {
		b.WriteString(" A partition of the namespace holds this schema's records plus the " +
			"library's runtime records, never another schema's.")
	}
	b.WriteString("\n")
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
	links := make([]string, min(len(names), 4))
	for i := range links {
		links[i] = "[" + names[i] + "]"
	}
	if len(names) <= 4 {
		return strings.Join(links, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(links, ", "), len(names)-4)
}
