package outcome

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/zeebo/blake3"

	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/store"
)

// Backoff bounds: 1 s doubling per failed attempt up to MaxBackoff, plus
// up to a fifth of jitter, never beyond MaxBackoff.
const (
	// BaseBackoff is the delay after the first failed sink call.
	BaseBackoff = time.Second
	// MaxBackoff caps every delay, a sink's retry-after hint included.
	MaxBackoff = 900 * time.Second
)

// MaxCursorBytes bounds the scan cursor the timer value keeps
// (outbox.DeliveryTimer).
const MaxCursorBytes = outbox.MaxDeliveryCursorBytes

// timerState is the outcome-delivery timer's value decoded: the backoff
// attempt and the cursor of the last pending row examined (nil: start at
// the head).
type timerState struct {
	attempt uint32
	cursor  store.Cursor
}

// decodeTimer decodes a timer value (outbox.DecodeDeliveryTimer); the
// empty value is attempt 0 at the head. It fails with an error wrapping
// store.ErrCorrupt for anything gen.DecodeOutcomeTimer rejects (a cursor
// over MaxCursorBytes among them). The cursor aliases v.
func decodeTimer(v store.Value) (timerState, error) {
	t, err := outbox.DecodeDeliveryTimer(v)
	if err != nil {
		return timerState{}, fmt.Errorf("outcome: %w", err)
	}
	return timerState{attempt: t.Attempt, cursor: t.Cursor}, nil
}

// encodeTimer encodes a timer value (outbox.EncodeDeliveryTimer). It
// fails with an error wrapping store.ErrCorrupt when the store issued a
// cursor over MaxCursorBytes, which the timer cannot keep.
func encodeTimer(s timerState) (store.Value, error) {
	if len(s.cursor) > MaxCursorBytes {
		return nil, fmt.Errorf("outcome: the store's scan cursor has %d bytes; the timer keeps at most %d: %w",
			len(s.cursor), MaxCursorBytes, store.ErrCorrupt)
	}
	v, err := outbox.EncodeDeliveryTimer(outbox.DeliveryTimer{Attempt: s.attempt, Cursor: s.cursor})
	if err != nil {
		return nil, fmt.Errorf("outcome: %w", err)
	}
	return v, nil
}

// backoffMs is the delay after a fire of partition identity id that
// delivered nothing at the given attempt: BaseBackoff doubled per attempt
// (up to MaxBackoff), plus a jitter of up to a fifth of it, derived with
// BLAKE3 from the partition's identity and the attempt so that the
// partitions a sink outage stalled do not all retry at once, and a
// partition's own retries are reproducible. At most MaxBackoff.
func backoffMs(id []byte, attempt uint32) uint64 {
	const baseMs, maxMs = uint64(BaseBackoff / time.Millisecond), uint64(MaxBackoff / time.Millisecond)
	base := min(baseMs<<min(attempt, 20), maxMs)
	sum := blake3.Sum256(binary.BigEndian.AppendUint32(append(make([]byte, 0, len(id)+4), id...), attempt))
	jitter := uint64(binary.BigEndian.Uint16(sum[:2])) % (base/5 + 1)
	return min(base+jitter, maxMs)
}
