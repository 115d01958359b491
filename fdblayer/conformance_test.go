package fdblayer_test

import (
	. "github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"testing"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
)

// TestConformance runs the store contract's conformance suite on a Layer
// over every engine (bbolt's with its group commit), and over the memory
// engine grouping its commits as bbolt's do, so that the group commit
// meets the suite's concurrent checks on the engine that runs them
// fastest.
func TestConformance(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
				return openLayer(t, ec.open(t), Config{Clock: clk})
			})
		})
	}
	t.Run("memory-grouped", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store {
			return openLayer(t, &gatedEngine{Engine: memengine.New()}, Config{Clock: clk})
		})
	})
}
