package reservations

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: the reservation outcome's JSON form is stable.
//
// An Outcome travels as the data of its outcome.Envelope (JSON), and
// receivers in other languages parse it, so its form is a contract: the field names and their order
// are those of the struct tags below, object ids are lowercase hex, abort
// reasons snake_case words, and Version says which form it is. Fields may
// be added in a later version; none is renamed or removed within one.
// testdata/outcome_*.json hold the golden forms, and
// testdata/envelope_reservation.json one in its envelope.

// Version is the version of the outcome's JSON form.
const Version = 1

// Result says how a reservation ended.
type Result string

// The results an Outcome can carry.
const (
	ResultCommitted Result = "committed"
	ResultAborted   Result = "aborted"
)

// Outcome is a reservation's terminal outcome, as delivered to a sink in
// an envelope's data. A sink deduplicates by the envelope's id (the
// reservation id, path-escaped): delivery is at least once.
type Outcome struct {
	// Version is the JSON form's version (Version).
	Version int `json:"version"`
	// ReservationID names the reservation.
	ReservationID string `json:"reservation_id"`
	// Audience is the canonical origin of the service that delivers it
	// (https://host[:port]).
	Audience string `json:"audience"`
	// Result is ResultCommitted or ResultAborted; exactly the matching
	// one of Committed and Aborted is set.
	Result Result `json:"result"`
	// Repository is the reservation's repository.
	Repository string `json:"repository"`
	// OccurredAtMs is when the reservation ended, in Unix milliseconds.
	OccurredAtMs uint64     `json:"occurred_at_ms"`
	Committed    *Committed `json:"committed,omitempty"`
	Aborted      *Aborted   `json:"aborted,omitempty"`
}

// Committed is what a committed reservation stored and moved.
type Committed struct {
	BytesStored uint64      `json:"bytes_stored"`
	NewToRepo   uint64      `json:"new_to_repo"`
	NewToStore  uint64      `json:"new_to_store"`
	Refs        []RefUpdate `json:"refs"`
}

// RefUpdate is one ref a committed reservation moved; object ids are
// lowercase hex, empty when absent.
type RefUpdate struct {
	Ref    string `json:"ref"`
	OldOID string `json:"old_oid"`
	NewOID string `json:"new_oid"`
}

// Aborted says why a reservation was aborted.
type Aborted struct {
	// Reason is one of ref_conflict, quota_exceeded, expired, rejected,
	// internal.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// abortReasons names refdomain's abort reasons in the JSON form.
var abortReasons = map[refdomain.AbortReason]string{
	refdomain.AbortReasonRefConflict:   "ref_conflict",
	refdomain.AbortReasonQuotaExceeded: "quota_exceeded",
	refdomain.AbortReasonExpired:       "expired",
	refdomain.AbortReasonRejected:      "rejected",
	refdomain.AbortReasonInternal:      "internal",
}

// FromReservation returns the outcome of reservation rid, whose record is
// r, as delivered on behalf of audience. It fails with
// outcome.ErrNotTerminal for a Ticketed reservation, and with
// store.ErrInvalid for a nil record or an abort reason it does not know.
// It does not check audience: NewSource checks it once.
func FromReservation(rid refdomain.ReservationID, audience string, r refdomain.ReservationV1) (Outcome, error) {
	o := Outcome{Version: Version, ReservationID: rid.String(), Audience: audience}
	switch v := r.(type) {
	case *refdomain.ReservationCommitted:
		if v == nil {
			break
		}
		c := &Committed{BytesStored: v.BytesStored, NewToRepo: v.NewToRepo, NewToStore: v.NewToStore, Refs: make([]RefUpdate, len(v.Refs))}
		for i, u := range v.Refs {
			c.Refs[i] = RefUpdate{Ref: u.Ref.String(), OldOID: hex.EncodeToString(u.OldOID), NewOID: hex.EncodeToString(u.NewOID)}
		}
		o.Result, o.Repository, o.OccurredAtMs, o.Committed = ResultCommitted, v.Repository.String(), v.OccurredAtMs, c
		return o, nil
	case *refdomain.ReservationAborted:
		if v == nil {
			break
		}
		reason, ok := abortReasons[v.Reason]
		if !ok {
			return Outcome{}, fmt.Errorf("reservations: reservation %q: abort reason %d is unknown: %w", rid, uint8(v.Reason), store.ErrInvalid)
		}
		o.Result, o.Repository, o.OccurredAtMs = ResultAborted, v.Repository.String(), v.OccurredAtMs
		o.Aborted = &Aborted{Reason: reason, Detail: v.Detail}
		return o, nil
	case *refdomain.ReservationTicketed:
		if v != nil {
			return Outcome{}, fmt.Errorf("reservations: reservation %q is ticketed: %w", rid, outcome.ErrNotTerminal)
		}
	}
	return Outcome{}, fmt.Errorf("reservations: reservation %q: no reservation record (%T): %w", rid, r, store.ErrInvalid)
}

// Envelope returns the outcome.Envelope that carries o to a sink: its
// reservation id (path-escaped, so that any id is visible ASCII) as the
// envelope's id, "reservation.committed" or "reservation.aborted" as its
// type, OccurredAtMs as its timestamp and o's JSON form as its data. It
// fails only for an outcome that breaks ParseOutcome's rules.
func (o Outcome) Envelope() (outcome.Envelope, error) {
	data, err := o.JSON()
	if err != nil {
		return outcome.Envelope{}, err
	}
	return outcome.Envelope{ID: envelopeID(o.ReservationID), Type: o.eventType(), Timestamp: o.timestamp(), Data: data}, nil
}

// envelopeID is the envelope id of reservation id rid: path-escaped, so
// that any id is visible ASCII.
func envelopeID(rid string) string { return url.PathEscape(rid) }

// eventType is the envelope type of o.
func (o Outcome) eventType() string {
	switch o.Result {
	case ResultCommitted:
		return "reservation.committed"
	case ResultAborted:
		return "reservation.aborted"
	}
	return "reservation." + string(o.Result)
}

// timestamp is the envelope timestamp of o.
func (o Outcome) timestamp() time.Time { return msTime(o.OccurredAtMs) }

// msTime is the time of Unix milliseconds ms.
func msTime(ms uint64) time.Time { return time.UnixMilli(int64(min(ms, 1<<62))).UTC() }

// JSON returns the outcome's JSON form (see the design note). It fails
// only for an outcome that breaks ParseOutcome's rules.
func (o Outcome) JSON() ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return json.Marshal(o)
}

// ParseOutcome parses an outcome's JSON form, as a receiver gets it. It
// fails with an error wrapping store.ErrInvalid for malformed JSON, a
// version other than Version, an empty reservation id or audience, or a
// result whose detail is missing or belongs to the other result. Unknown
// fields are ignored, so that a receiver keeps working when a later
// sender adds some within the version.
func ParseOutcome(b []byte) (Outcome, error) {
	var o Outcome
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&o); err != nil {
		return Outcome{}, fmt.Errorf("reservations: malformed outcome JSON: %v: %w", err, store.ErrInvalid)
	}
	if d.More() {
		return Outcome{}, fmt.Errorf("reservations: trailing data after the outcome JSON: %w", store.ErrInvalid)
	}
	if err := o.check(); err != nil {
		return Outcome{}, err
	}
	return o, nil
}

// check checks the rules of the JSON form.
func (o Outcome) check() error {
	switch {
	case o.Version != Version:
		return fmt.Errorf("reservations: outcome version %d, want %d: %w", o.Version, Version, store.ErrInvalid)
	case o.ReservationID == "":
		return fmt.Errorf("reservations: outcome without a reservation id: %w", store.ErrInvalid)
	case o.Audience == "":
		return fmt.Errorf("reservations: outcome %q without an audience: %w", o.ReservationID, store.ErrInvalid)
	case o.Result == ResultCommitted && o.Committed != nil && o.Aborted == nil:
	case o.Result == ResultAborted && o.Aborted != nil && o.Committed == nil:
	default:
		return fmt.Errorf("reservations: outcome %q: result %q does not match its details: %w", o.ReservationID, o.Result, store.ErrInvalid)
	}
	return nil
}
