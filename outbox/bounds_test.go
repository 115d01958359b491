package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outbox"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/store"
)

func puts(n int) []gen.RelayPut {
	out := make([]gen.RelayPut, n)
	for i := range out {
		out[i] = put(fmt.Sprintf("k%03d", i), "v")
	}
	return out
}

func deletes(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("d%03d", i))
	}
	return out
}

// Every bound fails its append with ErrInvalid before anything is added:
// the builder finishes exactly the rows appended before.
func TestBoundsAreCheckedBeforeAnythingIsAdded(t *testing.T) {
	e := newEnv(t, memengine.New())
	caps := e.caps
	big := strings.Repeat("x", caps.MaxValueBytes/2)
	cases := []struct {
		name   string
		append func(ob *outbox.Builder) error
		says   string
	}{
		{"relay row over 98 writes", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), target, puts(60), deletes(39))
			return err
		}, "99 writes, limit 98"},
		{"relay row without writes", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), target, nil, nil)
			return err
		}, "no writes"},
		{"relay row without target", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), nil, puts(1), nil)
			return err
		}, "without a target"},
		{"invalid target", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), refdomain.NamespacePartition{}, puts(1), nil)
			return err
		}, ""},
		{"zero identity target", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), store.Identity{}, puts(1), nil)
			return err
		}, "target identity"},
		{"target identity over its bound", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), longPartition{}, puts(1), nil)
			return err
		}, "target identity"},
		{"put key over the store's limit", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put(strings.Repeat("k", caps.MaxKeyBytes+1), "v")}, nil)
			return err
		}, "put 0 key"},
		{"empty delete key", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), target, nil, [][]byte{{}})
			return err
		}, "delete 0 has an empty key"},
		{"put value over the store's limit", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("k", strings.Repeat("v", caps.MaxValueBytes+1))}, nil)
			return err
		}, "put 0 value"},
		{"encoded relay row over the value limit", func(ob *outbox.Builder) error {
			_, err := ob.Relay(context.Background(), target, []gen.RelayPut{put("a", big), put("b", big), put("c", "c")}, nil)
			return err
		}, "encodes to"},
		{"invalid reservation id", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.ReservationID{}, ticket, committed(refdomain.MustRepoName("repo")))
			return err
		}, "key: ReservationKey.ID"},
		{"repeated reservation id", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("seeded"), ticket, committed(refdomain.MustRepoName("repo")))
			return err
		}, "appended twice"},
		{"prior value not Ticketed", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("r"), mustEncode(committed(refdomain.MustRepoName("repo"))), aborted())
			return err
		}, "prior value is already terminal"},
		{"prior value not a reservation", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("r"), store.Value("junk"), aborted())
			return err
		}, "prior value does not decode"},
		{"prior value absent", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("r"), nil, aborted())
			return err
		}, "the record must exist"},
		{"terminal value Ticketed", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("r"), ticket, &refdomain.ReservationTicketed{})
			return err
		}, "record is not terminal"},
		{"terminal value nil", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("r"), ticket, nil)
			return err
		}, "record is not terminal"},
		{"terminal value breaking its schema", func(ob *outbox.Builder) error {
			_, err := appendReservation(ob, refdomain.MustReservationID("r"), ticket, &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), Reason: 99})
			return err
		}, ""},
		// The outbox's own checks, on any schema's record.
		{"outcome without an id", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{Source: gen.MustOutcomeSource("s"), Key: store.Key("k"), Prior: ticket, Terminal: store.Value("t")})
			return err
		}, "without an id"},
		{"outcome without a source", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("r"), Key: store.Key("k"), Prior: ticket, Terminal: store.Value("t")})
			return err
		}, "without a source"},
		{"outcome with an empty record key", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Prior: ticket, Terminal: store.Value("t")})
			return err
		}, "empty record key"},
		{"outcome record key over the store's limit", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Key: store.Key(strings.Repeat("k", caps.MaxKeyBytes+1)), Prior: ticket, Terminal: store.Value("t")})
			return err
		}, "record key has"},
		{"outcome of an absent record", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Key: store.Key("k"), Terminal: store.Value("t")})
			return err
		}, "the record must exist"},
		{"outcome without a terminal value", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Key: store.Key("k"), Prior: ticket})
			return err
		}, "no terminal value"},
		{"outcome terminal value over the store's limit", func(ob *outbox.Builder) error {
			_, err := ob.Outcome(context.Background(), outbox.Outcome{ID: gen.MustOutcomeID("r"), Source: gen.MustOutcomeSource("s"), Key: store.Key("k"), Prior: ticket, Terminal: store.Value(strings.Repeat("v", caps.MaxValueBytes+1))})
			return err
		}, "terminal value has"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ob := e.builder(t)
			seq, err := appendReservation(ob, refdomain.MustReservationID("seeded"), ticket, committed(refdomain.MustRepoName("repo")))
			require.NoError(t, err)
			err = tc.append(ob)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Contains(t, err.Error(), tc.says)
			assert.Equal(t, 1, ob.Len())

			b := store.NewBatch()
			require.NoError(t, ob.Finish(b))
			// sequence, backlog, reservation guards; the outcome's 2 puts,
			// backlog, sequence; the outcome timer's guard and 2 puts.
			assert.Len(t, b.Preconditions, 4)
			assert.Len(t, b.Writes, 6)
			next, err := outbox.DecodeSequence(b.Writes[3].Value)
			require.NoError(t, err)
			assert.Equal(t, seq, next, "the failed append allocated no sequence")
		})
	}
}

func TestARelayRowAtTheBoundIsAccepted(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		ob := e.builder(t)
		_, err := ob.Relay(context.Background(), target, puts(60), deletes(38))
		require.NoError(t, err)
		_, err = ob.Relay(context.Background(), target, puts(outbox.MaxRelayWrites), nil)
		require.NoError(t, err)
		e.finish(t, ob)
		assert.Len(t, e.scan(t, gen.TagRelayKey), 2)
	})
}

func TestAppendsStopWhereOneBatchIsFull(t *testing.T) {
	e := newEnv(t, memengine.New())
	ob := e.builder(t)
	n := 0
	var err error
	for ; n < 1000 && err == nil; n++ {
		_, err = ob.Relay(context.Background(), target, puts(1), nil)
	}
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.Contains(t, err.Error(), "operations")
	assert.Equal(t, n-1, ob.Len())
	b := store.NewBatch()
	require.NoError(t, ob.Finish(b))
	assert.LessOrEqual(t, b.Ops(), e.caps.MaxBatchOps)
	e.mustApply(t, b)
}

func TestFinishIntoAFullBatchAddsNothingAndCanBeRetried(t *testing.T) {
	e := newEnv(t, memengine.New())
	ob := e.builder(t)
	_, err := ob.Relay(context.Background(), target, puts(1), nil)
	require.NoError(t, err)
	full := store.NewBatch()
	for i := range e.caps.MaxBatchOps - 2 {
		full.Put(store.Key(fmt.Sprintf("own%03d", i)), store.Value("x"))
	}
	err = ob.Finish(full)
	require.ErrorIs(t, err, store.ErrInvalid)
	assert.Len(t, full.Writes, e.caps.MaxBatchOps-2, "nothing added")
	assert.Empty(t, full.Preconditions)

	b := store.NewBatch()
	require.NoError(t, ob.Finish(b), "the builder is still usable")
	e.mustApply(t, b)
}

// longPartition is a partition of another schema whose identity, a valid
// tuple, is one byte over what a relay row may name.
type longPartition struct{}

func (longPartition) AppendTuple(dst []byte) ([]byte, error) {
	dst = append(dst, 0x02) // a tuple string of MaxRelayV1Target-1 bytes
	dst = append(dst, strings.Repeat("n", gen.MaxRelayV1Target-1)...)
	return append(dst, 0x00), nil
}

func (longPartition) Kind() string { return "long" }
