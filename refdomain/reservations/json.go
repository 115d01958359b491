package reservations

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

// payload is a terminal reservation's outcome as the source hands it to a
// Delivery: it encodes the Outcome's JSON form straight from the record
// (outcome.JSONAppender), byte for byte what encoding/json makes of
// FromReservation's Outcome, without building the Outcome.
type payload struct {
	rid      refdomain.ReservationID
	audience string
	r        refdomain.ReservationV1
}

var _ outcome.JSONAppender = payload{}

// event returns the outcome.Event of terminal reservation r, failing as
// FromReservation does.
func event(rid refdomain.ReservationID, audience string, r refdomain.ReservationV1) (outcome.Event, error) {
	switch v := r.(type) {
	case *refdomain.ReservationCommitted:
		if v != nil {
			return outcome.Event{Type: "reservation.committed", Time: msTime(v.OccurredAtMs), Data: payload{rid, audience, r}}, nil
		}
	case *refdomain.ReservationAborted:
		if v != nil {
			if _, ok := abortReasons[v.Reason]; !ok {
				return outcome.Event{}, fmt.Errorf("reservations: reservation %q: abort reason %d is unknown: %w", rid, uint8(v.Reason), store.ErrInvalid)
			}
			return outcome.Event{Type: "reservation.aborted", Time: msTime(v.OccurredAtMs), Data: payload{rid, audience, r}}, nil
		}
	}
	_, err := FromReservation(rid, audience, r) // the error it fails with
	return outcome.Event{}, err
}

// AppendJSON appends the outcome's JSON form (see the design note in
// outcome.go). It fails as FromReservation does.
func (p payload) AppendJSON(dst []byte) ([]byte, error) {
	var repo string
	var at uint64
	switch v := p.r.(type) {
	case *refdomain.ReservationCommitted:
		if v == nil {
			return fromReservationError(p)
		}
		repo, at = v.Repository.String(), v.OccurredAtMs
		size := 256 + len(p.audience) + len(p.rid.String()) + len(repo)
		for _, u := range v.Refs {
			size += 48 + len(u.Ref.String()) + 2*len(u.OldOID) + 2*len(u.NewOID)
		}
		dst = slices.Grow(dst, size)
		dst = p.appendHead(dst, ResultCommitted, repo, at)
		dst = append(dst, `,"committed":{"bytes_stored":`...)
		dst = strconv.AppendUint(dst, v.BytesStored, 10)
		dst = append(dst, `,"new_to_repo":`...)
		dst = strconv.AppendUint(dst, v.NewToRepo, 10)
		dst = append(dst, `,"new_to_store":`...)
		dst = strconv.AppendUint(dst, v.NewToStore, 10)
		dst = append(dst, `,"refs":[`...)
		for i, u := range v.Refs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"ref":`...)
			dst = appendString(dst, u.Ref.String())
			dst = append(dst, `,"old_oid":"`...)
			dst = hex.AppendEncode(dst, u.OldOID)
			dst = append(dst, `","new_oid":"`...)
			dst = hex.AppendEncode(dst, u.NewOID)
			dst = append(dst, `"}`...)
		}
		return append(dst, "]}}"...), nil
	case *refdomain.ReservationAborted:
		reason, ok := "", false
		if v != nil {
			reason, ok = abortReasons[v.Reason]
		}
		if !ok {
			return fromReservationError(p)
		}
		repo, at = v.Repository.String(), v.OccurredAtMs
		dst = slices.Grow(dst, 192+len(p.audience)+len(p.rid.String())+len(repo)+len(v.Detail))
		dst = p.appendHead(dst, ResultAborted, repo, at)
		dst = append(dst, `,"aborted":{"reason":`...)
		dst = appendString(dst, reason)
		dst = append(dst, `,"detail":`...)
		dst = appendString(dst, v.Detail)
		return append(dst, "}}"...), nil
	}
	return fromReservationError(p)
}

// fromReservationError returns the error FromReservation fails with for
// p's record.
func fromReservationError(p payload) ([]byte, error) {
	_, err := FromReservation(p.rid, p.audience, p.r)
	if err == nil {
		err = fmt.Errorf("reservations: reservation %q: cannot encode %T: %w", p.rid, p.r, store.ErrInvalid)
	}
	return nil, err
}

// appendHead appends the fields every outcome has, from "{" to
// occurred_at_ms.
func (p payload) appendHead(dst []byte, result Result, repo string, at uint64) []byte {
	dst = append(dst, `{"version":`...)
	dst = strconv.AppendInt(dst, Version, 10)
	dst = append(dst, `,"reservation_id":`...)
	dst = appendString(dst, p.rid.String())
	dst = append(dst, `,"audience":`...)
	dst = appendString(dst, p.audience)
	dst = append(dst, `,"result":"`...)
	dst = append(dst, result...)
	dst = append(dst, `","repository":`...)
	dst = appendString(dst, repo)
	dst = append(dst, `,"occurred_at_ms":`...)
	return strconv.AppendUint(dst, at, 10)
}

// appendString appends s as a JSON string, as encoding/json writes it:
// printable ASCII other than '"', '\\', '<', '>' and '&' as it is,
// anything else through encoding/json itself.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, err := json.Marshal(s)
			if err != nil {
				panic(err) // a string always encodes
			}
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
