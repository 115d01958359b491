package fdblayer_test

import (
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"testing"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// TestConformance runs the store contract's conformance suite on a Layer
// over every engine.
func TestConformance(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
				return openLayer(t, ec.open(t), Config{Clock: clk})
			})
		})
	}
}
