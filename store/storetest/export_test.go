package storetest

import (
	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// NewReferenceStore opens the test-only reference model with
// FoundationDB-like limits. It exists for this package's external examples
// and is not part of its API.
func NewReferenceStore(clk clock.Clock) store.Store { return newModel(clk, fdbLikeCaps) }
