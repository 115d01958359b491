package relay

import (
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// ErrHookCapacity is what a Hook's BeforeApply returns (or wraps) when its
// additions do not fit the target batch it was given: the relay then tries
// again with half the rows. For a single
// row it blocks the target, like any hook failure. It wraps
// store.ErrInvalid.
var ErrHookCapacity = fmt.Errorf("relay: hook additions exceed the target batch: %w", store.ErrInvalid)

// isHookCapacity reports whether a hook error asks for fewer rows.
func isHookCapacity(err error) bool { return errors.Is(err, ErrHookCapacity) }

// ErrNotBlocked: Unblock named a target the source's scan state does not
// hold blocked (or the source has no scan state).
var ErrNotBlocked = errors.New("relay: the target is not blocked")
