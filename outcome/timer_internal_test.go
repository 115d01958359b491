package outcome

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/codec/wire"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

func TestTimerValueRoundTrips(t *testing.T) {
	for _, s := range []timerState{
		{},
		{attempt: 3},
		{attempt: 1, cursor: store.Cursor("c")},
		{attempt: 1<<32 - 1, cursor: store.Cursor(bytes.Repeat([]byte{0xff}, MaxCursorBytes))},
	} {
		v, err := encodeTimer(s)
		require.NoError(t, err)
		got, err := decodeTimer(v)
		require.NoError(t, err)
		assert.Equal(t, s, got)
	}
	got, err := decodeTimer(nil)
	require.NoError(t, err)
	assert.Equal(t, timerState{}, got, "an empty value is attempt 0 at the head")
}

func TestTimerValueRejectsCorruptData(t *testing.T) {
	over, err := encodeTimer(timerState{cursor: make(store.Cursor, MaxCursorBytes)})
	require.NoError(t, err)
	over = bytes.Clone(over)
	// Grow the cursor by one byte, fixing its length prefix: a value the
	// store could hold but no writer of this package writes.
	raw := wire.AppendBytes(wire.AppendU32([]byte{gen.VersionOutcomeTimer}, 0), make([]byte, MaxCursorBytes+1))
	for name, v := range map[string]store.Value{
		"cursor over 4096 bytes": raw,
		"truncated":              over[:len(over)-1],
		"trailing bytes":         append(bytes.Clone(over), 0),
		"unknown version":        append([]byte{99}, over[1:]...),
		"one byte":               {1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeTimer(v)
			require.ErrorIs(t, err, store.ErrCorrupt)
			if name == "cursor over 4096 bytes" {
				assert.Contains(t, err.Error(), "4096")
			}
			assert.Contains(t, err.Error(), "outcome-delivery timer value")
		})
	}
	_, err = encodeTimer(timerState{cursor: make(store.Cursor, MaxCursorBytes+1)})
	assert.ErrorIs(t, err, store.ErrCorrupt, "a store cursor the timer cannot keep")
}

// FuzzDecodeTimer: decoding never panics; what decodes encodes back to
// the same bytes (the empty value aside, which is the zero state).
func FuzzDecodeTimer(f *testing.F) {
	for _, s := range []timerState{{}, {attempt: 7, cursor: store.Cursor("cursor")}} {
		v, err := encodeTimer(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(v))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeTimer(b)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("error %v does not wrap store.ErrCorrupt", err)
			}
			return
		}
		if len(b) == 0 {
			return
		}
		v, err := encodeTimer(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, s, []byte(v))
		}
	})
}

func TestBackoff(t *testing.T) {
	id := []byte("\x02partition")
	for attempt := range uint32(40) {
		ms := backoffMs(id, attempt)
		base := min(uint64(1000)<<min(attempt, 20), 900_000)
		assert.GreaterOrEqual(t, ms, base, "attempt %d", attempt)
		assert.LessOrEqual(t, ms, min(base+base/5, 900_000), "attempt %d", attempt)
		assert.Equal(t, ms, backoffMs(id, attempt), "reproducible")
	}
	assert.Equal(t, uint64(MaxBackoff/time.Millisecond), backoffMs(id, 1<<32-1))
	// The jitter spreads partitions: not every one waits the same.
	seen := map[uint64]bool{}
	for i := range 20 {
		seen[backoffMs([]byte{byte(i)}, 3)] = true
	}
	assert.Greater(t, len(seen), 10)
}
