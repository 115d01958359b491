package outcome

import (
	"errors"
	"fmt"

	"github.com/mkit-dev/mkitfdb/store"
)

// Sentinels of the package, for errors.Is. Configuration and input errors
// wrap store.ErrInvalid as well, and corrupt stored data store.ErrCorrupt,
// like the rest of the library.
var (
	// ErrNotTerminal says a record is not terminal (by its source's
	// rule), so it has no outcome to deliver.
	ErrNotTerminal = fmt.Errorf("outcome: record is not terminal: %w", store.ErrInvalid)
	// ErrDelivery says a sink did not take an outcome: the sink failed or
	// did not answer in time. Every *DeliveryError matches it.
	ErrDelivery = errors.New("outcome: delivery failed")
	// ErrRejected says a Receiver refused a request: a missing or
	// malformed header, a signature that does not verify, a request
	// outside its validity window, a request signed for another
	// endpoint, or a key seen before (ErrReplayed).
	ErrRejected = errors.New("outcome: hook request rejected")
	// ErrReplayed says a Receiver refused a request whose key (nonce or
	// Standard Webhooks message id) it accepted before, inside its
	// window. It matches ErrRejected.
	ErrReplayed = fmt.Errorf("%w: replayed", ErrRejected)
	// ErrBusy says a Receiver cannot take a request now: its NonceStore
	// is full of unexpired keys, or failed. The sender retries.
	ErrBusy = errors.New("outcome: hook receiver busy")
)
