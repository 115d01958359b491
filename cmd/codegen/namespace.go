package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Namespaces and reserved ranges: what keeps the partitions and key
// classes of two schemas in one store apart by construction.
//
// Every schema package declares one //mk:namespace NAME in its package doc
// comment, and every partition identity it generates starts with NAME as a
// tuple string element, so an identity of one schema is never a tuple
// prefix of another schema's. The library's own schema package
// (libraryPkg) alone may use the namespace "mkit" or any name starting with
// "mkit", and the key class tags 1..maxLibraryTag; an importing schema's
// key classes use tags from minUserTag up.

const (
	// libraryPkg is the import path of the library's own schema package.
	libraryPkg = "github.com/mkit-dev/mkitfdb/schema"
	// reservedNamespace is the namespace, and the prefix of every
	// namespace, reserved for the library.
	reservedNamespace = "mkit"
	// maxNamespaceLen is the most bytes of a namespace.
	maxNamespaceLen = 32
	// maxLibraryTag is the largest key class tag reserved for the
	// library's runtime key classes; minUserTag the smallest an importing
	// schema may declare.
	maxLibraryTag = 99
	minUserTag    = maxLibraryTag + 1
)

// namespaces reads the //mk:namespace directives of files (any comment
// line starting with //mk:namespace) and sets s.Namespace: exactly one,
// in a package doc comment, with a valid name that only the library's
// schema may take from the reserved ones. s.library must be set.
func (l *loader) namespaces(files []*ast.File) {
	var first token.Position
	found := false
	for _, f := range files {
		for _, g := range f.Comments {
			for _, c := range g.List {
				text, ok := strings.CutPrefix(c.Text, "//mk:namespace")
				if !ok || (text != "" && text[0] != ' ' && text[0] != '\t') {
					continue
				}
				pos := l.pos(c)
				if g != f.Doc {
					l.errs.add(pos, "//mk:namespace belongs in the package doc comment (right above the package clause)")
					continue
				}
				if found {
					l.errs.add(pos, "second //mk:namespace: the namespace is already declared at %s", first)
					continue
				}
				found, first = true, pos
				l.namespace(pos, strings.Fields(text))
			}
		}
	}
	if !found {
		l.errs.add(l.fset.Position(files[0].Package), "package %s declares no namespace: add //mk:namespace NAME (1-%d bytes of a-z, 0-9 and _, starting with a letter) to its package doc comment",
			files[0].Name.Name, maxNamespaceLen)
	}
}

// namespace checks the arguments of one //mk:namespace directive at pos
// and records the name.
func (l *loader) namespace(pos token.Position, args []string) {
	if len(args) != 1 {
		l.errs.add(pos, "//mk:namespace needs exactly one name, found %d", len(args))
		return
	}
	name := args[0]
	if problem := namespaceProblem(name); problem != "" {
		l.errs.add(pos, "namespace %q: %s", name, problem)
		return
	}
	if strings.HasPrefix(name, reservedNamespace) && !l.s.library {
		l.errs.add(pos, "namespace %q: namespaces starting with %q are reserved for the library's schema (%s)", name, reservedNamespace, libraryPkg)
		return
	}
	l.s.Namespace, l.s.nsPos = name, pos
}

// namespaceProblem says what is wrong with name as a namespace, or "".
func namespaceProblem(name string) string {
	if len(name) == 0 || len(name) > maxNamespaceLen {
		return "must be 1-" + strconv.Itoa(maxNamespaceLen) + " bytes long"
	}
	if name[0] < 'a' || name[0] > 'z' {
		return "must start with a letter a-z"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return "byte " + strconv.Itoa(i) + " (" + strconv.QuoteRune(rune(c)) + ") is not one of a-z, 0-9 and _"
		}
	}
	return ""
}

// keyTagRange is the range of key class tags a schema may declare, and the
// rule that states it: 1..99 for the library's schema, 100 and above for
// any other.
func keyTagRange(library bool) (lo, hi uint64, rule string) {
	if library {
		return 1, maxLibraryTag, fmt.Sprintf("the library's key classes take tags 1-%d", maxLibraryTag)
	}
	return minUserTag, math.MaxUint32, fmt.Sprintf("an importing schema's key classes take tags %d-%d (1-%d are reserved for the library's)", minUserTag, uint64(math.MaxUint32), maxLibraryTag)
}

// importPath returns the import path of the package in dir, from the
// module path of the nearest go.mod at or above it, or "" when there is
// none or it names no module.
func importPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := abs; ; d = filepath.Dir(d) {
		if src, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			mod := modulePath(src)
			if mod == "" {
				return ""
			}
			rel, err := filepath.Rel(d, abs)
			if err != nil {
				return ""
			}
			if rel == "." {
				return mod
			}
			return mod + "/" + filepath.ToSlash(rel)
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// modulePath returns the path of the module directive of a go.mod, or "".
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if i := strings.Index(rest, "//"); i >= 0 {
			rest = strings.TrimSpace(rest[:i])
		}
		if p, err := strconv.Unquote(rest); err == nil {
			return p
		}
		return rest
	}
	return ""
}
