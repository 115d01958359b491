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
	mu    sync.RWMutex
	kinds map[Kind]*kindEntry
	// held limits the logs of corrupt timer rows, by partition identity
	// and key (see logHeld).
	held holdback
}

// kindEntry is a registered kind: its handler and configuration.
type kindEntry struct {
	h Handler
	kindConfig
}

// NewRegistry returns a registry holding hs, each registered with the
// zero KindConfig; it fails as Register does.
func NewRegistry(hs ...Handler) (*Registry, error) {
	r := &Registry{}
	for _, h := range hs {
		if err := r.Register(h, KindConfig{}); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds h for h.Kind(), configured by c (see KindConfig). It
// fails, leaving the registry unchanged, with ErrDuplicateKind when the
// kind has a handler already, and with store.ErrInvalid for a nil
// handler, for kind 0, for a kind in the range reserved for the library
// (1 to MaxLibraryKind) unless h is a LibraryHandler whose ReservedKind
// reports true (see Kind), and for a field of c out of its range.
func (r *Registry) Register(h Handler, c KindConfig) error {
	if h == nil {
		return fmt.Errorf("timers: register a nil handler: %w", store.ErrInvalid)
	}
	k := h.Kind()
	lib, _ := h.(LibraryHandler)
	reserved := lib != nil && lib.ReservedKind()
	if err := k.checkUsable(reserved); err != nil {
		return fmt.Errorf("timers: register %T: %w", h, err)
	}
	kc, err := c.kindConfig(reserved)
	if err != nil {
		return fmt.Errorf("timers: register %T: %w", h, err)
	}
	e := &kindEntry{h: h, kindConfig: kc}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.kinds[k]; dup {
		return fmt.Errorf("%w: %v", ErrDuplicateKind, k)
	}
	if r.kinds == nil {
		r.kinds = make(map[Kind]*kindEntry)
	}
	r.kinds[k] = e
	return nil
}

// Lookup returns the handler of kind k; ok is false when none is
// registered.
func (r *Registry) Lookup(k Kind) (h Handler, ok bool) {
	e := r.entry(k)
	if e == nil {
		return nil, false
	}
	return e.h, true
}

// KindName names kind k as logs do: the Name it was registered with
// (KindConfig.Name), else k.String().
func (r *Registry) KindName(k Kind) string {
	if e := r.entry(k); e != nil && e.name != "" {
		return e.name
	}
	return k.String()
}

// RetryPolicyOf returns the retry policy of kind k; ok is false when no
// handler is registered for it.
func (r *Registry) RetryPolicyOf(k Kind) (p RetryPolicy, ok bool) {
	e := r.entry(k)
	if e == nil {
		return RetryPolicy{}, false
	}
	return e.retry, true
}

// entry returns kind k's entry, nil when none is registered.
func (r *Registry) entry(k Kind) *kindEntry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kinds[k]
}

// Kinds lists the registered kinds in ascending order.
func (r *Registry) Kinds() []Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ks := make([]Kind, 0, len(r.kinds))
	for k := range r.kinds {
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
