package outcome_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The envelope's JSON form is a contract with receivers: golden files pin it.
func TestEnvelopeJSONIsStable(t *testing.T) {
	shipped := outcome.Envelope{
		ID:        "ord_42",
		Type:      "order.shipped",
		Timestamp: time.Date(2026, 12, 1, 21, 25, 51, 123_000_000, time.UTC),
		Data:      json.RawMessage(`{ "order": 42, "lines": [ {"sku": "tea", "quantity": 2} ] }`),
	}
	for name, e := range map[string]outcome.Envelope{
		"shipped": shipped,
	} {
		t.Run(name, func(t *testing.T) {
			b, err := e.JSON()
			require.NoError(t, err)
			path := filepath.Join("testdata", "envelope_"+name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(bytes.TrimSpace(want)), string(b))
			back, err := outcome.ParseEnvelope(want)
			require.NoError(t, err)
			assert.Equal(t, e.ID, back.ID)
			assert.Equal(t, e.Type, back.Type)
			assert.True(t, e.Timestamp.Equal(back.Timestamp), "%v, want %v", back.Timestamp, e.Timestamp)
			assert.JSONEq(t, string(e.Data), string(back.Data))
			viaMarshal, err := json.Marshal(e)
			require.NoError(t, err)
			assert.Equal(t, b, viaMarshal, "json.Marshal writes the stable form")
		})
	}
}

func TestEnvelopeTimestampIsUTCMilliseconds(t *testing.T) {
	e := outcome.Envelope{ID: "a", Type: "t", Data: json.RawMessage(`{}`),
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("x", 3600))}
	b, err := e.JSON()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"timestamp":"2026-01-02T02:04:05.678Z"`)
}

func TestEnvelopeRejectsBadInput(t *testing.T) {
	ok := `{"id":"a","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`
	_, err := outcome.ParseEnvelope([]byte(ok))
	require.NoError(t, err)
	for name, in := range map[string]string{
		"empty":            ``,
		"not json":         `{`,
		"trailing":         ok + ` {}`,
		"no id":            `{"type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`,
		"id with a space":  `{"id":"a b","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`,
		"id not ascii":     `{"id":"é","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`,
		"id too long":      `{"id":"` + strings.Repeat("a", outcome.MaxEnvelopeIDBytes+1) + `","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`,
		"no type":          `{"id":"a","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`,
		"type too long":    `{"id":"a","type":"` + strings.Repeat("t", outcome.MaxEnvelopeTypeBytes+1) + `","timestamp":"2026-01-02T03:04:05.000Z","data":{}}`,
		"no timestamp":     `{"id":"a","type":"t","data":{}}`,
		"bad timestamp":    `{"id":"a","type":"t","timestamp":"yesterday","data":{}}`,
		"no data":          `{"id":"a","type":"t","timestamp":"2026-01-02T03:04:05.000Z"}`,
		"null data":        `{"id":"a","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":null}`,
		"data not object":  `{"id":"a","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":[1]}`,
		"wrong field type": `{"id":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := outcome.ParseEnvelope([]byte(in))
			assert.ErrorIs(t, err, store.ErrInvalid)
		})
	}
	_, err = outcome.ParseEnvelope([]byte(`{"id":"a","type":"t","timestamp":"2026-01-02T03:04:05.000Z","data":{},"added_later":1}`))
	assert.NoError(t, err, "unknown fields are ignored")
	_, err = outcome.Envelope{ID: "a", Type: "t", Timestamp: time.Unix(1, 0), Data: json.RawMessage(`{"x":`)}.JSON()
	assert.ErrorIs(t, err, store.ErrInvalid, "data that is not JSON does not encode")
}

// FuzzParseEnvelope: parsing never panics, and what parses encodes to JSON
// that parses back to the same envelope.
func FuzzParseEnvelope(f *testing.F) {
	for _, name := range []string{"shipped"} {
		b, err := os.ReadFile(filepath.Join("testdata", "envelope_"+name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := outcome.ParseEnvelope(b)
		if err != nil {
			return
		}
		j, err := e.JSON()
		if err != nil {
			t.Fatalf("%q parses but does not encode: %v", b, err)
		}
		back, err := outcome.ParseEnvelope(j)
		if err != nil {
			t.Fatal(err)
		}
		j2, err := back.JSON()
		require.NoError(t, err)
		assert.Equal(t, string(j), string(j2), "the JSON form is a fixed point")
	})
}
