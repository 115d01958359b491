package readme

import (
	"bufio"
	"bytes"
	"strings"
)

// Block is one fenced code block of a markdown file.
type Block struct {
	Lang    string // the info string's first word: "sh", "go", "text"
	Section string // the text of the "## " heading it is under
	Line    int    // 1-based line of its opening fence
	Lines   []string
}

// Blocks returns the fenced (```) code blocks of md in order. An unclosed
// block runs to the end.
func Blocks(md []byte) []Block {
	var (
		out     []Block
		cur     *Block
		section string
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		switch {
		case cur == nil && fence:
			lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "```")), " ")
			cur = &Block{Lang: lang, Section: section, Line: n}
		case cur != nil && fence:
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Lines = append(cur.Lines, line)
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// Commands returns the commands of a shell block: each non-blank line
// that is not a comment, without its trailing "# comment" and spaces.
func (b Block) Commands() []string {
	var out []string
	for _, l := range b.Lines {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// File returns the file a Go block says it is ("// file: NAME" as its
// first line) and the block's text after that line; ok is false for a
// block that names no file.
func (b Block) File() (name, text string, ok bool) {
	if len(b.Lines) == 0 {
		return "", "", false
	}
	name, ok = strings.CutPrefix(b.Lines[0], "// file: ")
	if !ok {
		return "", "", false
	}
	return strings.TrimSpace(name), strings.TrimLeft(strings.Join(b.Lines[1:], "\n"), "\n") + "\n", true
}
