package outcome

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// Defaults and bounds of a WebhookSinkConfig.
const (
	// DefaultValidity is how long a signed request is valid.
	DefaultValidity = 5 * time.Minute
	// MaxValidity bounds a signed request's validity window, for senders
	// and receivers alike.
	MaxValidity = time.Hour
	// DefaultMaxResponseBytes bounds the response body a sink reads.
	DefaultMaxResponseBytes = 64 << 10
)

// WebhookSinkConfig configures a WebhookSink. URL and Signer are required; a
// zero field takes its default. It formats without keys: its signers do.
type WebhookSinkConfig struct {
	// URL is where outcomes are POSTed: https, or http for a loopback
	// host only; no user information or fragment. Errors and logs name
	// it without its query.
	URL string
	// Signer signs every attempt: HMACKey or Ed25519Signer (an HMAC key
	// under MinHMACKeyBytes, from ParseWebhookSecret, only with
	// StandardWebhooks).
	Signer Signer
	// ExtraSigners sign every attempt too, beside Signer, while keys
	// rotate: each request then carries one signature per key, and a
	// receiver holding any of them accepts it. At most MaxSignatures
	// signers in all.
	ExtraSigners []Signer
	// Endpoint names the recipient in what the library's scheme signs, so
	// that a receiver configured with its own (ReceiverConfig.Endpoint)
	// refuses a delivery meant for another (default: the URL's canonical
	// origin and path, without query). An http or https URL is taken in
	// that canonical form; anything else is an id of 1 to
	// MaxEndpointBytes of visible ASCII.
	Endpoint string
	// Client sends the requests (nil: a client of its own). It is copied
	// and never follows redirects: a signed request goes where configured
	// or nowhere.
	Client *http.Client
	// Clock stamps the signatures (nil: clock.Real).
	Clock clock.Clock
	// Validity is each signature's validity window (default
	// DefaultValidity, at most MaxValidity).
	Validity time.Duration
	// StandardWebhooks adds the Standard Webhooks headers (see
	// [HeaderWebhookSignature]), for receivers that verify those: a Receiver
	// configured with ReceiverConfig.StandardWebhooks, or any receiver of
	// that specification, holding the "whsec_" secret or the "whpk_"
	// public key (Ed25519Signer.WebhookPublicKey).
	StandardWebhooks bool
	// MaxResponseBytes bounds the response body read (default
	// DefaultMaxResponseBytes); the rest is not read.
	MaxResponseBytes int64
	// Rand is the source of nonces (nil: crypto/rand).
	Rand io.Reader
}

// WebhookSink is a Sink that POSTs each envelope's JSON form (Envelope.JSON)
// to a URL, every attempt signed afresh (see [HeaderSignature]). A 2xx
// answer delivers the outcome. 408, 429, 5xx and network failures are
// retryable, with the answer's Retry-After honoured as the DeliveryError's
// hint; other answers are a DeliveryError naming the status. Neither the
// body nor a key ever appears in an error, and a WebhookSink formats as
// "outcome.WebhookSink(redacted)" with every verb and in slog. A
// WebhookSink is safe for concurrent use.
type WebhookSink struct {
	redacted
	url      string
	endpoint string
	signers  []Signer
	client   *http.Client
	clock    clock.Clock
	validity time.Duration
	standard bool
	maxResp  int64
	rand     io.Reader
}

var _ Sink = (*WebhookSink)(nil)

// NewWebhookSink builds a WebhookSink. It fails with an error wrapping
// store.ErrInvalid for a URL that is not https (or http to a loopback
// host) or carries user information or a fragment, a nil signer, more
// than MaxSignatures signers, an HMAC key under MinHMACKeyBytes without
// StandardWebhooks, a signer of a scheme Standard Webhooks has no version
// for with it, an invalid Endpoint, or a negative or over-long Validity
// or a negative MaxResponseBytes.
func NewWebhookSink(c WebhookSinkConfig) (*WebhookSink, error) {
	u, err := parseHTTPURL("webhook URL", c.URL)
	if err != nil {
		return nil, err
	}
	signers := append([]Signer{c.Signer}, c.ExtraSigners...)
	if len(signers) > MaxSignatures {
		return nil, fmt.Errorf("outcome: webhook sink with %d signers, want at most %d: %w", len(signers), MaxSignatures, store.ErrInvalid)
	}
	for i, s := range signers {
		switch {
		case s == nil:
			return nil, fmt.Errorf("outcome: webhook sink signer %d (0 is Signer, then ExtraSigners) is nil: %w", i, store.ErrInvalid)
		case !c.StandardWebhooks && !signsLibraryScheme(s):
			return nil, fmt.Errorf("outcome: webhook sink signer %d: an HMAC key under %d bytes signs Standard Webhooks only: %w", i, MinHMACKeyBytes, store.ErrInvalid)
		case c.StandardWebhooks && standardVersion(s.Scheme()) == "":
			return nil, fmt.Errorf("outcome: webhook sink signer %d: scheme %q has no Standard Webhooks version: %w", i, s.Scheme(), store.ErrInvalid)
		}
	}
	switch {
	case c.Validity < 0 || c.Validity > MaxValidity:
		return nil, fmt.Errorf("outcome: WebhookSinkConfig.Validity %v is negative or over %v: %w", c.Validity, MaxValidity, store.ErrInvalid)
	case c.MaxResponseBytes < 0:
		return nil, fmt.Errorf("outcome: WebhookSinkConfig.MaxResponseBytes %d is negative: %w", c.MaxResponseBytes, store.ErrInvalid)
	}
	endpoint := endpointOf(u)
	if c.Endpoint != "" {
		if endpoint, err = parseEndpoint(c.Endpoint); err != nil {
			return nil, err
		}
	}
	w := &WebhookSink{redacted: redacted{"outcome.WebhookSink"}, url: u.String(), endpoint: endpoint, signers: signers,
		clock: c.Clock, validity: c.Validity, standard: c.StandardWebhooks, maxResp: c.MaxResponseBytes, rand: c.Rand}
	client := &http.Client{}
	if c.Client != nil {
		cp := *c.Client
		client = &cp
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w.client = client
	if w.clock == nil {
		w.clock = clock.Real{}
	}
	if w.validity == 0 {
		w.validity = DefaultValidity
	}
	if w.maxResp == 0 {
		w.maxResp = DefaultMaxResponseBytes
	}
	if w.rand == nil {
		w.rand = rand.Reader
	}
	return w, nil
}

// Deliver POSTs e's JSON form, signed afresh, and reads at most
// MaxResponseBytes of the answer. It returns nil for a 2xx answer, a
// *DeliveryError for any other answer or a failed request, and an error
// wrapping store.ErrInvalid for an envelope that breaks ParseEnvelope's
// rules.
func (w *WebhookSink) Deliver(ctx context.Context, e Envelope) error {
	body, err := e.JSON()
	if err != nil {
		return err
	}
	var raw [16]byte
	if _, err := io.ReadFull(w.rand, raw[:]); err != nil {
		return &DeliveryError{Reason: "no nonce: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return &DeliveryError{Reason: "build the webhook request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	injectTrace(ctx, req.Header)
	created := unixMs(w.clock.Now())
	a := attempt{endpoint: w.endpoint, nonce: hex.EncodeToString(raw[:]), createdMs: created, expiresMs: created + uint64(w.validity/time.Millisecond)}
	if w.standard {
		a.webhookID = e.ID
	}
	if err := sign(req.Header, w.signers, a, body); err != nil {
		return &DeliveryError{Reason: err.Error()}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		reason := "webhook request failed"
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			reason += ": " + ue.Unwrap().Error()
		}
		return &DeliveryError{Reason: reason}
	}
	defer resp.Body.Close()
	// The answer's body is not needed; reading a bounded part of it lets
	// a small answer's connection be reused, and a large one is cut.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, w.maxResp))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return &DeliveryError{Reason: fmt.Sprintf("webhook answered %s", resp.Status),
			RetryAfter: retryAfter(resp.Header.Get("Retry-After"), w.clock.Now())}
	default:
		return &DeliveryError{Reason: fmt.Sprintf("webhook answered %s: not retryable without a change at the receiver", resp.Status)}
	}
}

// retryAfter parses a Retry-After value, delay-seconds or an HTTP date,
// as a duration from now; 0 for none or nonsense.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
