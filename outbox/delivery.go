package outbox

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// MaxDeliveryCursorBytes bounds the cursor a DeliveryTimer keeps.
const MaxDeliveryCursorBytes = gen.MaxOutcomeTimerCursor

// DeliveryTimer is the outcome-delivery timer's value (a gen.OutcomeTimer):
// outcome delivery's backoff attempt and the opaque store cursor of the
// last pending row it examined (nil: start at the head). The outbox owns
// its encoding: a Builder creates the timer with the zero DeliveryTimer,
// and outcome delivery (package outcome) rewrites it at each fire.
type DeliveryTimer struct {
	Attempt uint32
	Cursor  store.Cursor
}

// EncodeDeliveryTimer encodes t. It fails with an error wrapping
// store.ErrInvalid for a cursor over MaxDeliveryCursorBytes.
func EncodeDeliveryTimer(t DeliveryTimer) (store.Value, error) {
	v, err := gen.EncodeOutcomeTimer(gen.OutcomeTimer{Attempt: t.Attempt, Cursor: t.Cursor})
	if err != nil {
		return nil, fmt.Errorf("outbox: encode the outcome-delivery timer: %w", err)
	}
	return v, nil
}

// DecodeDeliveryTimer decodes an outcome-delivery timer's value; the empty
// value is the zero DeliveryTimer. The cursor aliases v. It fails with an
// error wrapping store.ErrCorrupt.
func DecodeDeliveryTimer(v store.Value) (DeliveryTimer, error) {
	if len(v) == 0 {
		return DeliveryTimer{}, nil
	}
	t, err := gen.DecodeOutcomeTimer(v)
	if err != nil {
		return DeliveryTimer{}, fmt.Errorf("outbox: outcome-delivery timer value: %w", err)
	}
	d := DeliveryTimer{Attempt: t.Attempt}
	if len(t.Cursor) > 0 {
		d.Cursor = store.Cursor(t.Cursor)
	}
	return d, nil
}

// newDeliveryTimer is a new outcome-delivery timer's value: attempt 0, no
// cursor.
var newDeliveryTimer = func() store.Value {
	v, err := EncodeDeliveryTimer(DeliveryTimer{})
	if err != nil {
		panic(err) // the zero OutcomeTimer breaks no rule
	}
	return v
}()
