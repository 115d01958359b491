package outcome_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
)

// slowBody is a request body that advances a manual clock as it is read,
// as a body trickling in over a slow connection does; onRead runs once,
// after the clock moved, before the body is handed over.
type slowBody struct {
	r       io.Reader
	clk     *clock.Manual
	advance time.Duration
	onRead  func()
	done    bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if !b.done {
		b.done = true
		b.clk.Advance(b.advance)
		if b.onRead != nil {
			b.onRead()
		}
	}
	return b.r.Read(p)
}

// A request whose body arrives slowly is checked against the time its
// body was read, not the time its headers were: otherwise its nonce,
// recorded with an expiry already past, is evicted by the next request
// and the same request is accepted twice.
func TestReceiverChecksTheWindowAfterASlowBody(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{hmacKey(t, hmacSecret)}, Clock: clk, MaxSkew: time.Second})
	require.NoError(t, err)
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) {
		c.Clock = clk
		c.Validity = time.Minute
	})
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "a")))
	captured := rec.requests()[0]
	verify := func(body io.Reader) error {
		req := httptest.NewRequest(http.MethodPost, "/", body)
		req.Header = captured.header.Clone()
		_, err := recv.Verify(req)
		return err
	}
	require.NoError(t, verify(bytes.NewReader(captured.body)), "the original is accepted")

	// Its replay starts inside the window; while its body trickles in the
	// window ends, and another, fresh request is verified meanwhile.
	slow := &slowBody{r: bytes.NewReader(captured.body), clk: clk, advance: time.Minute + 2*time.Second, onRead: func() {
		require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "b")))
		fresh := rec.requests()[1]
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(fresh.body))
		req.Header = fresh.header.Clone()
		_, err := recv.Verify(req)
		require.NoError(t, err, "a fresh request is accepted")
	}}
	err = verify(slow)
	assert.ErrorIs(t, err, outcome.ErrRejected, "the replay, read after its window, is refused")
}

// Every formatting verb and slog print a sink or receiver without its
// keys.
func TestSinkAndReceiverFormatWithoutKeys(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789ABCDEF-hmac-secret")
	key := hmacKey(t, secret)
	signer := edSigner(t, edPriv)
	sink := webhook(t, "https://hooks.example.test/outcomes", key)
	edSink := webhook(t, "https://hooks.example.test/outcomes", signer)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key, edVerifier(t, signer)}})
	require.NoError(t, err)
	forbidden := []string{string(secret), fmt.Sprintf("%x", secret), fmt.Sprintf("%X", secret), fmt.Sprint(secret),
		fmt.Sprintf("%q", secret), fmt.Sprintf("%x", []byte(edPriv)), fmt.Sprint([]byte(edPriv)), fmt.Sprintf("%q", []byte(edPriv)),
		fmt.Sprintf("%x", []byte(edPriv[:32])), fmt.Sprint([]byte(edPriv[:32])), fmt.Sprintf("%q", []byte(edPriv[:32]))}
	short := webhookSecret(t, "whsec_"+base64.StdEncoding.EncodeToString(secret[:24]))
	sinkCfg := outcome.WebhookSinkConfig{URL: "https://hooks.example.test/", Signer: key, ExtraSigners: []outcome.Signer{signer, short}}
	recvCfg := outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{short, edVerifier(t, signer)}}
	for name, v := range map[string]any{"sink": sink, "*sink": *sink, "ed sink": edSink, "receiver": recv, "*receiver": *recv,
		"sink config": sinkCfg, "&sink config": &sinkCfg, "receiver config": recvCfg, "&receiver config": &recvCfg,
		"hmac key": key, "*hmac key": *key, "short key": short, "ed signer": signer, "*ed signer": *signer} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
			s := fmt.Sprintf(verb, v)
			if verb == "%T %v" {
				s = fmt.Sprintf(verb, v, v)
			}
			for _, f := range forbidden {
				assert.NotContains(t, s, f, "%s formatted with %s", name, verb)
			}
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "value", v)
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "value", v)
		if j, err := json.Marshal(v); err == nil {
			buf.Write(j)
		}
		for _, f := range forbidden {
			assert.NotContains(t, buf.String(), f, "%s in slog", name)
		}
	}
}

// Handle reads what the Receiver in front of it allows, not a fixed
// mebibyte: a valid outcome over 1 MiB is delivered when MaxBodyBytes
// allows it.
func TestHandleReadsWhatTheReceiverAllows(t *testing.T) {
	key := hmacKey(t, hmacSecret)
	var got []outcome.Envelope
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, MaxBodyBytes: 2 << 20})
	require.NoError(t, err)
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(_ contextT, e outcome.Envelope) error {
		got = append(got, e)
		return nil
	})))
	defer srv.Close()
	big := sampleOutcome(t, "big")
	big.Result, big.Committed, big.Aborted = reservations.ResultAborted, nil, &reservations.Aborted{Reason: "internal", Detail: strings.Repeat("d", 1<<20)}
	env := envelopeOf(t, big)
	body, err := env.JSON()
	require.NoError(t, err)
	require.Greater(t, len(body), 1<<20)
	require.NoError(t, webhook(t, srv.URL, key).Deliver(ctx, env))
	require.Len(t, got, 1)
	assert.Equal(t, env.ID, got[0].ID)
}

// Configuration errors name a URL without its query or user information:
// a token in the query never reaches the logs.
func TestConfigErrorsOmitTheQuery(t *testing.T) {
	key := hmacKey(t, hmacSecret)
	for _, url := range []string{
		"http://example.test/hook?token=s3cr3t-t0ken",
		"ftp://example.test/hook?token=s3cr3t-t0ken",
		"https://example.test/hook?token=s3cr3t-t0ken#frag",
		"https://example.test:99999/hook?token=s3cr3t-t0ken",
		"/hook?token=s3cr3t-t0ken",
		"https://user:s3cr3t-t0ken@example.test/hook",
		"https://exa mple.test/hook?token=s3cr3t-t0ken",
	} {
		_, err := outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: url, Signer: key})
		require.Error(t, err, url)
		assert.NotContains(t, err.Error(), "s3cr3t-t0ken", url)
	}
	_, err := outcome.CanonicalOrigin("https://example.test/path?token=s3cr3t-t0ken")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t-t0ken")
}

// A receiver sharing an Ed25519 key with another cannot forward a
// delivery meant for itself to the other inside the window: each
// receiver configured with its own endpoint refuses what was signed for
// another, by default (the URL) and with an endpoint id.
func TestReceiverRefusesADeliveryMeantForAnother(t *testing.T) {
	signer := edSigner(t, edPriv)
	a := newRecorder(t, nil) // receiver A, which keeps what it got
	t.Run("url", func(t *testing.T) {
		b := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{edVerifier(t, signer)}, Endpoint: "https://b.example.test/outcomes"})
		n := len(a.requests())
		require.NoError(t, webhook(t, a.srv.URL+"/outcomes?token=x", signer).Deliver(ctx, sampleEnvelope(t, "for-a")))
		got := a.requests()[n]
		assert.Equal(t, a.srv.URL+"/outcomes", got.header.Get(outcome.HeaderEndpoint),
			"the endpoint signed is the URL's origin and path, without query")
		assert.Equal(t, http.StatusUnauthorized, post(t, b.srv.URL, got.header, got.body).StatusCode, "B refuses what was signed for A")
		assert.Empty(t, b.envelopes())
		// A, configured with its own URL (in another spelling), accepts it.
		aRecv := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{edVerifier(t, signer)},
			Endpoint: strings.Replace(a.srv.URL, "http://", "HTTP://", 1) + "/outcomes?other=query"})
		assert.Equal(t, http.StatusNoContent, post(t, aRecv.srv.URL, got.header, got.body).StatusCode)
	})
	t.Run("endpoint id", func(t *testing.T) {
		b := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{edVerifier(t, signer)}, Endpoint: "billing-eu"})
		n := len(a.requests())
		toA := webhook(t, a.srv.URL, signer, func(c *outcome.WebhookSinkConfig) { c.Endpoint = "billing-us" })
		require.NoError(t, toA.Deliver(ctx, sampleEnvelope(t, "for-a")))
		got := a.requests()[n]
		assert.Equal(t, "billing-us", got.header.Get(outcome.HeaderEndpoint))
		assert.Equal(t, http.StatusUnauthorized, post(t, b.srv.URL, got.header, got.body).StatusCode, "B refuses what was signed for A")
		forged := got.header.Clone()
		forged.Set(outcome.HeaderEndpoint, "billing-eu")
		assert.Equal(t, http.StatusUnauthorized, post(t, b.srv.URL, forged, got.body).StatusCode, "the endpoint is signed")
		assert.Empty(t, b.envelopes())
		toB := webhook(t, b.srv.URL, signer, func(c *outcome.WebhookSinkConfig) { c.Endpoint = "billing-eu" })
		require.NoError(t, toB.Deliver(ctx, sampleEnvelope(t, "for-b")))
		assert.Len(t, b.envelopes(), 1)
	})
}

// admitAll is a NonceStore that refuses nothing, not even an expiry
// already past: the receiver's own window checks must hold without help.
type admitAll struct{ claims int }

func (a *admitAll) Claim(_ contextT, sender string, keys []outcome.NonceKey, _ time.Time) (outcome.NonceClaim, error) {
	a.claims++
	return outcome.NonceClaim{Sender: sender, Keys: keys}, nil
}
func (a *admitAll) Release(contextT, outcome.NonceClaim) error { return nil }

func TestReceiverChecksWindowsWhateverItsNonceStore(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	nonces := &admitAll{}
	secret := whsec(32, 6)
	key := webhookSecret(t, secret)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{key},
		Clock: clk, MaxSkew: time.Second, Nonces: nonces, Sender: "shop"})
	require.NoError(t, err)
	rec := newRecorder(t, nil)
	require.NoError(t, webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) {
		c.Clock = clk
		c.Validity = time.Minute
	}).Deliver(ctx, sampleEnvelope(t, "slow")))
	lib := rec.requests()[0]
	verify := func(h http.Header, body io.Reader) error {
		req := httptest.NewRequest(http.MethodPost, "/", body)
		req.Header = h.Clone()
		_, err := recv.Verify(req)
		return err
	}
	slow := &slowBody{r: bytes.NewReader(lib.body), clk: clk, advance: time.Minute + 2*time.Second}
	assert.ErrorIs(t, verify(lib.header, slow), outcome.ErrRejected, "a body read after the window")

	body, err := sampleEnvelope(t, "msg_w").JSON()
	require.NoError(t, err)
	now := clk.Now()
	for _, at := range []time.Time{now.Add(-outcome.DefaultTolerance - time.Second), now.Add(outcome.DefaultTolerance + time.Second)} {
		assert.ErrorIs(t, verify(officialRequest(t, "msg_w", at, body, secret), bytes.NewReader(body)), outcome.ErrRejected, "timestamp %v", at.Sub(now))
	}
	slowStd := &slowBody{r: bytes.NewReader(body), clk: clk, advance: outcome.DefaultTolerance + time.Second}
	assert.ErrorIs(t, verify(officialRequest(t, "msg_w", now, body, secret), slowStd), outcome.ErrRejected, "a Standard Webhooks body read after the window")
	assert.Zero(t, nonces.claims, "nothing outside its window reached the nonce store")
	assert.NoError(t, verify(officialRequest(t, "msg_w", clk.Now(), body, secret), bytes.NewReader(body)))
	assert.Equal(t, 1, nonces.claims)
}
