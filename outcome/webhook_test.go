package outcome_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/gen"
	"github.com/mkit-dev/mkitfdb/outcome"
	"github.com/mkit-dev/mkitfdb/refdomain"
	"github.com/mkit-dev/mkitfdb/refdomain/reservations"
	"github.com/mkit-dev/mkitfdb/store"
)

var (
	hmacSecret = bytes.Repeat([]byte("k"), 32)
	edPriv     = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
)

func hmacKey(t testing.TB, secret []byte) *outcome.HMACKey {
	k, err := outcome.NewHMACKey(secret)
	require.NoError(t, err)
	return k
}

func edSigner(t testing.TB, priv ed25519.PrivateKey) *outcome.Ed25519Signer {
	s, err := outcome.NewEd25519Signer(priv)
	require.NoError(t, err)
	return s
}

func edVerifier(t testing.TB, s *outcome.Ed25519Signer) *outcome.Ed25519Verifier {
	v, err := outcome.NewEd25519Verifier(s.Public())
	require.NoError(t, err)
	return v
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

// sampleEnvelope is sampleOutcome's envelope.
func sampleEnvelope(t testing.TB, id string) outcome.Envelope {
	return envelopeOf(t, sampleOutcome(t, id))
}

// envelopeOf is o's envelope.
func envelopeOf(t testing.TB, o reservations.Outcome) outcome.Envelope {
	e, err := o.Envelope()
	require.NoError(t, err)
	return e
}

// request is what a test server saw of one request.
type request struct {
	header http.Header
	body   []byte
}

// recorder is a test server that records each request and answers with
// answer (200 when nil).
type recorder struct {
	mu     sync.Mutex
	seen   []request
	answer func(w http.ResponseWriter, r *http.Request)
	srv    *httptest.Server
}

func newRecorder(t testing.TB, answer func(w http.ResponseWriter, r *http.Request)) *recorder {
	rec := &recorder{answer: answer}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.seen = append(rec.seen, request{header: r.Header.Clone(), body: body})
		rec.mu.Unlock()
		if rec.answer != nil {
			rec.answer(w, r)
		}
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.seen...)
}

func webhook(t testing.TB, url string, signer outcome.Signer, cfg ...func(*outcome.WebhookSinkConfig)) *outcome.WebhookSink {
	c := outcome.WebhookSinkConfig{URL: url, Signer: signer}
	for _, f := range cfg {
		f(&c)
	}
	w, err := outcome.NewWebhookSink(c)
	require.NoError(t, err)
	return w
}

// receiverServer serves a Receiver in front of Handle, recording the
// outcomes its handler gets.
type receiverServer struct {
	mu   sync.Mutex
	got  []outcome.Envelope
	srv  *httptest.Server
	recv *outcome.Receiver
}

func newReceiverServer(t testing.TB, cfg outcome.ReceiverConfig) *receiverServer {
	rs := &receiverServer{}
	recv, err := outcome.NewReceiver(cfg)
	require.NoError(t, err)
	rs.recv = recv
	rs.srv = httptest.NewServer(recv.Wrap(outcome.Handle(func(_ contextT, env outcome.Envelope) error {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.got = append(rs.got, env)
		return nil
	})))
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *receiverServer) envelopes() []outcome.Envelope {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]outcome.Envelope(nil), rs.got...)
}

// post sends a recorded request again, as an attacker replaying it would.
func post(t testing.TB, url string, header http.Header, body []byte) *http.Response {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// verifyStandardWebhooks checks a request's Standard Webhooks headers as
// that specification's receivers do, independently of the package.
func verifyStandardWebhooks(t testing.TB, h http.Header, body []byte, secret []byte, pub ed25519.PublicKey) {
	t.Helper()
	id, ts, sig := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	require.NotEmpty(t, id)
	var env struct{ ID string }
	require.NoError(t, json.Unmarshal(body, &env))
	require.Equal(t, env.ID, id, "the message id is the envelope's")
	_, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err, "timestamp in seconds")
	content := []byte(id + "." + ts + "." + string(body))
	version, b64, ok := strings.Cut(sig, ",")
	require.True(t, ok, sig)
	raw, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	switch version {
	case "v1":
		m := hmac.New(sha256.New, secret)
		m.Write(content)
		assert.True(t, hmac.Equal(m.Sum(nil), raw), "v1 signature verifies")
	case "v1a":
		assert.True(t, ed25519.Verify(pub, content, raw), "v1a signature verifies")
	default:
		t.Fatalf("signature version %q", version)
	}
}

func TestWebhookSignaturesVerify(t *testing.T) {
	signer := edSigner(t, edPriv)
	for _, tc := range []struct {
		name     string
		signer   outcome.Signer
		verifier outcome.Verifier
	}{
		{"hmac-sha256", hmacKey(t, hmacSecret), hmacKey(t, hmacSecret)},
		{"ed25519", signer, edVerifier(t, signer)},
	} {
		for _, standard := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/standard=%v", tc.name, standard), func(t *testing.T) {
				rs := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{tc.verifier}})
				var seen []request
				var mu sync.Mutex
				// Record what goes over the wire on the way to the receiver.
				proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					mu.Lock()
					seen = append(seen, request{header: r.Header.Clone(), body: body})
					mu.Unlock()
					resp := post(t, rs.srv.URL, r.Header, body)
					w.WriteHeader(resp.StatusCode)
				}))
				defer proxy.Close()
				sink := webhook(t, proxy.URL, tc.signer, func(c *outcome.WebhookSinkConfig) { c.StandardWebhooks = standard })
				o := sampleEnvelope(t, "r1")
				require.NoError(t, sink.Deliver(ctx, o))
				require.NoError(t, sink.Deliver(ctx, o), "a second attempt is signed afresh, not a replay")
				assert.Equal(t, []outcome.Envelope{o, o}, rs.envelopes())
				require.Len(t, seen, 2)
				assert.NotEqual(t, seen[0].header.Get(outcome.HeaderNonce), seen[1].header.Get(outcome.HeaderNonce))
				assert.True(t, strings.HasPrefix(seen[0].header.Get(outcome.HeaderSignature), tc.name+"="))
				if standard {
					for _, r := range seen {
						verifyStandardWebhooks(t, r.header, r.body, hmacSecret, signer.Public())
					}
					assert.Equal(t, seen[0].header.Get("webhook-id"), seen[1].header.Get("webhook-id"), "the message id is stable across attempts")
				} else {
					assert.Empty(t, seen[0].header.Get("webhook-signature"))
				}
			})
		}
	}
}

func TestWebhookOverTLS(t *testing.T) {
	rs := &receiverServer{}
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{hmacKey(t, hmacSecret)}})
	require.NoError(t, err)
	srv := httptest.NewTLSServer(recv.Wrap(outcome.Handle(func(_ contextT, env outcome.Envelope) error {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.got = append(rs.got, env)
		return nil
	})))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "https://"))
	sink := webhook(t, srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) { c.Client = srv.Client() })
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "tls")))
	assert.Len(t, rs.envelopes(), 1)
}

func TestReceiverRejectsReplayedAndExpiredRequests(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	rs := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{hmacKey(t, hmacSecret)}, Clock: clk, MaxSkew: time.Second})
	rec := newRecorder(t, nil)
	sink := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) {
		c.Clock = clk
		c.Validity = time.Minute
	})
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "a")))
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "b")))
	reqs := rec.requests()
	require.Len(t, reqs, 2)

	resp := post(t, rs.srv.URL, reqs[0].header, reqs[0].body)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode, "the original is accepted")
	resp = post(t, rs.srv.URL, reqs[0].header, reqs[0].body)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "its replay is rejected")

	// The second request, never delivered, arrives after its window.
	clk.Advance(time.Minute + time.Second + time.Millisecond)
	resp = post(t, rs.srv.URL, reqs[1].header, reqs[1].body)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an expired request is rejected")

	// One made in the future, beyond the skew, too.
	future := clock.NewManual(clk.Now().Add(5 * time.Second))
	ahead := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) { c.Clock = future })
	require.NoError(t, ahead.Deliver(ctx, sampleEnvelope(t, "c")))
	last := rec.requests()[2]
	resp = post(t, rs.srv.URL, last.header, last.body)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a request from the future is rejected")
	assert.Len(t, rs.envelopes(), 1, "the handler saw the original only")
}

func TestReceiverAnswers401AndNeverCallsTheHandler(t *testing.T) {
	signer := edSigner(t, edPriv)
	otherEd := edSigner(t, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize)))
	rs := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{hmacKey(t, hmacSecret), edVerifier(t, signer)}})
	rec := newRecorder(t, nil)
	sign := func(s outcome.Signer) request {
		n := len(rec.requests())
		require.NoError(t, webhook(t, rec.srv.URL, s).Deliver(ctx, sampleEnvelope(t, "x")))
		return rec.requests()[n]
	}
	without := func(name string) func(r request) request {
		return func(r request) request { r.header.Del(name); return r }
	}
	set := func(name, value string) func(r request) request {
		return func(r request) request { r.header.Set(name, value); return r }
	}
	for _, tc := range []struct {
		name   string
		signer outcome.Signer
		change func(request) request
	}{
		{"tampered body", hmacKey(t, hmacSecret), func(r request) request {
			r.body = bytes.Replace(r.body, []byte(`"bytes_stored":10`), []byte(`"bytes_stored":11`), 1)
			return r
		}},
		{"wrong hmac key", hmacKey(t, bytes.Repeat([]byte("w"), 32)), nil},
		{"wrong ed25519 key", otherEd, nil},
		{"scheme swapped", hmacKey(t, hmacSecret), func(r request) request {
			r.header.Set(outcome.HeaderSignature, strings.Replace(r.header.Get(outcome.HeaderSignature), "hmac-sha256=", "ed25519=", 1))
			return r
		}},
		{"missing nonce", hmacKey(t, hmacSecret), without(outcome.HeaderNonce)},
		{"missing created-at", hmacKey(t, hmacSecret), without(outcome.HeaderCreatedAt)},
		{"missing expires-at", hmacKey(t, hmacSecret), without(outcome.HeaderExpiresAt)},
		{"missing signature", signer, without(outcome.HeaderSignature)},
		{"malformed signature", signer, set(outcome.HeaderSignature, "ed25519=!!!")},
		{"changed nonce", signer, set(outcome.HeaderNonce, strings.Repeat("0", 32))},
		{"longer window", signer, func(r request) request {
			exp, _ := strconv.ParseUint(r.header.Get(outcome.HeaderExpiresAt), 10, 64)
			r.header.Set(outcome.HeaderExpiresAt, strconv.FormatUint(exp+1, 10))
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sign(tc.signer)
			if tc.change != nil {
				r = tc.change(r)
			}
			resp := post(t, rs.srv.URL, r.header, r.body)
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		})
	}
	assert.Empty(t, rs.envelopes(), "the handler was never called")
	// The untouched requests of both schemes are accepted.
	for _, s := range []outcome.Signer{hmacKey(t, hmacSecret), signer} {
		r := sign(s)
		assert.Equal(t, http.StatusNoContent, post(t, rs.srv.URL, r.header, r.body).StatusCode)
	}
}

func TestReceiverBoundsBodyAndNonces(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	rs := newReceiverServer(t, outcome.ReceiverConfig{Verifiers: []outcome.Verifier{hmacKey(t, hmacSecret)}, Clock: clk,
		MaxNonces: 1, MaxBodyBytes: 2048, MaxSkew: time.Second})
	sink := webhook(t, rs.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) {
		c.Clock = clk
		c.Validity = time.Minute
	})
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "first")))
	// The one nonce remembered is unexpired: the next request waits.
	err := sink.Deliver(ctx, sampleEnvelope(t, "second"))
	var de *outcome.DeliveryError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Reason, "503")
	assert.Equal(t, time.Second, de.RetryAfter)
	clk.Advance(time.Minute + 2*time.Second)
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "second")), "accepted once the first nonce expired")

	big := sampleOutcome(t, "big")
	big.Result, big.Committed, big.Aborted = reservations.ResultAborted, nil, &reservations.Aborted{Reason: "internal", Detail: strings.Repeat("d", 4096)}
	err = sink.Deliver(ctx, envelopeOf(t, big))
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Reason, "413")
	assert.Len(t, rs.envelopes(), 2)
}

func TestWebhookAnswers(t *testing.T) {
	for _, tc := range []struct {
		status    int
		retryable bool
	}{
		{200, false}, {202, false}, {204, false},
		{408, true}, {429, true}, {500, true}, {502, true}, {503, true},
		{301, false}, {400, false}, {401, false}, {404, false}, {410, false},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", "https://elsewhere.test/")
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(tc.status)
			})
			err := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret)).Deliver(ctx, sampleEnvelope(t, "r"))
			assert.Len(t, rec.requests(), 1, "no redirect followed")
			if tc.status < 300 {
				assert.NoError(t, err)
				return
			}
			var de *outcome.DeliveryError
			require.ErrorAs(t, err, &de)
			assert.ErrorIs(t, err, outcome.ErrDelivery)
			assert.Contains(t, de.Reason, strconv.Itoa(tc.status))
			if tc.retryable {
				assert.Equal(t, 3*time.Second, de.RetryAfter)
			} else {
				assert.Zero(t, de.RetryAfter)
				assert.Contains(t, de.Reason, "not retryable")
			}
		})
	}
}

func TestWebhookRetryAfterDate(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", clk.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	})
	err := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) { c.Clock = clk }).Deliver(ctx, sampleEnvelope(t, "r"))
	var de *outcome.DeliveryError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 90*time.Second, de.RetryAfter)
}

// A 503 with Retry-After: 7 yields a 7 s hint, which the delivery timer
// honours over its shorter first backoff.
func TestWebhook503RetryAfter7(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	sink := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret))
	var de *outcome.DeliveryError
	require.ErrorAs(t, sink.Deliver(ctx, sampleEnvelope(t, "r")), &de)
	assert.Equal(t, 7*time.Second, de.RetryAfter)

	e := newEnv(t, t0)
	e.seed("r")
	e.fire(sink, t0)
	assert.Equal(t, t0.Add(7*time.Second), e.timerDue())
	assert.Equal(t, uint64(1), e.backlogRows())
}

// A server that never answers is cut by the delivery's sink timeout (in
// real time: the test bounds it generously and asserts what happened,
// not how long it took).
func TestWebhookServerThatNeverAnswersIsCutBySinkTimeout(t *testing.T) {
	cancelled := make(chan struct{})
	var once sync.Once
	rec := newRecorder(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			once.Do(func() { close(cancelled) })
		case <-time.After(time.Minute):
		}
	})
	e := newEnv(t, t0)
	e.seed("a", "b")
	d := delivery(t, webhook(t, rec.srv.URL, hmacKey(t, hmacSecret)), func(c *outcome.DeliveryConfig) {
		c.SinkTimeout = 50 * time.Millisecond
		c.Sleep = nil // real time
	})
	rep := e.fireWith(d, t0)
	assert.Equal(t, 1, rep.Fired)
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the hung request was never cancelled")
	}
	assert.Len(t, rec.requests(), 1, "the fire stopped at the hung call")
	assert.Equal(t, uint64(2), e.backlogRows())
	_, value, _, ok := e.timer()
	require.True(t, ok)
	tv, err := gen.DecodeOutcomeTimer(value)
	require.NoError(t, err)
	assert.Equal(t, uint32(1), tv.Attempt, "a hung call raises the attempt")
	assert.Contains(t, e.logs.String(), "outcome delivery timed out")
}

// countingBody counts what the sink reads of a response body.
type countingTransport struct {
	mu   sync.Mutex
	read int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	c *countingTransport
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.read += int64(n)
	b.c.mu.Unlock()
	return n, err
}

func TestWebhookLargeResponseIsNotReadWhole(t *testing.T) {
	const total = 50 << 20
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(total))
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client hung up
			}
		}
	})
	for _, limit := range []int64{0, 1024} {
		ct := &countingTransport{}
		sink := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) {
			c.Client = &http.Client{Transport: ct}
			c.MaxResponseBytes = limit
		})
		require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "big")))
		want := limit
		if want == 0 {
			want = outcome.DefaultMaxResponseBytes
		}
		ct.mu.Lock()
		assert.LessOrEqual(t, ct.read, want, "read %d bytes of %d", ct.read, total)
		ct.mu.Unlock()
	}
}

func TestWebhookErrorsAndFormattingHoldNoSecrets(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(body) // echoes the body: it must not reach the error
	})
	key := hmacKey(t, hmacSecret)
	o := sampleOutcome(t, "r")
	o.Result, o.Committed, o.Aborted = reservations.ResultAborted, nil, &reservations.Aborted{Reason: "internal", Detail: "top-secret-detail"}
	err := webhook(t, rec.srv.URL, key).Deliver(ctx, envelopeOf(t, o))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "top-secret-detail")
	assert.NotContains(t, err.Error(), string(hmacSecret))
	signer := edSigner(t, edPriv)
	for _, v := range []any{key, *key, signer} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d", "%q"} {
			s := fmt.Sprintf(verb, v)
			assert.NotContains(t, s, string(hmacSecret), verb)
			assert.NotContains(t, s, fmt.Sprintf("%x", hmacSecret), verb)
			assert.NotContains(t, s, fmt.Sprint([]byte(edPriv)), verb)
			assert.NotContains(t, s, fmt.Sprintf("%x", []byte(edPriv)), verb)
			assert.Contains(t, s, "redacted", verb)
		}
	}
}

func TestWebhookNetworkFailureIsADeliveryError(t *testing.T) {
	rec := newRecorder(t, func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	err := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret)).Deliver(ctx, sampleEnvelope(t, "r"))
	var de *outcome.DeliveryError
	require.ErrorAs(t, err, &de)
	assert.Contains(t, de.Reason, "webhook request failed")
	assert.NotContains(t, de.Reason, rec.srv.URL, "the reason is the failure, not the request")
}

// a_failing_remote_hook_keeps_the_row_and_each_retry_is_signed_afresh: a
// remote sink that cannot reach its hook leaves the row queued, and each
// retry is signed afresh (a new nonce and validity window).
func TestAFailingRemoteHookKeepsTheRowAndEachRetryIsSignedAfresh(t *testing.T) {
	rec := newRecorder(t, func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	e := newEnv(t, t0)
	e.seed("retry")
	// The sink shares the test clock, so a retry's window moves.
	sink := webhook(t, rec.srv.URL, hmacKey(t, hmacSecret), func(c *outcome.WebhookSinkConfig) { c.Clock = e.clock })
	assert.Equal(t, 1, e.fire(sink, t0).Fired)
	assert.Equal(t, uint64(1), e.backlogRows())
	due := e.timerDue()
	e.clock.Set(due)
	assert.Equal(t, 1, e.fire(sink, due).Fired)
	assert.Equal(t, uint64(1), e.backlogRows())

	seen := rec.requests()
	require.Len(t, seen, 2)
	assert.NotEqual(t, seen[0].header.Get(outcome.HeaderNonce), seen[1].header.Get(outcome.HeaderNonce))
	assert.NotEqual(t, seen[0].header.Get(outcome.HeaderCreatedAt), seen[1].header.Get(outcome.HeaderCreatedAt))
	assert.NotEqual(t, seen[0].header.Get(outcome.HeaderExpiresAt), seen[1].header.Get(outcome.HeaderExpiresAt))
	assert.Equal(t, seen[0].body, seen[1].body)
}

func TestNewWebhookSinkRejectsBadConfig(t *testing.T) {
	key := hmacKey(t, hmacSecret)
	for _, tc := range []struct {
		name string
		cfg  outcome.WebhookSinkConfig
	}{
		{"http to a remote host", outcome.WebhookSinkConfig{URL: "http://example.test/hook", Signer: key}},
		{"relative", outcome.WebhookSinkConfig{URL: "/hook", Signer: key}},
		{"other scheme", outcome.WebhookSinkConfig{URL: "ftp://example.test/hook", Signer: key}},
		{"user information", outcome.WebhookSinkConfig{URL: "https://user:pw@example.test/hook", Signer: key}},
		{"fragment", outcome.WebhookSinkConfig{URL: "https://example.test/hook#x", Signer: key}},
		{"no signer", outcome.WebhookSinkConfig{URL: "https://example.test/hook"}},
		{"negative validity", outcome.WebhookSinkConfig{URL: "https://example.test/hook", Signer: key, Validity: -time.Second}},
		{"validity over the bound", outcome.WebhookSinkConfig{URL: "https://example.test/hook", Signer: key, Validity: 2 * time.Hour}},
		{"negative response bound", outcome.WebhookSinkConfig{URL: "https://example.test/hook", Signer: key, MaxResponseBytes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := outcome.NewWebhookSink(tc.cfg)
			assert.ErrorIs(t, err, store.ErrInvalid)
			assert.NotContains(t, fmt.Sprint(err), "pw@")
		})
	}
	_, err := outcome.NewHMACKey([]byte("short"))
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = outcome.NewEd25519Signer(edPriv[:10])
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = outcome.NewEd25519Verifier(ed25519.PublicKey{1})
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = outcome.NewReceiver(outcome.ReceiverConfig{})
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{nil}})
	assert.ErrorIs(t, err, store.ErrInvalid)
	_, err = outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}, MaxNonces: -1})
	assert.ErrorIs(t, err, store.ErrInvalid)
	assert.False(t, errors.Is(err, outcome.ErrRejected))
}

func TestHandleAnswers(t *testing.T) {
	key := hmacKey(t, hmacSecret)
	recv, err := outcome.NewReceiver(outcome.ReceiverConfig{Verifiers: []outcome.Verifier{key}})
	require.NoError(t, err)
	fail := errors.New("the service's table is down")
	calls := 0
	srv := httptest.NewServer(recv.Wrap(outcome.Handle(func(_ contextT, env outcome.Envelope) error {
		calls++
		if env.ID == "down" {
			return fail
		}
		return nil
	})))
	defer srv.Close()
	sink := webhook(t, srv.URL, key)
	require.NoError(t, sink.Deliver(ctx, sampleEnvelope(t, "up")))
	var de *outcome.DeliveryError
	require.ErrorAs(t, sink.Deliver(ctx, sampleEnvelope(t, "down")), &de)
	assert.Contains(t, de.Reason, "503", "a failing handler asks the sender to retry")

	// A verified body that is not an outcome is a 400, without a call.
	rec := newRecorder(t, nil)
	require.NoError(t, webhook(t, rec.srv.URL, key).Deliver(ctx, sampleEnvelope(t, "x")))
	signed := rec.requests()[0]
	notOutcome := []byte(`{"version":1}`)
	raw := httptest.NewServer(recv.Wrap(outcome.Handle(func(contextT, outcome.Envelope) error { calls++; return nil })))
	defer raw.Close()
	h := signed.header.Clone()
	// Re-sign the other body with the same endpoint, nonce, window and
	// key, as the design note says the scheme signs.
	n, _ := strconv.ParseUint(h.Get(outcome.HeaderCreatedAt), 10, 64)
	x, _ := strconv.ParseUint(h.Get(outcome.HeaderExpiresAt), 10, 64)
	sig, err := key.Sign([]byte(fmt.Sprintf("mkit-hook-v2\n%s\n%s\n%d\n%d\n%s", h.Get(outcome.HeaderEndpoint), h.Get(outcome.HeaderNonce), n, x, notOutcome)))
	require.NoError(t, err)
	h.Set(outcome.HeaderSignature, "hmac-sha256="+base64.StdEncoding.EncodeToString(sig))
	assert.Equal(t, http.StatusBadRequest, post(t, raw.URL, h, notOutcome).StatusCode)
	assert.Equal(t, 2, calls)

	// Only POST is accepted.
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
