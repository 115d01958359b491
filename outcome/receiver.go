package outcome

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/internal/tracing"
	"github.com/mkit-dev/mkitfdb/store"
)

// Defaults of a ReceiverConfig.
const (
	// DefaultMaxSkew is the clock difference tolerated between sender and
	// receiver, for the library's scheme.
	DefaultMaxSkew = time.Minute
	// DefaultTolerance is how far a Standard Webhooks timestamp may be
	// from the receiver's clock, either way: the specification's
	// libraries' 5 minutes.
	DefaultTolerance = 5 * time.Minute
	// DefaultMaxBodyBytes bounds a request body a Receiver reads.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultBodyTimeout bounds the time Wrap spends reading a request
	// body.
	DefaultBodyTimeout = 10 * time.Second
)

// maxWebhookTimestamp is the last second of year 9999: a later Standard
// Webhooks timestamp is malformed.
const maxWebhookTimestamp = 253402300799

// releaseTimeout bounds Wrap's release of a claim, which runs after the
// request's context may have ended.
const releaseTimeout = 10 * time.Second

// ReceiverConfig configures a Receiver. Verifiers or StandardWebhooks is
// required; a zero field takes its default. It formats without keys: its
// verifiers do.
type ReceiverConfig struct {
	// Verifiers are the keys a request of the library's own scheme may be
	// signed with (several while a key is rotated): HMACKey (at least
	// MinHMACKeyBytes) or Ed25519Verifier.
	Verifiers []Verifier
	// StandardWebhooks are the keys a Standard Webhooks request may be
	// signed with: HMACKey for "v1" signatures (ParseWebhookSecret reads
	// a "whsec_" secret of 24 bytes and more), Ed25519Verifier for "v1a"
	// ones (ParseWebhookPublicKey reads a "whpk_" key). A receiver with
	// these accepts requests of any sender of that specification.
	StandardWebhooks []Verifier
	// Endpoint, when set, is this receiver's own endpoint: a request of
	// the library's scheme is accepted only when signed for it (see
	// WebhookSinkConfig.Endpoint; an http or https URL is compared in its
	// canonical origin-and-path form). Set it where a key is shared with
	// other receivers. Standard Webhooks binds no endpoint: give each
	// endpoint a key of its own.
	Endpoint string
	// Nonces remembers the keys of accepted requests (nil: a
	// MemoryNonceStore of MaxNonces). Use a PartitionNonceStore when the
	// receiver runs as several replicas or must refuse replays across
	// restarts.
	Nonces NonceStore
	// Sender names the sender whose keys these are, 1 to MaxSenderBytes
	// of visible ASCII: the keys a request claims in Nonces are the
	// sender's, so that receivers of several senders share a store
	// without refusing each other's message ids. It is required with
	// Nonces, which other receivers may share; replicas of one receiver,
	// and the receiver across a rotation of the sender's keys, keep the
	// same name, so a request verified under a new key is a replay of
	// the same request verified under the old one.
	Sender string
	// Clock checks validity windows (nil: clock.Real).
	Clock clock.Clock
	// MaxSkew is the clock difference tolerated at both ends of a window
	// of the library's scheme (default DefaultMaxSkew).
	MaxSkew time.Duration
	// MaxValidity bounds the window a request of the library's scheme may
	// claim (default MaxValidity).
	MaxValidity time.Duration
	// Tolerance is how far a Standard Webhooks timestamp may be from the
	// receiver's clock, either way (default DefaultTolerance, at most
	// MaxValidity).
	Tolerance time.Duration
	// MaxBodyBytes bounds the body read (default DefaultMaxBodyBytes); a
	// larger one is refused with 413. Handle, behind Wrap, takes what
	// this allows.
	MaxBodyBytes int64
	// BodyTimeout bounds the time Wrap spends reading a request's body,
	// from the handler's start (default DefaultBodyTimeout, or the
	// server's ReadTimeout when shorter): a body not read by then is
	// answered 408 and its connection closed, without a call of the
	// handler. The server's ReadHeaderTimeout bounds the headers, which
	// come first.
	BodyTimeout time.Duration
	// MaxNonces bounds the default MemoryNonceStore (default
	// DefaultMaxNonces): while it is full of unexpired keys, requests are
	// refused with 503 and Retry-After, never accepted unchecked. It is
	// an error beside Nonces.
	MaxNonces int
	// Logger logs refusals, without bodies or signatures (nil:
	// slog.Default()).
	Logger *slog.Logger
	// TracerProvider traces the handler Wrap calls for each verified
	// request: a span continuing the sender's trace, from the request's
	// traceparent and tracestate headers, in the handler's context (see
	// Wrap). Nil means otel.GetTracerProvider() at each request: while no
	// SDK is installed there, nothing is recorded or allocated.
	TracerProvider trace.TracerProvider
}

// Receiver verifies signed hook requests, of the library's scheme or of
// Standard Webhooks (see [HeaderSignature] for what each signs, and the
// package doc for what it accepts once): the
// signature, under any of its keys; the validity window; the endpoint
// signed, when configured; and that the request's key was not accepted
// before. Wrap makes it an http.Handler middleware, and Handle turns
// verified requests into Envelopes, so a service receiving outcomes
// writes only its handler. A Receiver formats as
// "outcome.Receiver(redacted)" with every verb and in slog, and is safe
// for concurrent use.
type Receiver struct {
	redacted
	verifiers   []Verifier
	standard    []Verifier
	endpoint    string
	sender      string
	clock       clock.Clock
	skewMs      uint64
	validityMs  uint64
	toleranceMs uint64
	maxBody     int64
	bodyTimeout time.Duration
	log         *slog.Logger
	nonces      NonceStore
	tracer      tracing.Tracer
}

// NewReceiver builds a Receiver. It fails with an error wrapping
// store.ErrInvalid for no key or a nil one, an HMAC key under
// MinHMACKeyBytes among Verifiers, a StandardWebhooks key of another
// scheme than HMAC-SHA256 or Ed25519, an invalid Endpoint, a negative
// bound, a Tolerance over MaxValidity, MaxNonces beside Nonces, or Nonces
// without a Sender or a Sender that is not 1 to MaxSenderBytes of visible
// ASCII.
func NewReceiver(c ReceiverConfig) (*Receiver, error) {
	if len(c.Verifiers) == 0 && len(c.StandardWebhooks) == 0 {
		return nil, fmt.Errorf("outcome: receiver without a verifier: %w", store.ErrInvalid)
	}
	for i, v := range c.Verifiers {
		switch {
		case v == nil:
			return nil, fmt.Errorf("outcome: receiver verifier %d is nil: %w", i, store.ErrInvalid)
		case !signsLibraryScheme(v):
			return nil, fmt.Errorf("outcome: receiver verifier %d: an HMAC key under %d bytes verifies Standard Webhooks only: %w", i, MinHMACKeyBytes, store.ErrInvalid)
		}
	}
	for i, v := range c.StandardWebhooks {
		switch {
		case v == nil:
			return nil, fmt.Errorf("outcome: receiver Standard Webhooks key %d is nil: %w", i, store.ErrInvalid)
		case standardVersion(v.Scheme()) == "":
			return nil, fmt.Errorf("outcome: receiver Standard Webhooks key %d: scheme %q has no Standard Webhooks version: %w", i, v.Scheme(), store.ErrInvalid)
		}
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"MaxSkew is negative", c.MaxSkew < 0},
		{"MaxValidity is negative", c.MaxValidity < 0},
		{"Tolerance is negative", c.Tolerance < 0},
		{"Tolerance is over MaxValidity (" + MaxValidity.String() + ")", c.Tolerance > MaxValidity},
		{"MaxBodyBytes is negative", c.MaxBodyBytes < 0},
		{"MaxNonces is negative", c.MaxNonces < 0},
		{"BodyTimeout is negative", c.BodyTimeout < 0},
		{"MaxNonces is set beside Nonces (it bounds the default store)", c.Nonces != nil && c.MaxNonces != 0},
	} {
		if f.bad {
			return nil, fmt.Errorf("outcome: ReceiverConfig.%s: %w", f.name, store.ErrInvalid)
		}
	}
	switch {
	case c.Nonces != nil && c.Sender == "":
		return nil, fmt.Errorf("outcome: receiver with Nonces, which others may share, and no Sender: %w", store.ErrInvalid)
	case c.Sender != "" && !visibleASCII(c.Sender, MaxSenderBytes):
		return nil, fmt.Errorf("outcome: receiver Sender of %d bytes, want 1 to %d of visible ASCII: %w", len(c.Sender), MaxSenderBytes, store.ErrInvalid)
	}
	r := &Receiver{redacted: redacted{"outcome.Receiver"}, verifiers: append([]Verifier(nil), c.Verifiers...),
		standard: append([]Verifier(nil), c.StandardWebhooks...), sender: c.Sender, clock: c.Clock, maxBody: c.MaxBodyBytes,
		bodyTimeout: c.BodyTimeout, log: c.Logger, nonces: c.Nonces, tracer: tracing.New(c.TracerProvider, tracing.Scope+"outcome")}
	if c.Endpoint != "" {
		var err error
		if r.endpoint, err = parseEndpoint(c.Endpoint); err != nil {
			return nil, err
		}
	}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = DefaultMaxSkew
	}
	if c.MaxValidity == 0 {
		c.MaxValidity = MaxValidity
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	r.skewMs, r.validityMs = uint64(c.MaxSkew/time.Millisecond), uint64(c.MaxValidity/time.Millisecond)
	r.toleranceMs = uint64(c.Tolerance / time.Millisecond)
	if r.maxBody == 0 {
		r.maxBody = DefaultMaxBodyBytes
	}
	if r.bodyTimeout == 0 {
		r.bodyTimeout = DefaultBodyTimeout
	}
	if r.nonces == nil {
		r.nonces = NewMemoryNonceStore(MemoryNonceStoreConfig{MaxNonces: c.MaxNonces})
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// errTooLarge is a body over MaxBodyBytes.
var errTooLarge = fmt.Errorf("%w: body too large", ErrRejected)

// Verified is a request a Receiver accepted.
type Verified struct {
	// Body is the verified body.
	Body []byte
	// Standard reports whether it was verified under Standard Webhooks,
	// rather than the library's scheme.
	Standard bool
	// ID names it: its Standard Webhooks message id, or its nonce.
	ID     string
	claim  NonceClaim
	nonces NonceStore
}

// Release forgets a Standard Webhooks request's keys (its message id and,
// on a receiver of both schemes, its attempt's), so that the sender's
// retry of the message is accepted: call it when the request was
// not processed (Wrap does, for an answer other than 2xx). It does nothing
// for the library's scheme, whose nonce names this attempt only. It fails
// as the NonceStore's Release does.
func (v *Verified) Release(ctx context.Context) error {
	if !v.Standard {
		return nil
	}
	return v.nonces.Release(ctx, v.claim)
}

// request is what a request's headers say, under one scheme.
type request struct {
	standard  bool
	id        string // the nonce or message id
	sigs      []signature
	untilMs   uint64 // the end of the window
	window    func(nowMs uint64) error
	message   func(body []byte) []byte
	verifiers []Verifier
	// second is the attempt's time in Unix seconds, the one both schemes
	// sign, and attemptUntilMs the end of the last window in which either
	// scheme may accept the attempt: what a receiver of both holds its
	// attempt key until.
	second, attemptUntilMs uint64
}

// Key prefixes of the keys a request claims.
const (
	nonceKeyPrefix   = "nonce:"
	messageKeyPrefix = "webhook-id:"
	attemptKeyPrefix = "attempt:"
)

// Verify reads and verifies req. It fails with an error wrapping
// ErrRejected for a method other than POST, no signature header this
// receiver verifies, a missing or malformed header, more than
// MaxSignatures signatures, a request outside its window (at the time
// its body was read), a body over MaxBodyBytes, an endpoint other than
// the receiver's, a signature no key verifies, or a key accepted before
// (ErrReplayed); with ErrBusy when the NonceStore cannot tell (full, or
// its store failing); and with the body's read error. Only a verified
// request's keys are claimed, so unsigned requests cannot fill the store.
// Verify reads req's body and does not close it; it sets no time bound
// on the read, which Wrap does (BodyTimeout).
func (r *Receiver) Verify(req *http.Request) (*Verified, error) {
	if req.Method != http.MethodPost {
		return nil, fmt.Errorf("%w: method %s", ErrRejected, req.Method)
	}
	var (
		q   request
		err error
	)
	switch {
	case req.Header.Get(HeaderSignature) != "" && len(r.verifiers) > 0:
		q, err = r.libraryRequest(req.Header)
	case req.Header.Get(HeaderWebhookSignature) != "" && len(r.standard) > 0:
		q, err = r.standardRequest(req.Header)
	default:
		err = fmt.Errorf("%w: no %s or %s this receiver verifies", ErrRejected, HeaderSignature, HeaderWebhookSignature)
	}
	if err != nil {
		return nil, err
	}
	// A request already outside its window is refused before its body is
	// read; the check that counts is the one after.
	if err := q.window(unixMs(r.clock.Now())); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, r.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("outcome: read the hook request body: %w", err)
	}
	if int64(len(body)) > r.maxBody {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, r.maxBody)
	}
	nowMs := unixMs(r.clock.Now())
	if err := q.window(nowMs); err != nil {
		return nil, err
	}
	msg := q.message(body)
	verified := false
	for _, s := range q.sigs {
		for _, v := range q.verifiers {
			if sigScheme(q.standard, v) == s.scheme && v.Verify(msg, s.sig) {
				verified = true
				break
			}
		}
	}
	if !verified {
		return nil, fmt.Errorf("%w: no signature verifies", ErrRejected)
	}
	keys := make([]NonceKey, 1, 2)
	keys[0] = NonceKey{Key: nonceKeyPrefix + q.id, Until: time.UnixMilli(int64(q.untilMs))}
	if q.standard {
		keys[0].Key = messageKeyPrefix + q.id
	}
	if len(r.verifiers) > 0 && len(r.standard) > 0 {
		// The attempt may arrive again under the other scheme.
		keys = append(keys, NonceKey{Key: attemptKey(q.second, body), Until: time.UnixMilli(int64(q.attemptUntilMs))})
	}
	claim, err := r.nonces.Claim(req.Context(), r.sender, keys, time.UnixMilli(int64(nowMs)))
	switch {
	case errors.Is(err, ErrRejected) || errors.Is(err, ErrBusy):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: nonce store: %w", ErrBusy, err)
	}
	return &Verified{Body: body, Standard: q.standard, ID: q.id, claim: claim, nonces: r.nonces}, nil
}

// attemptKey names one attempt whichever scheme it arrives under: by
// what both schemes sign of it, its second and its body (the envelope,
// which names the message).
func attemptKey(second uint64, body []byte) string {
	sum := sha256.Sum256(body)
	k := make([]byte, 0, len(attemptKeyPrefix)+20+1+base64.RawURLEncoding.EncodedLen(len(sum)))
	k = append(k, attemptKeyPrefix...)
	k = strconv.AppendUint(k, second, 10)
	k = append(k, ':')
	return string(base64.RawURLEncoding.AppendEncode(k, sum[:]))
}

// sigScheme is the name a signature checked by v carries: its scheme, or
// its Standard Webhooks version.
func sigScheme(standard bool, v Verifier) string {
	if standard {
		return standardVersion(v.Scheme())
	}
	return v.Scheme()
}

// libraryRequest reads the library's scheme's headers.
func (r *Receiver) libraryRequest(h http.Header) (request, error) {
	nonce := h.Get(HeaderNonce)
	if !validNonce(nonce) {
		return request{}, fmt.Errorf("%w: missing or malformed %s", ErrRejected, HeaderNonce)
	}
	endpoint := h.Get(HeaderEndpoint)
	if !visibleASCII(endpoint, MaxEndpointBytes) {
		return request{}, fmt.Errorf("%w: missing or malformed %s", ErrRejected, HeaderEndpoint)
	}
	if r.endpoint != "" && endpoint != r.endpoint {
		return request{}, fmt.Errorf("%w: signed for another endpoint", ErrRejected)
	}
	created, err1 := strconv.ParseUint(h.Get(HeaderCreatedAt), 10, 64)
	expires, err2 := strconv.ParseUint(h.Get(HeaderExpiresAt), 10, 64)
	if err1 != nil || err2 != nil {
		return request{}, fmt.Errorf("%w: missing or malformed %s or %s", ErrRejected, HeaderCreatedAt, HeaderExpiresAt)
	}
	sigs, ok := parseSignatures(h.Get(HeaderSignature), "=")
	if !ok {
		return request{}, fmt.Errorf("%w: malformed %s, or over %d signatures", ErrRejected, HeaderSignature, MaxSignatures)
	}
	if expires <= created || expires-created > r.validityMs {
		return request{}, fmt.Errorf("%w: validity window of %d ms, want 1 to %d", ErrRejected, int64(expires-created), r.validityMs)
	}
	until := addSat(expires, r.skewMs)
	// The same attempt as Standard Webhooks carries created-at's second,
	// accepted until that second plus Tolerance.
	second := created / 1000
	return request{
		id: nonce, sigs: sigs, verifiers: r.verifiers, untilMs: until,
		second: second, attemptUntilMs: max(until, addSat(second*1000, r.toleranceMs)),
		window: func(now uint64) error {
			switch {
			case created > addSat(now, r.skewMs):
				return fmt.Errorf("%w: created %d ms in the future", ErrRejected, created-now)
			case now > until:
				return fmt.Errorf("%w: expired %d ms ago", ErrRejected, now-expires)
			}
			return nil
		},
		message: func(body []byte) []byte { return signedMessage(endpoint, nonce, created, expires, body) },
	}, nil
}

// standardRequest reads the Standard Webhooks headers.
func (r *Receiver) standardRequest(h http.Header) (request, error) {
	id := h.Get(HeaderWebhookID)
	if !visibleASCII(id, MaxEnvelopeIDBytes) {
		return request{}, fmt.Errorf("%w: missing or malformed %s", ErrRejected, HeaderWebhookID)
	}
	ts, err := strconv.ParseInt(h.Get(HeaderWebhookTimestamp), 10, 64)
	if err != nil || ts < 0 || ts > maxWebhookTimestamp {
		return request{}, fmt.Errorf("%w: missing or malformed %s", ErrRejected, HeaderWebhookTimestamp)
	}
	sigs, ok := parseSignatures(h.Get(HeaderWebhookSignature), ",")
	if !ok {
		return request{}, fmt.Errorf("%w: malformed %s, or over %d signatures", ErrRejected, HeaderWebhookSignature, MaxSignatures)
	}
	atMs := uint64(ts) * 1000
	// The same attempt under the library's scheme was created within
	// that second, and is accepted until at most MaxValidity and MaxSkew
	// after.
	return request{
		standard: true, id: id, sigs: sigs, verifiers: r.standard, untilMs: atMs + r.toleranceMs,
		second: uint64(ts), attemptUntilMs: max(atMs+r.toleranceMs, atMs+999+r.validityMs+r.skewMs),
		window: func(now uint64) error {
			switch {
			case atMs > addSat(now, r.toleranceMs):
				return fmt.Errorf("%w: timestamp %d ms in the future", ErrRejected, atMs-now)
			case now > atMs+r.toleranceMs:
				return fmt.Errorf("%w: timestamp %d ms old, over the tolerance", ErrRejected, now-atMs)
			}
			return nil
		},
		message: func(body []byte) []byte { return standardContent(id, ts, body) },
	}, nil
}

// verifiedKey keys the *Verified of a request Wrap passes on.
type verifiedKey struct{}

// Wrap returns a handler that verifies each request and passes only
// verified ones to next, with the verified body (and, in the request's
// context, what Handle reads it from). It answers 401 to a rejected
// request, 413 to a body too large, 408 to a body not read within
// BodyTimeout (closing the connection), 503 with Retry-After to a request
// it cannot check now, and 400 to a body it cannot read otherwise; next is
// not called then. It bounds the body's read with the connection's read
// deadline (http.ResponseController), lifted once the body is read, so
// next's context and time are its own; behind a ResponseWriter that
// cannot set one, only the server's ReadTimeout bounds it. When next
// answers a Standard Webhooks request with anything but 2xx, or panics,
// Wrap releases its keys (Verified.Release) so that the sender's retry is
// accepted; a failed release is logged, and the keys are then held until
// their window ends.
//
// With a tracer that records (ReceiverConfig.TracerProvider), next runs in
// a span, mkitfdb.outcome.receive, of kind server, that continues the
// trace the request's W3C traceparent and tracestate headers name (a
// WebhookSink sends its delivery's span there), with the request's id,
// its scheme and the status next answered; a 5xx answer or a panic is an
// error. The span is in next's context, for next's own spans. Only a
// verified request gets one.
func (r *Receiver) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d := r.bodyTimeout
		if srv, ok := req.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 {
			d = min(d, srv.ReadTimeout) // the deadline set replaces the server's
		}
		rc := http.NewResponseController(w)
		bounded := rc.SetReadDeadline(time.Now().Add(d)) == nil
		v, err := r.Verify(req)
		if err != nil {
			// The deadline stays: whatever of the body the server reads
			// after the answer is bounded by it too.
			status := http.StatusBadRequest
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				status = http.StatusRequestTimeout
				w.Header().Set("Connection", "close")
			case errors.Is(err, ErrBusy):
				status = http.StatusServiceUnavailable
				w.Header().Set("Retry-After", "1")
			case errors.Is(err, errTooLarge):
				status = http.StatusRequestEntityTooLarge
			case errors.Is(err, ErrRejected):
				status = http.StatusUnauthorized
			}
			r.log.Info("outcome: hook request refused", "status", status, "reason", err.Error(), "remote", req.RemoteAddr)
			http.Error(w, http.StatusText(status), status)
			return
		}
		if bounded {
			// The body is read to its end: lift the deadline, which would
			// otherwise end the connection's background read, and with it
			// next's context, while next runs.
			_ = rc.SetReadDeadline(time.Time{})
		}
		ctx := context.WithValue(req.Context(), verifiedKey{}, v)
		var span trace.Span
		if tr, ok := r.tracer.Active(); ok {
			ctx, span = startReceive(ctx, tr, req.Header, v)
		}
		req = req.WithContext(ctx)
		req.Body = io.NopCloser(bytes.NewReader(v.Body))
		req.ContentLength = int64(len(v.Body))
		if !v.Standard && span == nil {
			next.ServeHTTP(w, req)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		returned := false
		defer func() {
			if span != nil {
				endReceive(span, sw.status(), returned)
			}
			if !v.Standard || returned && sw.status()/100 == 2 {
				return
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), releaseTimeout)
			defer cancel()
			if err := v.Release(ctx); err != nil {
				r.log.Warn("outcome: release of a webhook id failed; its retries are refused until its window ends", "err", err.Error())
			}
		}()
		next.ServeHTTP(sw, req)
		returned = true
	})
}

// statusWriter records the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's own methods.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// Handle returns a handler that parses each request body as an Envelope
// (ParseEnvelope) and calls fn: 204 when fn returns nil, 503 when it fails
// (the sender retries), 400 for a body that is not an envelope. Serve it
// behind Wrap, which verifies: it then takes the body Wrap verified,
// whatever size the Receiver's MaxBodyBytes allowed; served alone, it
// verifies nothing and reads at most DefaultMaxBodyBytes. fn
// deduplicates by Envelope.ID.
func Handle(fn func(ctx context.Context, e Envelope) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body []byte
		if v, ok := req.Context().Value(verifiedKey{}).(*Verified); ok {
			body = v.Body
		} else {
			b, err := io.ReadAll(io.LimitReader(req.Body, DefaultMaxBodyBytes+1))
			if err != nil || len(b) > DefaultMaxBodyBytes {
				http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
				return
			}
			body = b
		}
		e, err := ParseEnvelope(body)
		if err != nil {
			http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
			return
		}
		if err := fn(req.Context(), e); err != nil {
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// validNonce reports whether s is a plausible nonce: 16 to 128 characters
// of the base64url alphabet (a sender's hex nonces among them).
func validNonce(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}
