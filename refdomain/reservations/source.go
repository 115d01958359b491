// Package reservations is the reference domain's outcome source: a
// reservation (refdomain.ReservationV1 at refdomain.ReservationKey) that
// becomes terminal (Committed or Aborted, from Ticketed) is queued for
// delivery in the writer's own batch, and delivered by an outcome.Delivery
// as an outcome.Envelope whose data is the reservation's Outcome in its
// stable JSON form. It is one source among any a service declares
// (outcome.NewSource), written beside the reference domain's generated
// package the way an importing service writes its own.
//
// Reservations whose id starts with "s:" are synthetic: their outcomes are
// acknowledged without a sink call. An acknowledged reservation is deleted
// in the acknowledging batch. The source also resolves pending rows queued
// before pending rows named their source (an empty value, whose id is the
// reservation id), so a backlog queued by an earlier version is delivered.
//
//	src, err := reservations.NewSource("https://git.example.com")
//	d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sink: sink, Sources: []outcome.Source{src}})
//	seq, err := src.Append(builder, refdomain.ReservationKey{ID: rid}, ticketed, &refdomain.ReservationCommitted{...})
package reservations

import (
	"strings"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
)

// SourceName is the source's name in pending rows.
const SourceName = "refdomain.reservations"

// Source is the reservations' outcome source.
type Source = outcome.TypedSource[refdomain.ReservationKey, refdomain.ReservationV1]

// NewSource returns the source of reservation outcomes delivered on behalf
// of audience, the canonical origin of the delivering service
// (https://host[:port], http only for a loopback host; see
// outcome.CanonicalOrigin), which every Outcome carries. It fails with an
// error wrapping store.ErrInvalid for an audience that is not such an
// origin.
func NewSource(audience string) (*Source, error) {
	audience, err := outcome.CanonicalOrigin(audience)
	if err != nil {
		return nil, err
	}
	return outcome.NewSource(outcome.SourceConfig[refdomain.ReservationKey, refdomain.ReservationV1]{
		Name:      SourceName,
		Namespace: refdomain.SchemaNamespace,
		ParseKey:  refdomain.ParseReservationKey,
		Decode:    refdomain.DecodeReservationV1,
		Encode:    outcome.OneVersion(refdomain.EncodeReservationV1),
		Terminal:  IsTerminal,
		ID:        func(k refdomain.ReservationKey, _ refdomain.ReservationV1) string { return envelopeID(k.ID.String()) },
		Event: func(k refdomain.ReservationKey, r refdomain.ReservationV1) (outcome.Event, error) {
			return event(k.ID, audience, r)
		},
		Synthetic: func(k refdomain.ReservationKey, _ refdomain.ReservationV1) bool { return IsSynthetic(k.ID) },
		OnAck:     outcome.DeleteRecord,
		LegacyKey: func(id string) (refdomain.ReservationKey, error) {
			rid, err := refdomain.NewReservationID(id)
			return refdomain.ReservationKey{ID: rid}, err
		},
	})
}

// IsTerminal reports whether r is a terminal reservation: Committed or
// Aborted.
func IsTerminal(r refdomain.ReservationV1) bool {
	switch v := r.(type) {
	case *refdomain.ReservationCommitted:
		return v != nil
	case *refdomain.ReservationAborted:
		return v != nil
	}
	return false
}

// IsSynthetic reports whether rid names a synthetic reservation, whose
// outcome is acknowledged without a sink call: its id starts with "s:".
func IsSynthetic(rid refdomain.ReservationID) bool { return strings.HasPrefix(rid.String(), "s:") }
