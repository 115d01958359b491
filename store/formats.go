package store

import "fmt"

// Formats is implemented by stores that keep a format per namespace: the
// newest store format (a schema's format=, see codec/registry) in which the
// namespace's rows may be written, which every process of the store reads
// (fdblayer's Layer keeps it through package evolve's gate). Writers ask
// for it with FormatOf and write the newest version of a value the format
// allows (a generated family's Encode(v, format)), so that no process
// writes what another running process cannot read. A wrapper of a store
// forwards it, and so does the Reader of such a store (ReaderOf, a
// Transact function's), so that a writer handed only a Reader asks
// FormatOf(r, namespace) too.
type Formats interface {
	// Format returns the store's format of namespace, as the store last
	// read it: 1 for a namespace it keeps no format of. It never does I/O
	// and is safe for concurrent use. A store's format of a namespace only
	// ever grows.
	Format(namespace string) uint32
}

// FormatOf returns s's format of namespace when s (a Store, or a Reader
// of one) implements Formats, and 1, the format of every store that keeps
// none, otherwise (nil included).
func FormatOf(s any, namespace string) uint32 {
	if f, ok := s.(Formats); ok {
		if n := f.Format(namespace); n > 0 {
			return n
		}
	}
	return 1
}

// ErrNewerFormat is wrapped by the error of a store that refuses this
// process's writes because the store's format of a namespace is newer than
// the process's binary knows: its format was raised while the process ran
// (a process that slept through the raise, say), and rows of that format
// may now be written that the binary cannot read. It wraps ErrUnavailable:
// nothing was written, and a handler treats it as a store failure, never
// as its own; the process must be replaced by a binary that knows the
// format. Package evolve's gate (evolve.ErrNewerFormat is this error)
// fences a store so, and refuses to open one so.
var ErrNewerFormat = fmt.Errorf("the store's format is newer than this binary knows: %w", ErrUnavailable)
