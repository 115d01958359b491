package store

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
)

// Identity is a partition known only by its tuple identity: the bytes a
// Partition's AppendTuple wrote, as the due index lists them. It
// addresses the same rows as the partition that wrote them, so code that
// finds partitions in the store (a scheduler reading the due index) can
// reach a partition of any schema without parsing it. Its Kind is
// IdentityKind; it prints as its kind and tuple, identity("orders", 1).
//
// The zero Identity is invalid: AppendTuple fails for it. An Identity is
// immutable and comparable.
type Identity struct {
	b string // the encoding: one or more tuple elements
}

// IdentityKind is the Kind of every Identity.
const IdentityKind = "identity"

// ParseIdentity returns the Identity encoded by b: one or more complete
// FoundationDB tuple elements. It fails with an error wrapping ErrCorrupt,
// naming the offset, for anything else: no partition's AppendTuple writes
// it, so no partition can be addressed by it. b is copied.
func ParseIdentity(b []byte) (Identity, error) {
	n, err := tuple.Check(b)
	switch {
	case err != nil:
		return Identity{}, fmt.Errorf("%w: partition identity %x: %w", ErrCorrupt, b, err)
	case n == 0:
		return Identity{}, fmt.Errorf("%w: empty partition identity", ErrCorrupt)
	}
	return Identity{b: string(b)}, nil
}

// IdentityOf returns p's Identity. It fails as p.AppendTuple does.
func IdentityOf(p Partition) (Identity, error) {
	b, err := p.AppendTuple(nil)
	if err != nil {
		return Identity{}, err
	}
	return Identity{b: string(b)}, nil
}

// AppendTuple appends the identity's encoding to dst. It fails with
// ErrInvalid for the zero Identity.
func (id Identity) AppendTuple(dst []byte) ([]byte, error) {
	if id.b == "" {
		return dst, fmt.Errorf("%w: the zero partition Identity", ErrInvalid)
	}
	return append(dst, id.b...), nil
}

// Kind returns IdentityKind.
func (Identity) Kind() string { return IdentityKind }

// String prints the identity as its kind and tuple: identity("orders", 1).
func (id Identity) String() string { return IdentityKind + formatIdentity([]byte(id.b)) }

// formatIdentity prints a tuple identity: ("orders", 1), or its bytes in
// hex when they do not decode.
func formatIdentity(b []byte) string {
	t, err := tuple.Unpack(b)
	if err != nil || len(t) == 0 {
		return fmt.Sprintf("(%x)", b)
	}
	return t.String()
}
