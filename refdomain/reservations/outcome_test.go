package reservations_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The JSON form is a contract with receivers: golden files pin it.
func TestOutcomeJSONIsStable(t *testing.T) {
	ab, err := reservations.FromReservation(rid("r-2"), audience, &refdomain.ReservationAborted{
		Repository: refdomain.MustRepoName("repo"), OccurredAtMs: 1_700_000_000_000, Reason: refdomain.AbortReasonQuotaExceeded, Detail: "over quota",
	})
	require.NoError(t, err)
	for name, o := range map[string]reservations.Outcome{"committed": sampleOutcome(t, "r-1"), "aborted": ab} {
		t.Run(name, func(t *testing.T) {
			b, err := o.JSON()
			require.NoError(t, err)
			path := filepath.Join("testdata", "outcome_"+name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(bytes.TrimSpace(want)), string(b))
			back, err := reservations.ParseOutcome(want)
			require.NoError(t, err)
			assert.Equal(t, o, back)
		})
	}
}

func TestFromReservation(t *testing.T) {
	_, err := reservations.FromReservation(rid("t"), audience, &refdomain.ReservationTicketed{})
	assert.ErrorIs(t, err, outcome.ErrNotTerminal)
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = reservations.FromReservation(rid("n"), audience, nil)
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = reservations.FromReservation(rid("n"), audience, (*refdomain.ReservationCommitted)(nil))
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = reservations.FromReservation(rid("u"), audience, &refdomain.ReservationAborted{Repository: refdomain.MustRepoName("repo"), Reason: 99})
	assert.ErrorIs(t, err, store.ErrInvalid)
	o, err := reservations.FromReservation(rid("c"), audience, committed())
	require.NoError(t, err)
	assert.Equal(t, reservations.ResultCommitted, o.Result)
	assert.NotNil(t, o.Committed.Refs, "refs encode as [], never null")
}

func TestParseOutcomeRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"empty":             ``,
		"not json":          `{`,
		"trailing":          `{"version":1,"reservation_id":"r","audience":"a","result":"aborted","aborted":{"reason":"x","detail":""}} {}`,
		"version":           `{"version":2,"reservation_id":"r","audience":"a","result":"aborted","aborted":{}}`,
		"no id":             `{"version":1,"audience":"a","result":"aborted","aborted":{}}`,
		"no audience":       `{"version":1,"reservation_id":"r","result":"aborted","aborted":{}}`,
		"no detail":         `{"version":1,"reservation_id":"r","audience":"a","result":"committed"}`,
		"both details":      `{"version":1,"reservation_id":"r","audience":"a","result":"committed","committed":{},"aborted":{}}`,
		"unknown result":    `{"version":1,"reservation_id":"r","audience":"a","result":"maybe","aborted":{}}`,
		"mismatched detail": `{"version":1,"reservation_id":"r","audience":"a","result":"committed","aborted":{}}`,
		"wrong type":        `{"version":"1"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := reservations.ParseOutcome([]byte(in))
			assert.ErrorIs(t, err, store.ErrInvalid)
		})
	}
	_, err := reservations.ParseOutcome([]byte(`{"version":1,"reservation_id":"r","audience":"a","result":"aborted","aborted":{"reason":"x"},"added_later":true}`))
	assert.NoError(t, err, "unknown fields are ignored")
}

// FuzzParseOutcome: parsing never panics, and what parses encodes to JSON
// that parses back to the same outcome.
func FuzzParseOutcome(f *testing.F) {
	for _, name := range []string{"committed", "aborted"} {
		b, err := os.ReadFile(filepath.Join("testdata", "outcome_"+name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := reservations.ParseOutcome(b)
		if err != nil {
			return
		}
		j, err := o.JSON()
		if err != nil {
			t.Fatalf("%q parses but does not encode: %v", b, err)
		}
		back, err := reservations.ParseOutcome(j)
		if err != nil {
			t.Fatal(err)
		}
		assert.Equal(t, o, back)
	})
}
