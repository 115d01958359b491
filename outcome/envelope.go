package outcome

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mkit-dev/mkitfdb/store"
)

// EnvelopeVersion is the version of the envelope's JSON form, which is
// stable.
//
// A sink sends each outcome as an Envelope, the structure Standard
// Webhooks recommends for a payload:
//
//	{"id":"ord_42","type":"order.shipped","timestamp":"2026-12-01T21:25:51.123Z","data":{...}}
//
// Receivers in other languages parse it, so it is a contract: within
// EnvelopeVersion the four fields keep their names and order, the
// timestamp is RFC 3339 in UTC with millisecond precision, and data is
// the service's own payload, a JSON object, as its source produced it.
// Fields may be added in a later version; none is renamed or removed
// within one. testdata/envelope_*.json hold the golden forms.
const EnvelopeVersion = 1

// Bounds of an Envelope's fields.
const (
	// MaxEnvelopeIDBytes bounds Envelope.ID.
	MaxEnvelopeIDBytes = 256
	// MaxEnvelopeTypeBytes bounds Envelope.Type.
	MaxEnvelopeTypeBytes = 128
)

// Envelope is one outcome as a sink receives it: the service's payload
// (Data) with what every receiver needs to route and deduplicate it.
type Envelope struct {
	// ID names the outcome, stably across retries: receivers deduplicate
	// by it (delivery is at least once). 1 to MaxEnvelopeIDBytes bytes of
	// visible ASCII (no spaces or control characters), so that it can
	// travel in an HTTP header (Standard Webhooks' webhook-id).
	ID string
	// Type names the kind of event ("order.shipped"): 1 to
	// MaxEnvelopeTypeBytes bytes of visible ASCII.
	Type string
	// Timestamp is when the outcome happened, kept to the millisecond.
	Timestamp time.Time
	// Data is the service's payload: a JSON object.
	Data json.RawMessage
}

// envelopeJSON is the JSON form of an Envelope.
type envelopeJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// envelopeTime is the layout of Envelope.Timestamp in JSON.
const envelopeTime = "2006-01-02T15:04:05.000Z07:00"

// JSON returns the envelope's JSON form (see [EnvelopeVersion]), with Data
// compacted. It fails with an error wrapping store.ErrInvalid for an
// envelope that breaks ParseEnvelope's rules.
func (e Envelope) JSON() ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var data bytes.Buffer
	if err := json.Compact(&data, e.Data); err != nil {
		return nil, fmt.Errorf("outcome: envelope %q: data: %v: %w", e.ID, err, store.ErrInvalid)
	}
	return json.Marshal(envelopeJSON{ID: e.ID, Type: e.Type, Timestamp: e.Timestamp.UTC().Format(envelopeTime), Data: data.Bytes()})
}

// MarshalJSON is JSON, so that an Envelope inside another value encodes
// in its stable form.
func (e Envelope) MarshalJSON() ([]byte, error) { return e.JSON() }

// ParseEnvelope parses an envelope's JSON form, as a receiver gets it. It
// fails with an error wrapping store.ErrInvalid for malformed JSON,
// trailing data, an id or type that is empty, over its bound or not
// visible ASCII, a timestamp that is not RFC 3339, or data that is not a
// JSON object. Unknown fields are ignored, so that a receiver keeps
// working when a later sender adds some.
func ParseEnvelope(b []byte) (Envelope, error) {
	var j envelopeJSON
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&j); err != nil {
		return Envelope{}, fmt.Errorf("outcome: malformed envelope JSON: %v: %w", err, store.ErrInvalid)
	}
	if d.More() {
		return Envelope{}, fmt.Errorf("outcome: trailing data after the envelope JSON: %w", store.ErrInvalid)
	}
	ts, err := time.Parse(time.RFC3339Nano, j.Timestamp)
	if err != nil {
		return Envelope{}, fmt.Errorf("outcome: envelope %q: timestamp %q is not RFC 3339: %w", j.ID, j.Timestamp, store.ErrInvalid)
	}
	e := Envelope{ID: j.ID, Type: j.Type, Timestamp: ts, Data: j.Data}
	if err := e.check(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// UnmarshalJSON is ParseEnvelope.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	v, err := ParseEnvelope(b)
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// check checks the rules of the JSON form.
func (e Envelope) check() error {
	if err := e.checkFields(); err != nil {
		return err
	}
	if !isJSONObject(e.Data) {
		return fmt.Errorf("outcome: envelope %q: data is not a JSON object: %w", e.ID, store.ErrInvalid)
	}
	return nil
}

// checkFields checks the rules of the JSON form but data's.
func (e Envelope) checkFields() error {
	switch {
	case !visibleASCII(e.ID, MaxEnvelopeIDBytes):
		return fmt.Errorf("outcome: envelope id %q: want 1 to %d bytes of visible ASCII: %w", e.ID, MaxEnvelopeIDBytes, store.ErrInvalid)
	case !visibleASCII(e.Type, MaxEnvelopeTypeBytes):
		return fmt.Errorf("outcome: envelope %q: type %q: want 1 to %d bytes of visible ASCII: %w", e.ID, e.Type, MaxEnvelopeTypeBytes, store.ErrInvalid)
	case e.Timestamp.IsZero():
		return fmt.Errorf("outcome: envelope %q without a timestamp: %w", e.ID, store.ErrInvalid)
	case e.Timestamp.UTC().Year() > 9999 || e.Timestamp.UTC().Year() < 1:
		return fmt.Errorf("outcome: envelope %q: timestamp %v out of RFC 3339's range: %w", e.ID, e.Timestamp, store.ErrInvalid)
	}
	return nil
}

// isJSONObject reports whether b is one JSON object (with white space
// around it), without decoding it.
func isJSONObject(b []byte) bool {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i < len(b) && b[i] == '{' && json.Valid(b)
}

// visibleASCII reports whether s has 1 to max bytes, each a visible
// ASCII character (0x21 to 0x7e).
func visibleASCII(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
