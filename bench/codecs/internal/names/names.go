// Package names builds gen identities from another codec's strings for
// the conversions of the codec benchmarks, keeping the first invalid
// name's error: gen builds identities only from valid names.
package names

import "github.com/mkit-dev/mkitfdb/refdomain"

// Builder builds names; after the first invalid one, Reservation returns
// its error. The zero value is ready to use.
type Builder struct{ err error }

// Repo builds a refdomain.RepoName.
func (n *Builder) Repo(s string) refdomain.RepoName { return build(n, s, refdomain.NewRepoName) }

// Ref builds a refdomain.ShardRef.
func (n *Builder) Ref(s string) refdomain.ShardRef { return build(n, s, refdomain.NewShardRef) }

func build[T any](n *Builder, s string, newT func(string) (T, error)) T {
	v, err := newT(s)
	if n.err == nil {
		n.err = err
	}
	return v
}

// Reservation returns r, or the first name error.
func (n *Builder) Reservation(r refdomain.ReservationV1) (refdomain.ReservationV1, error) {
	if n.err != nil {
		return nil, n.err
	}
	return r, nil
}
