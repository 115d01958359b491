package fdblayer

import (
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// ErrRetriesExhausted: a retryable engine error (a conflict, an unknown
// commit result) persisted through the Layer's whole retry budget. The
// Layer never returns it alone: it comes wrapped together with the store
// sentinel (store.ErrUnavailable, store.ErrUnknownResult) that says what
// the caller may assume, as an engine's errors do (kv.ErrClosed among
// them).
var ErrRetriesExhausted = errors.New("fdblayer: retries exhausted")

// storeSentinels are the errors of the Store contract; every error the
// Layer returns wraps exactly one of them.
var storeSentinels = [...]error{store.ErrInvalid, store.ErrCorrupt, store.ErrUnavailable, store.ErrUnknownResult}

// wrapError returns "what: sentinel: err", wrapping both, unless err
// already wraps a store sentinel: then that one stands (an engine that
// found corrupt data says more than "unavailable"), except that
// store.ErrUnknownResult always wins, with err's text kept, because the
// caller must not take an unknown result for a failure.
func wrapError(what string, sentinel, err error) error {
	for _, s := range storeSentinels {
		if !errors.Is(err, s) {
			continue
		}
		if s != sentinel && sentinel == store.ErrUnknownResult {
			return fmt.Errorf("%s: %w: %v", what, sentinel, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, sentinel, err)
}
