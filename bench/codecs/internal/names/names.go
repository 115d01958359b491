// Package names builds gen identities from another codec's strings for
// the conversions of the codec benchmarks, keeping the first invalid
// name's error: gen builds identities only from valid names.
package names

import "github.com/mkit-dev/mkitfdb/gen"

// Builder builds names; after the first invalid one, Reservation returns
// its error. The zero value is ready to use.
type Builder struct{ err error }

// Repo builds a gen.RepoName.
func (n *Builder) Repo(s string) gen.RepoName { return build(n, s, gen.NewRepoName) }

// Ref builds a gen.ShardRef.
func (n *Builder) Ref(s string) gen.ShardRef { return build(n, s, gen.NewShardRef) }

func build[T any](n *Builder, s string, newT func(string) (T, error)) T {
	v, err := newT(s)
	if n.err == nil {
		n.err = err
	}
	return v
}

// Reservation returns r, or the first name error.
func (n *Builder) Reservation(r gen.ReservationV1) (gen.ReservationV1, error) {
	if n.err != nil {
		return nil, n.err
	}
	return r, nil
}
