package outcome

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/mkit-dev/mkitfdb/store"
)

// Design note: what a hook request signs.
//
// Every attempt is signed afresh: a new random nonce, the time it was
// made (created-at) and the end of its validity window (expires-at), in
// Unix milliseconds, and the signature of
//
//	"mkit-hook-v1\n" nonce "\n" created-at "\n" expires-at "\n" body
//
// in the headers HeaderNonce, HeaderCreatedAt, HeaderExpiresAt and
// HeaderSignature ("<scheme>=<base64 signature>"). A Receiver accepts a
// request only inside its window and only once per nonce, so a captured
// request cannot be replayed, and a retry is a new request, not a replay.
// The body names the delivering service (Outcome.Audience); the URL is not
// signed, so that proxies may rewrite it.
//
// With HMAC-SHA256 the receiver holds the sender's secret; with Ed25519 it
// holds only the public key, so a receiver that is compromised cannot
// sign. The Standard Webhooks headers (HeaderWebhookID,
// HeaderWebhookTimestamp, HeaderWebhookSignature), optional, carry the
// same body signed as that specification says: "v1,<base64 HMAC-SHA256>"
// or "v1a,<base64 Ed25519>" of id "." timestamp "." body; the id is
// stable per outcome (it names the message, which retries resend).

// Headers of a signed hook request.
const (
	HeaderNonce     = "X-Mkit-Hook-Nonce"
	HeaderCreatedAt = "X-Mkit-Hook-Created-At"
	HeaderExpiresAt = "X-Mkit-Hook-Expires-At"
	HeaderSignature = "X-Mkit-Hook-Signature"

	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// The signature schemes.
const (
	SchemeHMACSHA256 = "hmac-sha256"
	SchemeEd25519    = "ed25519"
)

// MinHMACKeyBytes is the shortest HMAC key accepted: SHA-256's size.
const MinHMACKeyBytes = 32

// Signer signs hook requests. Implementations are safe for concurrent
// use and never put key material in errors or in their formatting.
type Signer interface {
	// Scheme is SchemeHMACSHA256 or SchemeEd25519.
	Scheme() string
	// Sign returns msg's signature.
	Sign(msg []byte) ([]byte, error)
}

// Verifier checks hook request signatures; safe for concurrent use.
type Verifier interface {
	// Scheme is the scheme of the signatures it checks.
	Scheme() string
	// Verify reports whether sig is msg's signature, in constant time
	// for a given length.
	Verify(msg, sig []byte) bool
}

// redacted formats a key holder without its key, for every verb and in
// slog.
type redacted struct{ name string }

func (r redacted) String() string                { return r.name + "(redacted)" }
func (r redacted) GoString() string              { return r.String() }
func (r redacted) LogValue() slog.Value          { return slog.StringValue(r.String()) }
func (r redacted) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, r.String()) }
func (r redacted) MarshalText() ([]byte, error)  { return []byte(r.String()), nil }

// HMACKey signs and verifies with HMAC-SHA256 under a shared secret. It
// formats as "outcome.HMACKey(redacted)" with any verb.
type HMACKey struct {
	redacted
	key []byte
}

// NewHMACKey returns the key; key is copied. It fails with an error
// wrapping store.ErrInvalid for a key shorter than MinHMACKeyBytes.
func NewHMACKey(key []byte) (*HMACKey, error) {
	if len(key) < MinHMACKeyBytes {
		return nil, fmt.Errorf("outcome: HMAC key of %d bytes, want at least %d: %w", len(key), MinHMACKeyBytes, store.ErrInvalid)
	}
	return &HMACKey{redacted: redacted{"outcome.HMACKey"}, key: append([]byte(nil), key...)}, nil
}

// Scheme returns SchemeHMACSHA256.
func (*HMACKey) Scheme() string { return SchemeHMACSHA256 }

// Sign returns msg's HMAC-SHA256.
func (k *HMACKey) Sign(msg []byte) ([]byte, error) {
	m := hmac.New(sha256.New, k.key)
	m.Write(msg)
	return m.Sum(nil), nil
}

// Verify reports whether sig is msg's HMAC-SHA256.
func (k *HMACKey) Verify(msg, sig []byte) bool {
	want, _ := k.Sign(msg)
	return hmac.Equal(want, sig)
}

// Ed25519Signer signs with an Ed25519 private key; it formats as
// "outcome.Ed25519Signer(redacted)" with any verb.
type Ed25519Signer struct {
	redacted
	priv ed25519.PrivateKey
}

// NewEd25519Signer returns the signer; priv is copied. It fails with an
// error wrapping store.ErrInvalid for a key of the wrong size.
func NewEd25519Signer(priv ed25519.PrivateKey) (*Ed25519Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("outcome: Ed25519 private key of %d bytes, want %d: %w", len(priv), ed25519.PrivateKeySize, store.ErrInvalid)
	}
	return &Ed25519Signer{redacted: redacted{"outcome.Ed25519Signer"}, priv: append(ed25519.PrivateKey(nil), priv...)}, nil
}

// Scheme returns SchemeEd25519.
func (*Ed25519Signer) Scheme() string { return SchemeEd25519 }

// Sign returns msg's Ed25519 signature.
func (s *Ed25519Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// Public returns the public key receivers verify with.
func (s *Ed25519Signer) Public() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), s.priv.Public().(ed25519.PublicKey)...)
}

// Ed25519Verifier verifies with an Ed25519 public key.
type Ed25519Verifier struct{ pub ed25519.PublicKey }

// NewEd25519Verifier returns the verifier; pub is copied. It fails with
// an error wrapping store.ErrInvalid for a key of the wrong size.
func NewEd25519Verifier(pub ed25519.PublicKey) (*Ed25519Verifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("outcome: Ed25519 public key of %d bytes, want %d: %w", len(pub), ed25519.PublicKeySize, store.ErrInvalid)
	}
	return &Ed25519Verifier{pub: append(ed25519.PublicKey(nil), pub...)}, nil
}

// Scheme returns SchemeEd25519.
func (*Ed25519Verifier) Scheme() string { return SchemeEd25519 }

// Verify reports whether sig is msg's Ed25519 signature.
func (v *Ed25519Verifier) Verify(msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.Verify(v.pub, msg, sig)
}

// signedMessage is what a hook request signs (see the design note).
func signedMessage(nonce string, createdMs, expiresMs uint64, body []byte) []byte {
	m := make([]byte, 0, 64+len(nonce)+len(body))
	m = append(m, "mkit-hook-v1\n"...)
	m = append(m, nonce...)
	m = append(m, '\n')
	m = strconv.AppendUint(m, createdMs, 10)
	m = append(m, '\n')
	m = strconv.AppendUint(m, expiresMs, 10)
	m = append(m, '\n')
	return append(m, body...)
}

// sign sets the signature headers of one attempt on h; webhookID, when
// not empty, adds the Standard Webhooks set.
func sign(h http.Header, s Signer, nonce string, createdMs, expiresMs uint64, body []byte, webhookID string) error {
	sig, err := s.Sign(signedMessage(nonce, createdMs, expiresMs, body))
	if err != nil {
		return fmt.Errorf("outcome: sign the hook request: %w", err)
	}
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderCreatedAt, strconv.FormatUint(createdMs, 10))
	h.Set(HeaderExpiresAt, strconv.FormatUint(expiresMs, 10))
	h.Set(HeaderSignature, s.Scheme()+"="+base64.StdEncoding.EncodeToString(sig))
	if webhookID == "" {
		return nil
	}
	ts := strconv.FormatUint(createdMs/1000, 10)
	std, err := s.Sign([]byte(webhookID + "." + ts + "." + string(body)))
	if err != nil {
		return fmt.Errorf("outcome: sign the hook request: %w", err)
	}
	version := "v1"
	if s.Scheme() == SchemeEd25519 {
		version = "v1a"
	}
	h.Set(HeaderWebhookID, webhookID)
	h.Set(HeaderWebhookTimestamp, ts)
	h.Set(HeaderWebhookSignature, version+","+base64.StdEncoding.EncodeToString(std))
	return nil
}

// parseSignature splits a HeaderSignature value into scheme and bytes.
func parseSignature(v string) (scheme string, sig []byte, ok bool) {
	scheme, b64, found := strings.Cut(v, "=")
	if !found || scheme == "" || len(b64) > 256 {
		return "", nil, false
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	return scheme, sig, err == nil && len(sig) > 0
}
