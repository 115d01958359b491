package outbox

import (
	"fmt"

	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: the versions of the rows the outbox owns.
//
// A queued relay row is a RelayV1, or a RelayV2 that adds the trace
// context of the writer that queued it; a pending outcome's index row an
// OutcomePendingV1 or an OutcomePendingV2 likewise. The V2s are of format
// 2 of the library's namespace: a Builder writes them only for a writer
// with an active span, and only once the store's format is 2, which it is
// raised to once no running process reads V1s only. Until then, and for
// every writer without a span, it writes the V1s, byte for byte what it
// wrote before the V2s existed, so an older binary meets nothing it does
// not read. Readers read both (DecodeRelay, DecodePending), a V1 as a V2
// without a trace context.

// rowVersions converts the outbox's rows between their versions
// (gen.RelayKeyVersions, gen.OutcomePendingKeyVersions).
type rowVersions struct{}

// UpgradeRelayV1 reads a relay row queued without a trace context.
func (rowVersions) UpgradeRelayV1(v gen.RelayV1) (gen.RelayV2, error) {
	return gen.RelayV2{Target: v.Target, Puts: v.Puts, Deletes: v.Deletes, AtMs: v.AtMs}, nil
}

// DowngradeRelayV2 drops the trace context, for a store whose format
// predates it: the row's delivery then starts a trace of its own.
func (rowVersions) DowngradeRelayV2(v gen.RelayV2) (gen.RelayV1, error) {
	return gen.RelayV1{Target: v.Target, Puts: v.Puts, Deletes: v.Deletes, AtMs: v.AtMs}, nil
}

// UpgradeOutcomePendingV1 reads a pending row queued without a trace
// context.
func (rowVersions) UpgradeOutcomePendingV1(v gen.OutcomePendingV1) (gen.OutcomePendingV2, error) {
	return gen.OutcomePendingV2{Source: v.Source, Key: v.Key, AtMs: v.AtMs}, nil
}

// DowngradeOutcomePendingV2 drops the trace context, as DowngradeRelayV2.
func (rowVersions) DowngradeOutcomePendingV2(v gen.OutcomePendingV2) (gen.OutcomePendingV1, error) {
	return gen.OutcomePendingV1{Source: v.Source, Key: v.Key, AtMs: v.AtMs}, nil
}

// The families of the rows the outbox owns, in every version.
var (
	relayValues   = gen.NewRelayKeyValues(rowVersions{})
	pendingValues = gen.NewOutcomePendingKeyValues(rowVersions{})
)

// DecodeRelay decodes a queued relay row's value (RelayKey) of any
// version: a RelayV1 as a RelayV2 without a trace context. It fails with
// an error wrapping store.ErrNewerVersion for a version newer than this
// binary reads (a row to hold, never to skip), and with one wrapping
// store.ErrCorrupt for anything else that does not decode. Byte slices of
// the result alias v.
func DecodeRelay(v store.Value) (gen.RelayV2, error) {
	var r gen.RelayV2
	return r, DecodeRelayInto(v, &r)
}

// DecodeRelayInto decodes v into *r as DecodeRelay does, reusing the
// capacity of r's slices for a RelayV2 (a RelayV1 is decoded, then
// assigned). On error *r is the zero value.
func DecodeRelayInto(v store.Value, r *gen.RelayV2) error {
	if err := relayValues.DecodeInto(v, r); err != nil {
		return fmt.Errorf("outbox: relay row: %w", err)
	}
	return nil
}

// DecodePending decodes a pending outcome's index value
// (OutcomePendingKey) of any version: an OutcomePendingV1 as an
// OutcomePendingV2 without a trace context. An empty value, which rows
// queued before outcome sources existed hold, is the caller's to tell
// apart: it does not decode. It fails as DecodeRelay does. Byte slices of
// the result alias v.
func DecodePending(v store.Value) (gen.OutcomePendingV2, error) {
	r, err := pendingValues.Decode(v)
	if err != nil {
		return gen.OutcomePendingV2{}, fmt.Errorf("outbox: pending outcome: %w", err)
	}
	return r, nil
}
