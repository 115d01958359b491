package relay

import (
	"bytes"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: a row names its target by the target's tuple identity
// (RelayV1.Target, the bytes store.IdentityOf gives), so the relay serves
// the partitions of any schema without parsing them. The decoded Target
// aliases the row's bytes, so decoding allocates nothing for it; the rows
// a fire reads for one target repeat its identity, and a targetIndex finds
// a row's group by comparing those bytes, parsing (and allocating) an
// identity only for the first row of each target in the window.

// targetIndex maps the target identities of a window to their groups. Its
// zero value is not ready: its map must be made.
type targetIndex struct {
	groupOf map[string]int // by identity bytes
	last    int            // the group of the last row looked up (-1: none)
}

// reset forgets every target, keeping the memory.
func (x *targetIndex) reset() {
	clear(x.groupOf)
	x.last = -1
}

// find returns the group among groups of the target named by id, or -1
// when the window has not seen it. Consecutive rows often share a target,
// so it tries the last first.
func (x *targetIndex) find(id []byte, groups []group) int {
	if x.last >= 0 && bytes.Equal(groups[x.last].id, id) {
		return x.last
	}
	// A string conversion in a map index does not allocate.
	g, ok := x.groupOf[string(id)]
	if !ok {
		return -1
	}
	x.last = g
	return g
}

// add parses id as a new target's identity and records it as group g. It
// fails with an error wrapping store.ErrCorrupt when id is not a tuple
// identity: no partition can be addressed by it.
func (x *targetIndex) add(id []byte, g int) (store.Identity, error) {
	t, err := store.ParseIdentity(id)
	if err != nil {
		return store.Identity{}, fmt.Errorf("relay row target: %w", err)
	}
	x.groupOf[string(id)] = g
	x.last = g
	return t, nil
}
