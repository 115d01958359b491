package timers

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// Registry maps timer kinds to their handlers. The zero value is an empty
// registry; it is safe for concurrent use, so handlers may be registered
// while runs are in flight.
type Registry struct {
	mu       sync.RWMutex
	handlers map[Kind]Handler
	// held limits the logs of corrupt timer rows, by partition identity
	// and key (see logHeld).
	held holdback
}

// NewRegistry returns a registry holding hs; it fails as Register does.
func NewRegistry(hs ...Handler) (*Registry, error) {
	r := &Registry{}
	for _, h := range hs {
		if err := r.Register(h); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds h for h.Kind(). It fails, leaving the registry unchanged,
// with ErrDuplicateKind when the kind has a handler already, and with
// store.ErrInvalid for a nil handler, for kind 0, and for a kind in the
// range reserved for the library (1 to MaxLibraryKind) unless h is a
// LibraryHandler whose ReservedKind reports true (see Kind).
func (r *Registry) Register(h Handler) error {
	if h == nil {
		return fmt.Errorf("timers: register a nil handler: %w", store.ErrInvalid)
	}
	k := h.Kind()
	lib, _ := h.(LibraryHandler)
	if err := k.checkUsable(lib != nil && lib.ReservedKind()); err != nil {
		return fmt.Errorf("timers: register %T: %w", h, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[k]; dup {
		return fmt.Errorf("%w: %v", ErrDuplicateKind, k)
	}
	if r.handlers == nil {
		r.handlers = make(map[Kind]Handler)
	}
	r.handlers[k] = h
	return nil
}

// Lookup returns the handler of kind k; ok is false when none is
// registered.
func (r *Registry) Lookup(k Kind) (h Handler, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok = r.handlers[k]
	return h, ok
}

// Kinds lists the registered kinds in ascending order.
func (r *Registry) Kinds() []Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ks := make([]Kind, 0, len(r.handlers))
	for k := range r.handlers {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// logHeld reports whether a corrupt timer row of partition p (its key
// within p) should be logged at nowMs: once per interval per row, however
// often the partition runs, so that a busy partition does not log one
// unmovable row at every fire.
func (r *Registry) logHeld(p store.Partition, key store.Key, nowMs uint64, interval time.Duration) bool {
	id, err := p.AppendTuple(nil)
	if err != nil {
		return true
	}
	return r.held.allow(string(append(id, key...)), nowMs, interval)
}
