package outcome_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/store"
)

// These tests check Standard Webhooks against the specification's own Go
// library, in both directions: the library verifies what a WebhookSink
// sends, and a Receiver accepts what the library signs.

// whsec is a Standard Webhooks secret of n bytes, each b.
func whsec(n int, b byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n))
}

func webhookSecret(t testing.TB, s string) *outcome.HMACKey {
	k, err := outcome.ParseWebhookSecret(s)
	require.NoError(t, err)
	return k
}

func officialWebhook(t testing.TB, secret string) *standardwebhooks.Webhook {
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return wh
}

// officialVerifier is a server that verifies each request with the
// official library under each of secrets, answering 204 when one
// verifies and 401 otherwise, and records what it saw.
type officialVerifier struct {
	mu   sync.Mutex
	seen []request
	errs []error
	srv  *httptest.Server
}

func newOfficialVerifier(t testing.TB, secrets ...string) *officialVerifier {
	ov := &officialVerifier{}
	ov.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var err error
		for _, s := range secrets {
			if err = officialWebhook(t, s).Verify(body, r.Header); err == nil {
				break
			}
		}
		ov.mu.Lock()
		ov.seen = append(ov.seen, request{header: r.Header.Clone(), body: body})
		ov.errs = append(ov.errs, err)
		ov.mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ov.srv.Close)
	return ov
}

func (ov *officialVerifier) last() (request, error) {
	ov.mu.Lock()
	defer ov.mu.Unlock()
	return ov.seen[len(ov.seen)-1], ov.errs[len(ov.errs)-1]
}

func TestOfficialLibraryVerifiesTheSink(t *testing.T) {
	for _, n := range []int{24, 32, 64} {
		t.Run(fmt.Sprintf("%d-byte secret", n), func(t *testing.T) {
			secret := whsec(n, byte(n))
			ov := newOfficialVerifier(t, secret)
			sink := webhook(t, ov.srv.URL, webhookSecret(t, secret), func(c *outcome.WebhookSinkConfig) { c.StandardWebhooks = true })
			env := sampleEnvelope(t, "msg_1")
			require.NoError(t, sink.Deliver(ctx, env))
			got, err := ov.last()
			require.NoError(t, err)
			assert.Equal(t, "msg_1", got.header.Get("webhook-id"))
			body, err := env.JSON()
			require.NoError(t, err)
			assert.Equal(t, body, got.body)
			if n < outcome.MinHMACKeyBytes {
				assert.Empty(t, got.header.Get(outcome.HeaderSignature), "a short key signs Standard Webhooks only")
			} else {
				assert.NotEmpty(t, got.header.Get(outcome.HeaderSignature))
			}
		})
	}
}

func TestOfficialLibraryRefusesWhatTheSinkDidNotSign(t *testing.T) {
	secret := whsec(24, 7)
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, webhookSecret(t, secret), func(c *outcome.WebhookSinkConfig) { c.StandardWebhooks = true })
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "msg_2")))
	signed := rec.requests()[0]
	wh := officialWebhook(t, secret)
	require.NoError(t, wh.Verify(signed.body, signed.header), "the untouched request verifies")

	tampered := bytes.Replace(signed.body, []byte(`"bytes_stored":10`), []byte(`"bytes_stored":11`), 1)
	require.NotEqual(t, signed.body, tampered)
	assert.ErrorIs(t, wh.Verify(tampered, signed.header), standardwebhooks.ErrNoMatchingSignature, "tampered body")
	assert.ErrorIs(t, officialWebhook(t, whsec(24, 8)).Verify(signed.body, signed.header), standardwebhooks.ErrNoMatchingSignature, "wrong secret")
	h := signed.header.Clone()
	h.Set("webhook-id", "msg_other")
	assert.ErrorIs(t, wh.Verify(signed.body, h), standardwebhooks.ErrNoMatchingSignature, "another message id")

	for _, skew := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
		rec := newRecorder(t, nil)
		off := clock.NewManual(time.Now().Add(skew).Truncate(time.Millisecond))
		stale := webhook(t, rec.srv.URL, webhookSecret(t, secret), func(c *outcome.WebhookSinkConfig) {
			c.StandardWebhooks = true
			c.Clock = off
		})
		require.NoError(t, stale.Deliver(ctx, sampleEnvelope(t, "msg_3")))
		r := rec.requests()[0]
		want := standardwebhooks.ErrMessageTooOld
		if skew > 0 {
			want = standardwebhooks.ErrMessageTooNew
		}
		assert.ErrorIs(t, wh.Verify(r.body, r.header), want, "timestamp %v off", skew)
	}
}

// While keys rotate the sink signs with each: a receiver holding the old
// secret and one holding the new both verify, one holding neither does
// not.
func TestSinkSignsWithSeveralKeysWhileTheyRotate(t *testing.T) {
	old, next := whsec(24, 1), whsec(32, 2)
	edOld := edSigner(t, edPriv)
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, webhookSecret(t, next), func(c *outcome.WebhookSinkConfig) {
		c.StandardWebhooks = true
		c.ExtraSigners = []outcome.Signer{webhookSecret(t, old), edOld}
	})
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "msg_rot")))
	r := rec.requests()[0]
	sigs := strings.Fields(r.header.Get("webhook-signature"))
	require.Len(t, sigs, 3)
	assert.True(t, strings.HasPrefix(sigs[2], "v1a,"))
	for _, s := range []string{old, next} {
		assert.NoError(t, officialWebhook(t, s).Verify(r.body, r.header), "a receiver holding one of the keys verifies")
	}
	assert.Error(t, officialWebhook(t, whsec(32, 3)).Verify(r.body, r.header))
	verifyStandardWebhooks(t, http.Header{"Webhook-Id": {r.header.Get("webhook-id")}, "Webhook-Timestamp": {r.header.Get("webhook-timestamp")},
		"Webhook-Signature": {sigs[2]}}, r.body, nil, edOld.Public())
	// The library's own scheme carries the keys that meet its minimum:
	// the 32-byte secret and the Ed25519 key, not the 24-byte one.
	lib := strings.Fields(r.header.Get(outcome.HeaderSignature))
	require.Len(t, lib, 2)
	assert.True(t, strings.HasPrefix(lib[0], "hmac-sha256="))
	assert.True(t, strings.HasPrefix(lib[1], "ed25519="))
	for _, v := range []outcome.Verifier{webhookSecret(t, next), edVerifier(t, edOld)} {
		rs := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{v}})
		assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, r.header, r.body).StatusCode, "a library receiver holding one key accepts")
	}
}

// officialRequest is a request the official library signs, at ts, with
// each secret (space-separated signatures).
func officialRequest(t testing.TB, id string, ts time.Time, body []byte, secrets ...string) http.Header {
	var sigs []string
	for _, s := range secrets {
		sig, err := officialWebhook(t, s).Sign(id, ts, body)
		require.NoError(t, err)
		sigs = append(sigs, sig)
	}
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	h.Set("Content-Type", "application/json")
	return h
}

// The official library's own signature vector verifies.
func TestReceiverVerifiesTheOfficialVector(t *testing.T) {
	ts := time.Unix(1614265330, 0)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{
		StandardWebhooks: []outcome.Verifier{webhookSecret(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")},
		Clock:            clock.NewManual(ts.Truncate(time.Millisecond)),
	})
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	req.Header.Set("webhook-timestamp", "1614265330")
	req.Header.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	v, err := recv.Verify(req)
	require.NoError(t, err)
	assert.Equal(t, body, v.Body)
	assert.True(t, v.Standard)
	assert.Equal(t, "msg_p5jXN8AQM9LWM0D4loKWxJek", v.ID)
}

func TestReceiverAcceptsWhatTheOfficialLibrarySigns(t *testing.T) {
	secret := whsec(24, 9)
	now := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewManual(now)
	rs := newReceiverServer(t, outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{webhookSecret(t, secret)}, Clock: clk})
	env := sampleEnvelope(t, "msg_in")
	body, err := env.JSON()
	require.NoError(t, err)
	h := officialRequest(t, "msg_in", now, body, whsec(32, 1), secret) // an old key's signature first
	assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, h, body).StatusCode)
	assert.Equal(t, []outcome.Envelope{env}, rs.envelopes())

	other := sampleEnvelope(t, "msg_x")
	otherBody, err := other.JSON()
	require.NoError(t, err)
	fresh := func(id string) http.Header { return officialRequest(t, id, now, otherBody, secret) }
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
	}{
		{"replay", h, body},
		{"tampered body", fresh("msg_x"), bytes.Replace(otherBody, []byte(`"bytes_stored":10`), []byte(`"bytes_stored":11`), 1)},
		{"wrong secret", officialRequest(t, "msg_x", now, otherBody, whsec(24, 10)), otherBody},
		{"stale timestamp", officialRequest(t, "msg_x", now.Add(-outcome.DefaultTolerance-time.Second), otherBody, secret), otherBody},
		{"future timestamp", officialRequest(t, "msg_x", now.Add(outcome.DefaultTolerance+time.Second), otherBody, secret), otherBody},
		{"id changed", func() http.Header { h := fresh("msg_x"); h.Set("webhook-id", "msg_y"); return h }(), otherBody},
		{"timestamp changed", func() http.Header {
			h := fresh("msg_x")
			h.Set("webhook-timestamp", strconv.FormatInt(now.Unix()+1, 10))
			return h
		}(), otherBody},
		{"v1a label on an HMAC signature", func() http.Header {
			h := fresh("msg_x")
			h.Set("webhook-signature", strings.Replace(h.Get("webhook-signature"), "v1,", "v1a,", 1))
			return h
		}(), otherBody},
		{"no signature", func() http.Header { h := fresh("msg_x"); h.Del("webhook-signature"); return h }(), otherBody},
		{"too many signatures", func() http.Header {
			h := fresh("msg_x")
			h.Set("webhook-signature", strings.Repeat("v1,AAAA ", outcome.MaxSignatures)+h.Get("webhook-signature"))
			return h
		}(), otherBody},
		{"malformed timestamp", func() http.Header { h := fresh("msg_x"); h.Set("webhook-timestamp", "1e9"); return h }(), otherBody},
		{"id with a space", func() http.Header { h := fresh("msg_x"); h.Set("webhook-id", "msg x"); return h }(), otherBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, http.StatusUnauthorized, post(t, rs.srv.URL, tc.header, tc.body).StatusCode)
		})
	}
	assert.Len(t, rs.envelopes(), 1, "the handler saw the original only")
	// The untouched request of the second message is accepted.
	assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, fresh("msg_x"), otherBody).StatusCode)
}

// A Standard Webhooks message id is held while the message is accepted,
// released when the handler fails, so that the sender's retry (the same
// id, a new timestamp and signature) is accepted at once; after a 2xx it
// is held until the window ends, and a retry after that is accepted.
func TestReceiverHoldsAMessageIDUntilItsWindowEndsUnlessTheHandlerFailed(t *testing.T) {
	secret := whsec(32, 4)
	start := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewManual(start)
	nonces := outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{})
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{webhookSecret(t, secret)}, Clock: clk, Nonces: nonces, Sender: "shop"})
	require.NoError(t, err)
	fail := true
	calls := 0
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(contextT, outcome.Envelope) error {
		calls++
		if fail {
			return fmt.Errorf("the service's table is down")
		}
		return nil
	})))
	defer srv.Close()
	env := sampleEnvelope(t, "msg_retry")
	body, err := env.JSON()
	require.NoError(t, err)
	attempt := func() int {
		return post(t, srv.URL, officialRequest(t, "msg_retry", clk.Now(), body, secret), body).StatusCode
	}
	first := officialRequest(t, "msg_retry", clk.Now(), body, secret)
	assert.Equal(t, http.StatusServiceUnavailable, post(t, srv.URL, first, body).StatusCode, "the handler failed")
	assert.Zero(t, nonces.Len(), "the id was released")
	clk.Advance(5 * time.Second)
	fail = false
	assert.Equal(t, http.StatusNoContent, attempt(), "the retry is accepted at once")
	assert.Equal(t, http.StatusUnauthorized, post(t, srv.URL, first, body).StatusCode, "the failed attempt replayed is refused now")
	clk.Advance(time.Minute)
	assert.Equal(t, http.StatusUnauthorized, attempt(), "a duplicate inside the window is refused")
	clk.Advance(outcome.DefaultTolerance)
	assert.Equal(t, http.StatusNoContent, attempt(), "a retry after the window is accepted; the handler deduplicates")
	assert.Equal(t, 3, calls)
}

// Wrap releases a Standard Webhooks id when the handler panics, and keeps
// a library nonce whatever the handler answered.
func TestWrapReleasesAStandardIDWhenTheHandlerPanics(t *testing.T) {
	secret := whsec(32, 5)
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	nonces := outcome.NewMemoryNonceStore(outcome.MemoryNonceStoreConfig{})
	key := webhookSecret(t, secret)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{key}, Clock: clk, Nonces: nonces, Sender: "shop"})
	require.NoError(t, err)
	h := recv.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	body, err := sampleEnvelope(t, "msg_panic").JSON()
	require.NoError(t, err)
	serve := func(hdr http.Header) {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = hdr
		assert.PanicsWithValue(t, http.ErrAbortHandler, func() { h.ServeHTTP(httptest.NewRecorder(), req) })
	}
	serve(officialRequest(t, "msg_panic", clk.Now(), body, secret))
	assert.Zero(t, nonces.Len(), "the id was released")

	rec := newRecorder(t, nil)
	require.NoError(t, webhook(t, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) { c.Clock = clk }).Deliver(ctx, sampleEnvelope(t, "lib")))
	lib := rec.requests()[0]
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(lib.body))
	req.Header = lib.header
	assert.Panics(t, func() { h.ServeHTTP(httptest.NewRecorder(), req) })
	assert.Equal(t, 2, nonces.Len(), "a library nonce, and the attempt's key, are kept: a retry is a new nonce")
}

// An Ed25519 (v1a) signature, as the specification defines it, is
// accepted; the sink's v1a verifies under the specification's content.
func TestReceiverVerifiesV1a(t *testing.T) {
	signer := edSigner(t, edPriv)
	pub, err := outcome.ParseWebhookPublicKey(signer.WebhookPublicKey())
	require.NoError(t, err)
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	rs := newReceiverServer(t, outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{pub}, Clock: clk})
	env := sampleEnvelope(t, "msg_ed")
	body, err := env.JSON()
	require.NoError(t, err)
	ts := strconv.FormatInt(clk.Now().Unix(), 10)
	sig := ed25519.Sign(edPriv, []byte("msg_ed."+ts+"."+string(body)))
	h := http.Header{}
	h.Set("webhook-id", "msg_ed")
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(sig)+" v1a,"+base64.StdEncoding.EncodeToString(sig))
	assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, h, body).StatusCode)
	assert.Equal(t, http.StatusUnauthorized, post(t, rs.srv.URL, h, body).StatusCode, "replayed")

	// The sink's own v1a, end to end.
	sink := webhook(t, rs.srv.URL, signer, func(c *outcome.WebhookSinkConfig) {
		c.StandardWebhooks = true
		c.Clock = clk
	})
	// The receiver has no library-scheme key, so it verifies the Standard
	// Webhooks headers of the request.
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "msg_ed2")))
	assert.Len(t, rs.envelopes(), 2)
}

func TestWebhookKeyStrings(t *testing.T) {
	signer := edSigner(t, edPriv)
	seed := "whsk_" + base64.StdEncoding.EncodeToString(edPriv.Seed())
	for _, s := range []string{seed, "whsk_" + base64.StdEncoding.EncodeToString(edPriv), strings.TrimPrefix(seed, "whsk_")} {
		sk, err := outcome.ParseWebhookSigningKey(s)
		require.NoError(t, err)
		assert.Equal(t, signer.Public(), sk.Public())
	}
	assert.True(t, strings.HasPrefix(signer.WebhookPublicKey(), "whpk_"))
	_, err := outcome.ParseWebhookSecret(strings.TrimPrefix(whsec(24, 1), "whsec_"))
	assert.NoError(t, err, "the prefix may be left out, as the official libraries allow")

	bad := append(ed25519.PrivateKey(nil), edPriv...)
	bad[40] ^= 1
	for name, err := range map[string]error{
		"secret of 23 bytes":      second(outcome.ParseWebhookSecret(whsec(23, 1))),
		"secret of 65 bytes":      second(outcome.ParseWebhookSecret(whsec(65, 1))),
		"secret not base64":       second(outcome.ParseWebhookSecret("whsec_not base64!")),
		"public key as secret":    second(outcome.ParseWebhookSecret(signer.WebhookPublicKey())),
		"public key of 31 bytes":  second(outcome.ParseWebhookPublicKey("whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31)))),
		"public key not base64":   second(outcome.ParseWebhookPublicKey("whpk_%%%")),
		"signing key of 16 bytes": second(outcome.ParseWebhookSigningKey("whsk_" + base64.StdEncoding.EncodeToString(make([]byte, 16)))),
		"mismatched private key":  second(outcome.ParseWebhookSigningKey("whsk_" + base64.StdEncoding.EncodeToString(bad))),
		"signing key not base64":  second(outcome.ParseWebhookSigningKey("whsk_***")),
	} {
		assert.ErrorIs(t, err, store.ErrInvalid, name)
		if err != nil {
			assert.NotContains(t, err.Error(), "not base64!", name)
		}
	}

	short := webhookSecret(t, whsec(24, 1))
	_, err = outcome.NewWebhookSink(outcome.WebhookSinkConfig{URL: "https://example.test/", Signer: short})
	assert.ErrorIs(t, err, store.ErrInvalid, "a 24-byte key signs Standard Webhooks only")
	_, err = outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{short}})
	assert.ErrorIs(t, err, store.ErrInvalid, "a 24-byte key verifies Standard Webhooks only")
	_, err = outcome.NewReceiver(outcome.ReceiverConfig{StandardWebhooks: []outcome.Verifier{short}})
	assert.NoError(t, err)
}

func second[T any](_ T, err error) error { return err }

// FuzzReceiverVerify feeds a Receiver holding keys of both schemes
// requests whose signature headers and body are arbitrary: it never
// panics, and accepts only a body some key signed.
func FuzzReceiverVerify(f *testing.F) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	key := webhookSecret(f, whsec(32, 3))
	rec := newRecorder(f, nil)
	require.NoError(f, webhook(f, rec.srv.URL, key, func(c *outcome.WebhookSinkConfig) {
		c.Clock = clk
		c.StandardWebhooks = true
	}).Deliver(ctx, sampleEnvelope(f, "msg_fuzz")))
	signed := rec.requests()[0]
	h := signed.header
	f.Add(h.Get(outcome.HeaderEndpoint), h.Get(outcome.HeaderNonce), h.Get(outcome.HeaderCreatedAt), h.Get(outcome.HeaderExpiresAt),
		h.Get(outcome.HeaderSignature), "", "", "", signed.body)
	f.Add("", "", "", "", "", h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"), signed.body)
	f.Add("", "", "", "", "", "msg", "1700000000", "v1,AAAA v1a,AAAA x,y v1,", []byte("{}"))
	f.Fuzz(func(t *testing.T, endpoint, nonce, created, expires, sig, id, ts, stdSig string, body []byte) {
		recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, StandardWebhooks: []outcome.Verifier{key}, Clock: clk})
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		for name, v := range map[string]string{outcome.HeaderEndpoint: endpoint, outcome.HeaderNonce: nonce, outcome.HeaderCreatedAt: created,
			outcome.HeaderExpiresAt: expires, outcome.HeaderSignature: sig, "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": stdSig} {
			if v != "" {
				req.Header[http.CanonicalHeaderKey(name)] = []string{v}
			}
		}
		v, err := recv.Verify(req)
		if err == nil {
			assert.Equal(t, signed.body, v.Body, "only a signed body is accepted")
		}
	})
}
