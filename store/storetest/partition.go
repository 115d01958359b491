package storetest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/mkit-dev/mkitfdb/store"
)

// Partition is a partition identity for tests: a name, encoded as one
// FoundationDB tuple-layer string element.
//
// Encoding: 0x02, the name's bytes, 0x00. Distinct names never encode to
// a prefix of one another, as store.Partition requires.
//
// Design note: the tuple layer escapes a 0x00 inside a string as 0x00 0xFF,
// which makes "a" (02 61 00) a prefix of "a\x00" (02 61 00 FF 00): two such
// partitions would share a key prefix. A name holding 0x00 is therefore
// rejected, like the control characters generated identities reject.
//
// Broken makes AppendTuple fail, so tests can check that a store rejects a
// partition whose identity cannot encode. The zero value (empty name) fails
// the same way. Partition is a plain value, safe for concurrent use.
type Partition struct {
	Name   string
	Broken bool
}

// tupleString is the tuple-layer type code of a UTF-8 string element.
const tupleString = 0x02

// AppendTuple appends the tuple encoding of p's name to dst. It fails with
// an error wrapping store.ErrInvalid, leaving dst unextended, when p is
// Broken or its name is empty or holds a 0x00 byte.
func (p Partition) AppendTuple(dst []byte) ([]byte, error) {
	switch {
	case p.Broken:
		return dst, fmt.Errorf("%w: partition %s is broken on purpose", store.ErrInvalid, p)
	case p.Name == "":
		return dst, fmt.Errorf("%w: partition %s has an empty name", store.ErrInvalid, p)
	case strings.IndexByte(p.Name, 0x00) >= 0:
		return dst, fmt.Errorf("%w: partition %s has a 0x00 byte in its name", store.ErrInvalid, p)
	}
	dst = append(dst, tupleString)
	dst = append(dst, p.Name...)
	return append(dst, 0x00), nil
}

// Kind returns "test".
func (Partition) Kind() string { return "test" }

// String returns "test:" and the name, quoted when it holds anything but
// printable characters.
func (p Partition) String() string {
	for _, r := range p.Name {
		if !unicode.IsPrint(r) {
			return "test:" + strconv.Quote(p.Name)
		}
	}
	return "test:" + p.Name
}

var _ store.Partition = Partition{}
