package admin

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
)

// Partitions and keys are written on the command line as they are printed:
// a tuple, ("orders", 1, "ada"), or raw bytes in hex after x:
// (x:026f72646572730015...). Tuple elements are Go-quoted strings,
// b-prefixed Go-quoted byte strings (b"\x00\x01"), integers, true, false,
// nil and nested tuples.

// formatTuple prints b as a tuple when it is one, x:HEX otherwise.
func formatTuple(b []byte) string {
	t, err := tuple.Unpack(b)
	if err != nil || len(t) == 0 {
		return "x:" + hex.EncodeToString(b)
	}
	return t.String()
}

// parseTupleText parses what formatTuple prints: a tuple or x:HEX. It
// fails naming the offset of the problem.
func parseTupleText(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "x:"); ok {
		b, err := hex.DecodeString(rest)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%q is not hex bytes after x:", rest)
		}
		return b, nil
	}
	p := &tupleParser{s: s}
	t, err := p.tuple()
	if err == nil {
		p.space()
		if p.i != len(p.s) {
			err = p.errorf("unexpected text after the tuple")
		}
	}
	if err != nil {
		return nil, err
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("an empty tuple names nothing")
	}
	return tuple.Pack(t)
}

type tupleParser struct {
	s string
	i int
}

func (p *tupleParser) errorf(format string, a ...any) error {
	return fmt.Errorf("at offset %d of %q: %s", p.i, p.s, fmt.Sprintf(format, a...))
}

func (p *tupleParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *tupleParser) tuple() (tuple.Tuple, error) {
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != '(' {
		return nil, p.errorf("want ( to open a tuple, or x:HEX")
	}
	p.i++
	t := tuple.Tuple{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			return t, nil
		}
		if len(t) > 0 {
			if p.i >= len(p.s) || p.s[p.i] != ',' {
				return nil, p.errorf("want , or )")
			}
			p.i++
			p.space()
		}
		e, err := p.elem()
		if err != nil {
			return nil, err
		}
		t = append(t, e)
	}
}

func (p *tupleParser) elem() (any, error) {
	if p.i >= len(p.s) {
		return nil, p.errorf("the tuple is not closed")
	}
	switch c := p.s[p.i]; {
	case c == '(':
		return p.tuple()
	case c == '"':
		return p.quoted()
	case c == 'b' && p.i+1 < len(p.s) && p.s[p.i+1] == '"':
		p.i++
		s, err := p.quoted()
		return []byte(s), err
	}
	j := p.i
	for j < len(p.s) && !strings.ContainsRune(",) \t", rune(p.s[j])) {
		j++
	}
	word := p.s[p.i:j]
	switch word {
	case "nil":
		p.i = j
		return nil, nil
	case "true", "false":
		p.i = j
		return word == "true", nil
	}
	n, ok := new(big.Int).SetString(word, 10)
	if !ok {
		return nil, p.errorf("%q is no tuple element (a quoted string, b\"bytes\", an integer, true, false, nil or a tuple)", word)
	}
	p.i = j
	if n.IsInt64() {
		return n.Int64(), nil
	}
	if n.IsUint64() {
		return n.Uint64(), nil
	}
	return n, nil
}

func (p *tupleParser) quoted() (string, error) {
	prefix, err := strconv.QuotedPrefix(p.s[p.i:])
	if err != nil {
		return "", p.errorf("a quoted string does not end")
	}
	s, _ := strconv.Unquote(prefix)
	p.i += len(prefix)
	return s, nil
}
