package reservations_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
	"github.com/mkit-dev/mkitfdb/timers"
)

const audience = "https://example.test"

var ctx = context.Background()

func rid(s string) refdomain.ReservationID { return refdomain.MustReservationID(s) }

func committed() refdomain.ReservationV1 {
	return &refdomain.ReservationCommitted{Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 100, BytesStored: 1, NewToRepo: 1, NewToStore: 1}
}

// sampleOutcome is a committed outcome with a ref update.
func sampleOutcome(t testing.TB, id string) reservations.Outcome {
	o, err := reservations.FromReservation(rid(id), audience, &refdomain.ReservationCommitted{
		Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 100, BytesStored: 10, NewToRepo: 2, NewToStore: 1,
		Refs: []refdomain.RefUpdate{{Ref: refdomain.MustShardRef("refs/heads/main"), NewOID: bytes.Repeat([]byte{0xab}, 20)}},
	})
	require.NoError(t, err)
	return o
}

func encode(t testing.TB, r refdomain.ReservationV1) store.Value {
	v, err := refdomain.EncodeReservationV1(r)
	require.NoError(t, err)
	return v
}

// The envelope that carries a reservation's outcome is a contract with
// receivers as well: a golden file pins it.
func TestEnvelopeOfAReservationIsStable(t *testing.T) {
	e, err := sampleOutcome(t, "r-1").Envelope()
	require.NoError(t, err)
	b, err := e.JSON()
	require.NoError(t, err)
	path := filepath.Join("testdata", "envelope_reservation.json")
	if *update {
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(bytes.TrimSpace(want)), string(b))
	back, err := outcome.ParseEnvelope(want)
	require.NoError(t, err)
	o, err := reservations.ParseOutcome(back.Data)
	require.NoError(t, err)
	assert.Equal(t, sampleOutcome(t, "r-1"), o)
}

func TestNewSourceChecksTheAudience(t *testing.T) {
	for _, a := range []string{"", "http://example.test", "https://example.test/path", "ftp://example.test"} {
		_, err := reservations.NewSource(a)
		assert.ErrorIs(t, err, store.ErrInvalid, a)
	}
	src, err := reservations.NewSource("HTTPS://Example.Test:443/")
	require.NoError(t, err)
	assert.Equal(t, reservations.SourceName, src.Name())
}

func TestIsTerminalAndIsSynthetic(t *testing.T) {
	assert.True(t, reservations.IsTerminal(committed()))
	assert.True(t, reservations.IsTerminal(&refdomain.ReservationAborted{}))
	assert.False(t, reservations.IsTerminal(&refdomain.ReservationTicketed{}))
	assert.False(t, reservations.IsTerminal(nil))
	assert.False(t, reservations.IsTerminal((*refdomain.ReservationCommitted)(nil)))
	assert.True(t, reservations.IsSynthetic(rid("s:x")))
	assert.False(t, reservations.IsSynthetic(rid("x:s")))
}

// A pending row queued before pending rows named their source (an empty
// value, the reservation id as its id) is delivered through the source,
// and acknowledged like any other.
func TestALegacyPendingRowIsDelivered(t *testing.T) {
	now := time.UnixMilli(100)
	clk := clock.NewManual(now)
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{Clock: clk})
	require.NoError(t, err)
	defer s.Close()
	p := refdomain.NamespacePartition{NS: refdomain.MustNamespaceKey("default")}
	key, err := refdomain.AppendReservationKey(nil, rid("old/1"))
	require.NoError(t, err)
	terminal := encode(t, committed())
	// What the outbox wrote before: the record, an empty pending row, the
	// backlog and the delivery timer.
	pendingKey, err := gen.AppendOutcomePendingKey(nil, 1, gen.MustOutcomeID("old/1"))
	require.NoError(t, err)
	backlog, err := gen.EncodeBacklog(gen.Backlog{Rows: 1, Bytes: uint64(len(terminal))})
	require.NoError(t, err)
	timer, err := gen.EncodeOutcomeTimer(gen.OutcomeTimer{})
	require.NoError(t, err)
	b := store.NewBatch().Put(key, terminal).Put(pendingKey, store.Value{}).Put(outbox.BacklogKey(), backlog)
	require.NoError(t, timers.Schedule(b, s.Capabilities(), nil, timers.Timer{Kind: timers.KindOutcomeDelivery, DueAt: now, Value: timer}))
	out, err := s.Apply(ctx, p, b)
	require.NoError(t, err)
	require.True(t, out.Committed())

	src, err := reservations.NewSource(audience)
	require.NoError(t, err)
	var got []outcome.Envelope
	d, err := outcome.NewDelivery(outcome.DeliveryConfig{Sources: []outcome.Source{src}, Sink: outcome.SinkFunc(func(_ context.Context, e outcome.Envelope) error {
		got = append(got, e)
		return nil
	})})
	require.NoError(t, err)
	reg, err := timers.NewRegistry(d)
	require.NoError(t, err)
	rep, err := timers.RunDue(ctx, s, p, reg, now, timers.RunConfig{Clock: clk})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Fired)
	require.Len(t, got, 1)
	assert.Equal(t, "old%2F1", got[0].ID)
	o, err := reservations.ParseOutcome(got[0].Data)
	require.NoError(t, err)
	assert.Equal(t, "old/1", o.ReservationID)
	for _, k := range []store.Key{key, pendingKey, outbox.BacklogKey()} {
		_, ok, err := s.Get(ctx, p, k)
		require.NoError(t, err)
		assert.False(t, ok, "acknowledged: %x deleted", []byte(k))
	}
}

// The outcome's data is the reservation's JSON form, its id the
// reservation id path-escaped, its type the result.
func TestTheSourcesEnvelopeCarriesTheReservationsOutcome(t *testing.T) {
	o := sampleOutcome(t, "a b")
	e, err := o.Envelope()
	require.NoError(t, err)
	assert.Equal(t, "a%20b", e.ID)
	assert.Equal(t, "reservation.committed", e.Type)
	assert.Equal(t, int64(100), e.Timestamp.UnixMilli())
	var back reservations.Outcome
	require.NoError(t, json.Unmarshal(e.Data, &back))
	assert.Equal(t, o, back)
}
