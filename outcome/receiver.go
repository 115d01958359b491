package outcome

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mkit-dev/mkitfdb/clock"
	"github.com/mkit-dev/mkitfdb/store"
)

// Defaults of a ReceiverConfig.
const (
	// DefaultMaxSkew is the clock difference tolerated between sender and
	// receiver.
	DefaultMaxSkew = time.Minute
	// DefaultMaxBodyBytes bounds a request body a Receiver reads.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxNonces bounds the nonces a Receiver remembers.
	DefaultMaxNonces = 100_000
)

// ReceiverConfig configures a Receiver. Verifiers is required; a zero
// field takes its default.
type ReceiverConfig struct {
	// Verifiers are the keys a request may be signed with (several while
	// a key is rotated): HMACKey or Ed25519Verifier.
	Verifiers []Verifier
	// Clock checks validity windows (nil: clock.Real).
	Clock clock.Clock
	// MaxSkew is the clock difference tolerated at both ends of a window
	// (default DefaultMaxSkew).
	MaxSkew time.Duration
	// MaxValidity bounds the window a request may claim (default
	// MaxValidity).
	MaxValidity time.Duration
	// MaxBodyBytes bounds the body read (default DefaultMaxBodyBytes); a
	// larger one is refused with 413.
	MaxBodyBytes int64
	// MaxNonces bounds the nonces remembered (default DefaultMaxNonces).
	// A nonce is remembered until its window (and MaxSkew) ends; while
	// the store is full of unexpired nonces, requests are refused with 503
	// and Retry-After, never accepted unchecked.
	MaxNonces int
	// Logger logs refusals, without bodies or signatures (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// Receiver verifies signed hook requests (see sign.go's design note): the
// signature, under any of its Verifiers; the validity window; and that
// the nonce was not seen before. Wrap makes it an http.Handler middleware,
// and Handle turns verified requests into Envelopes, so a service
// receiving outcomes writes only its handler. A Receiver is safe for
// concurrent use.
type Receiver struct {
	verifiers  []Verifier
	clock      clock.Clock
	skewMs     uint64
	validityMs uint64
	maxBody    int64
	log        *slog.Logger
	nonces     nonceStore
}

// NewReceiver builds a Receiver. It fails with an error wrapping
// store.ErrInvalid for no verifier or a nil one, or a negative bound.
func NewReceiver(c ReceiverConfig) (*Receiver, error) {
	if len(c.Verifiers) == 0 {
		return nil, fmt.Errorf("outcome: receiver without a verifier: %w", store.ErrInvalid)
	}
	for i, v := range c.Verifiers {
		if v == nil {
			return nil, fmt.Errorf("outcome: receiver verifier %d is nil: %w", i, store.ErrInvalid)
		}
	}
	if c.MaxSkew < 0 || c.MaxValidity < 0 || c.MaxBodyBytes < 0 || c.MaxNonces < 0 {
		return nil, fmt.Errorf("outcome: negative receiver bound: %w", store.ErrInvalid)
	}
	r := &Receiver{verifiers: append([]Verifier(nil), c.Verifiers...), clock: c.Clock, maxBody: c.MaxBodyBytes, log: c.Logger}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = DefaultMaxSkew
	}
	if c.MaxValidity == 0 {
		c.MaxValidity = MaxValidity
	}
	r.skewMs, r.validityMs = uint64(c.MaxSkew/time.Millisecond), uint64(c.MaxValidity/time.Millisecond)
	if r.maxBody == 0 {
		r.maxBody = DefaultMaxBodyBytes
	}
	if c.MaxNonces == 0 {
		c.MaxNonces = DefaultMaxNonces
	}
	r.nonces.max = c.MaxNonces
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// errTooLarge is a body over MaxBodyBytes.
var errTooLarge = fmt.Errorf("%w: body too large", ErrRejected)

// Verify reads and verifies req, and returns its body. It fails with an
// error wrapping ErrRejected for a method other than POST, a missing or
// malformed header, a request outside its window (or claiming one longer
// than MaxValidity), a body over MaxBodyBytes, a signature no verifier
// accepts, or a nonce seen before; with ErrBusy when the nonce store is
// full; and with the body's read error. Only a verified request's nonce
// is remembered, so unsigned requests cannot fill the store.
func (r *Receiver) Verify(req *http.Request) ([]byte, error) {
	if req.Method != http.MethodPost {
		return nil, fmt.Errorf("%w: method %s", ErrRejected, req.Method)
	}
	nonce := req.Header.Get(HeaderNonce)
	if !validNonce(nonce) {
		return nil, fmt.Errorf("%w: missing or malformed %s", ErrRejected, HeaderNonce)
	}
	created, err1 := strconv.ParseUint(req.Header.Get(HeaderCreatedAt), 10, 64)
	expires, err2 := strconv.ParseUint(req.Header.Get(HeaderExpiresAt), 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: missing or malformed %s or %s", ErrRejected, HeaderCreatedAt, HeaderExpiresAt)
	}
	scheme, sig, ok := parseSignature(req.Header.Get(HeaderSignature))
	if !ok {
		return nil, fmt.Errorf("%w: missing or malformed %s", ErrRejected, HeaderSignature)
	}
	now := clock.NowMs(r.clock)
	switch {
	case expires <= created || expires-created > r.validityMs:
		return nil, fmt.Errorf("%w: validity window of %d ms, want 1 to %d", ErrRejected, int64(expires-created), r.validityMs)
	case created > addSat(now, r.skewMs):
		return nil, fmt.Errorf("%w: created %d ms in the future", ErrRejected, created-now)
	case now > addSat(expires, r.skewMs):
		return nil, fmt.Errorf("%w: expired %d ms ago", ErrRejected, now-expires)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, r.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("outcome: read the hook request body: %w", err)
	}
	if int64(len(body)) > r.maxBody {
		return nil, fmt.Errorf("%w: over %d bytes", errTooLarge, r.maxBody)
	}
	msg := signedMessage(nonce, created, expires, body)
	verified := false
	for _, v := range r.verifiers {
		if v.Scheme() == scheme && v.Verify(msg, sig) {
			verified = true
			break
		}
	}
	if !verified {
		return nil, fmt.Errorf("%w: the %s signature does not verify", ErrRejected, scheme)
	}
	if err := r.nonces.add(nonce, addSat(expires, r.skewMs), now); err != nil {
		return nil, err
	}
	return body, nil
}

// Wrap returns a handler that verifies each request and passes only
// verified ones to next, with the verified body. It answers 401 to a
// rejected request, 413 to a body too large, 503 with Retry-After to a
// request it cannot check now, and 400 to a body it cannot read; next is
// not called then.
func (r *Receiver) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := r.Verify(req)
		if err != nil {
			status := http.StatusBadRequest
			switch {
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
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		next.ServeHTTP(w, req)
	})
}

// Handle returns a handler that parses each request body as an Envelope
// (ParseEnvelope) and calls fn: 204 when fn returns nil, 503 when it fails
// (the sender retries), 400 for a body that is not an envelope. Serve it
// behind Wrap: it verifies nothing. fn deduplicates by Envelope.ID.
func Handle(fn func(ctx context.Context, e Envelope) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, DefaultMaxBodyBytes+1))
		if err != nil || len(body) > DefaultMaxBodyBytes {
			http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
			return
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

// nonceStore remembers nonces until they expire, at most max at a time.
type nonceStore struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
	exp  nonceHeap
}

// add records nonce until untilMs. It fails with ErrRejected for a nonce
// already recorded and with ErrBusy when max unexpired nonces are.
func (s *nonceStore) add(nonce string, untilMs, nowMs uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.exp) > 0 && s.exp[0].untilMs < nowMs {
		delete(s.seen, heap.Pop(&s.exp).(nonceExpiry).nonce)
	}
	if _, dup := s.seen[nonce]; dup {
		return fmt.Errorf("%w: nonce replayed", ErrRejected)
	}
	if len(s.seen) >= s.max {
		return fmt.Errorf("%w: %d unexpired nonces remembered", ErrBusy, len(s.seen))
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	s.seen[nonce] = struct{}{}
	heap.Push(&s.exp, nonceExpiry{nonce: nonce, untilMs: untilMs})
	return nil
}

type nonceExpiry struct {
	nonce   string
	untilMs uint64
}

// nonceHeap orders nonces by expiry (container/heap).
type nonceHeap []nonceExpiry

func (h nonceHeap) Len() int           { return len(h) }
func (h nonceHeap) Less(i, j int) bool { return h[i].untilMs < h[j].untilMs }
func (h nonceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nonceHeap) Push(x any)        { *h = append(*h, x.(nonceExpiry)) }
func (h *nonceHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
