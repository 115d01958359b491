package relay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/relay"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/store/storetest"
	"github.com/mkit-dev/mkitfdb/timers"
)

// NewHandler refuses a configuration out of range, naming the field.
func TestNewHandlerRejectsBadConfig(t *testing.T) {
	s := storetest.NewFaults(nil)
	for _, tc := range []struct {
		field string
		c     relay.HandlerConfig
	}{
		{"Target", relay.HandlerConfig{}},
		{"LagBound", relay.HandlerConfig{Target: s, LagBound: -time.Second}},
		{"Budget.MaxRows", relay.HandlerConfig{Target: s, Budget: relay.Budget{MaxRows: -1}}},
		{"Budget.MaxTargets", relay.HandlerConfig{Target: s, Budget: relay.Budget{MaxTargets: -1}}},
		{"Budget.MaxTargetCalls", relay.HandlerConfig{Target: s, Budget: relay.Budget{MaxTargetCalls: -1}}},
		{"Budget.MaxBytes", relay.HandlerConfig{Target: s, Budget: relay.Budget{MaxBytes: -1}}},
		{"Budget.Concurrency", relay.HandlerConfig{Target: s, Budget: relay.Budget{Concurrency: -1}}},
	} {
		h, err := relay.NewHandler(tc.c)
		require.ErrorIs(t, err, store.ErrInvalid, tc.field)
		assert.Contains(t, err.Error(), "HandlerConfig."+tc.field)
		assert.Nil(t, h)
	}
	h, err := relay.NewHandler(relay.HandlerConfig{Target: s})
	require.NoError(t, err)
	assert.Equal(t, timers.KindRelay, h.Kind())
}
