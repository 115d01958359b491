package outcome

import (
	"bytes"
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

// Headers of a signed hook request, and what it signs.
//
// Every attempt is signed afresh. The library's own scheme signs, with
// each signer that meets its minimum key size,
//
//	"mkit-hook-v2\n" endpoint "\n" nonce "\n" created-at "\n" expires-at "\n" body
//
// where nonce is 16 random bytes new to the attempt (hex), created-at the
// time it was made and expires-at the end of its validity window, in Unix
// milliseconds, and endpoint the recipient the sender means: the
// WebhookSinkConfig's Endpoint, by default the URL's canonical origin and path
// (no query). They travel in HeaderEndpoint, HeaderNonce,
// HeaderCreatedAt and HeaderExpiresAt, and HeaderSignature holds one
// "<scheme>=<base64 signature>" per signer, space-separated (several
// while keys rotate). A Receiver accepts a request only inside its window
// (with MaxSkew at both ends), only once per nonce, and, configured with
// its own Endpoint, only when that is the endpoint signed: a receiver that
// shares a key with others (an Ed25519 public key, say) cannot forward a
// delivery meant for itself to another. The URL itself is not signed, so
// that proxies may rewrite it; the method and the other headers are not
// signed either.
//
// Standard Webhooks (WebhookSinkConfig.StandardWebhooks) adds, beside those,
// the specification's headers: HeaderWebhookID, the envelope's id, stable
// across retries (it names the message); HeaderWebhookTimestamp, the
// attempt's time in Unix seconds (created-at's second); and
// HeaderWebhookSignature, one
// "v1,<base64 HMAC-SHA256>" or "v1a,<base64 Ed25519>" per signer,
// space-separated, of
//
//	id "." timestamp "." body
//
// That content is fixed by the specification, so it binds no recipient:
// what keeps a delivery to one endpoint is a key of that endpoint's own,
// as the specification asks of its senders. A Receiver accepts a Standard
// Webhooks request within Tolerance of its timestamp and refuses a
// message id it holds; one that verifies both schemes accepts an attempt
// once, whichever scheme's headers each copy of it carries (the package
// doc says what it holds, and how long). HMAC keys of 24 bytes and more
// (the specification's and Svix's "whsec_" secrets) sign and verify
// Standard Webhooks; the library's own scheme needs MinHMACKeyBytes, so a
// shorter key signs only the Standard Webhooks headers. With HMAC-SHA256
// the receiver holds the sender's secret; with Ed25519 only the public
// key, so a compromised receiver cannot sign.
const (
	HeaderEndpoint  = "X-Mkit-Hook-Endpoint"
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

// Key and signature bounds.
const (
	// MinHMACKeyBytes is the shortest HMAC key the library's own scheme
	// accepts: SHA-256's size.
	MinHMACKeyBytes = 32
	// MinWebhookSecretBytes and MaxWebhookSecretBytes bound a Standard
	// Webhooks secret ("whsec_"): 24 to 64 bytes, as the specification
	// says (Svix's own libraries generate 24-byte secrets).
	MinWebhookSecretBytes = 24
	MaxWebhookSecretBytes = 64
	// MaxSignatures bounds the signatures one request carries in a
	// signature header; a request with more is refused.
	MaxSignatures = 8
	// MaxEndpointBytes bounds an endpoint id.
	MaxEndpointBytes = 512
)

// Prefixes of the Standard Webhooks key strings.
const (
	webhookSecretPrefix     = "whsec_"
	webhookSigningKeyPrefix = "whsk_"
	webhookPublicKeyPrefix  = "whpk_"
)

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

// redacted formats a value holding keys without them, with every verb,
// in slog and as text: what embeds it prints as "<name>(redacted)".
type redacted struct{ name string }

func (r redacted) String() string {
	if r.name == "" {
		return "outcome(redacted)"
	}
	return r.name + "(redacted)"
}
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

// NewHMACKey returns a key for either scheme; key is copied. It fails
// with an error wrapping store.ErrInvalid for a key shorter than
// MinHMACKeyBytes.
func NewHMACKey(key []byte) (*HMACKey, error) {
	if len(key) < MinHMACKeyBytes {
		return nil, fmt.Errorf("outcome: HMAC key of %d bytes, want at least %d: %w", len(key), MinHMACKeyBytes, store.ErrInvalid)
	}
	return newHMACKey(key), nil
}

func newHMACKey(key []byte) *HMACKey {
	return &HMACKey{redacted: redacted{"outcome.HMACKey"}, key: append([]byte(nil), key...)}
}

// ParseWebhookSecret parses a Standard Webhooks secret: "whsec_" (which
// may be left out, as the specification's libraries allow) followed by
// the standard base64 of 24 to 64 bytes. A key of fewer than
// MinHMACKeyBytes signs and verifies Standard Webhooks requests only:
// NewWebhookSink and NewReceiver refuse it for the library's own scheme.
// It fails with an error wrapping store.ErrInvalid, holding nothing of s,
// for anything else.
func ParseWebhookSecret(s string) (*HMACKey, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, webhookSecretPrefix))
	switch {
	case err != nil:
		return nil, fmt.Errorf("outcome: webhook secret is not %s followed by standard base64: %w", webhookSecretPrefix, store.ErrInvalid)
	case len(key) < MinWebhookSecretBytes || len(key) > MaxWebhookSecretBytes:
		return nil, fmt.Errorf("outcome: webhook secret of %d bytes, want %d to %d: %w", len(key), MinWebhookSecretBytes, MaxWebhookSecretBytes, store.ErrInvalid)
	}
	return newHMACKey(key), nil
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

// ParseWebhookSigningKey parses a Standard Webhooks signing key: "whsk_"
// (which may be left out) followed by the standard base64 of an Ed25519
// seed (32 bytes, as the specification's libraries write it) or private
// key (64 bytes). It fails with an error wrapping store.ErrInvalid,
// holding nothing of s, for anything else, a private key whose public
// half does not match its seed among them.
func ParseWebhookSigningKey(s string) (*Ed25519Signer, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, webhookSigningKeyPrefix))
	if err != nil {
		return nil, fmt.Errorf("outcome: webhook signing key is not %s followed by standard base64: %w", webhookSigningKeyPrefix, store.ErrInvalid)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return NewEd25519Signer(ed25519.NewKeyFromSeed(b))
	case ed25519.PrivateKeySize:
		if !bytes.Equal(ed25519.NewKeyFromSeed(b[:ed25519.SeedSize]), b) {
			return nil, fmt.Errorf("outcome: webhook signing key: the public key does not match the seed: %w", store.ErrInvalid)
		}
		return NewEd25519Signer(b)
	}
	return nil, fmt.Errorf("outcome: webhook signing key of %d bytes, want %d or %d: %w", len(b), ed25519.SeedSize, ed25519.PrivateKeySize, store.ErrInvalid)
}

// Scheme returns SchemeEd25519.
func (*Ed25519Signer) Scheme() string { return SchemeEd25519 }

// Sign returns msg's Ed25519 signature.
func (s *Ed25519Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// Public returns the public key receivers verify with.
func (s *Ed25519Signer) Public() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), s.priv.Public().(ed25519.PublicKey)...)
}

// WebhookPublicKey returns the public key in the Standard Webhooks form
// ("whpk_" and its standard base64), which ParseWebhookPublicKey reads.
func (s *Ed25519Signer) WebhookPublicKey() string {
	return webhookPublicKeyPrefix + base64.StdEncoding.EncodeToString(s.Public())
}

// Ed25519Verifier verifies with an Ed25519 public key; it formats as
// "outcome.Ed25519Verifier(redacted)" with any verb, like the other keys.
type Ed25519Verifier struct {
	redacted
	pub ed25519.PublicKey
}

// NewEd25519Verifier returns the verifier; pub is copied. It fails with
// an error wrapping store.ErrInvalid for a key of the wrong size.
func NewEd25519Verifier(pub ed25519.PublicKey) (*Ed25519Verifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("outcome: Ed25519 public key of %d bytes, want %d: %w", len(pub), ed25519.PublicKeySize, store.ErrInvalid)
	}
	return &Ed25519Verifier{redacted: redacted{"outcome.Ed25519Verifier"}, pub: append(ed25519.PublicKey(nil), pub...)}, nil
}

// ParseWebhookPublicKey parses a Standard Webhooks public key: "whpk_"
// (which may be left out) followed by the standard base64 of an Ed25519
// public key. It fails with an error wrapping store.ErrInvalid for
// anything else.
func ParseWebhookPublicKey(s string) (*Ed25519Verifier, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, webhookPublicKeyPrefix))
	if err != nil {
		return nil, fmt.Errorf("outcome: webhook public key is not %s followed by standard base64: %w", webhookPublicKeyPrefix, store.ErrInvalid)
	}
	return NewEd25519Verifier(b)
}

// Scheme returns SchemeEd25519.
func (*Ed25519Verifier) Scheme() string { return SchemeEd25519 }

// Verify reports whether sig is msg's Ed25519 signature.
func (v *Ed25519Verifier) Verify(msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.Verify(v.pub, msg, sig)
}

// signsLibraryScheme reports whether k may sign or verify the library's
// own scheme: every key but an HMAC key under MinHMACKeyBytes.
func signsLibraryScheme(k any) bool {
	h, ok := k.(*HMACKey)
	return !ok || len(h.key) >= MinHMACKeyBytes
}

// standardVersion is the Standard Webhooks signature version of a
// scheme: "v1" for HMAC-SHA256, "v1a" for Ed25519, "" for none.
func standardVersion(scheme string) string {
	switch scheme {
	case SchemeHMACSHA256:
		return "v1"
	case SchemeEd25519:
		return "v1a"
	}
	return ""
}

// signedMessage is what the library's scheme signs (see the Header
// constants).
func signedMessage(endpoint, nonce string, createdMs, expiresMs uint64, body []byte) []byte {
	m := make([]byte, 0, 80+len(endpoint)+len(nonce)+len(body))
	m = append(m, "mkit-hook-v2\n"...)
	m = append(m, endpoint...)
	m = append(m, '\n')
	m = append(m, nonce...)
	m = append(m, '\n')
	m = strconv.AppendUint(m, createdMs, 10)
	m = append(m, '\n')
	m = strconv.AppendUint(m, expiresMs, 10)
	m = append(m, '\n')
	return append(m, body...)
}

// standardContent is what Standard Webhooks signs: id "." timestamp "."
// body.
func standardContent(id string, ts int64, body []byte) []byte {
	m := make([]byte, 0, 24+len(id)+len(body))
	m = append(m, id...)
	m = append(m, '.')
	m = strconv.AppendInt(m, ts, 10)
	m = append(m, '.')
	return append(m, body...)
}

// attempt is one signed attempt's variable part.
type attempt struct {
	endpoint             string
	nonce                string
	createdMs, expiresMs uint64
	// webhookID, when not empty, adds the Standard Webhooks headers.
	webhookID string
}

// sign sets the signature headers of one attempt on h: the library's
// scheme's, signed by each signer that meets its minimum (none: the
// headers are left out), and the Standard Webhooks set, signed by every
// signer, when a.webhookID is set.
func sign(h http.Header, signers []Signer, a attempt, body []byte) error {
	var lib, std []string
	msg := signedMessage(a.endpoint, a.nonce, a.createdMs, a.expiresMs, body)
	var content []byte
	ts := int64(a.createdMs / 1000)
	if a.webhookID != "" {
		content = standardContent(a.webhookID, ts, body)
	}
	for _, s := range signers {
		if signsLibraryScheme(s) {
			sig, err := s.Sign(msg)
			if err != nil {
				return fmt.Errorf("outcome: sign the hook request: %w", err)
			}
			lib = append(lib, s.Scheme()+"="+base64.StdEncoding.EncodeToString(sig))
		}
		if content != nil {
			sig, err := s.Sign(content)
			if err != nil {
				return fmt.Errorf("outcome: sign the hook request: %w", err)
			}
			std = append(std, standardVersion(s.Scheme())+","+base64.StdEncoding.EncodeToString(sig))
		}
	}
	if len(lib) > 0 {
		h.Set(HeaderEndpoint, a.endpoint)
		h.Set(HeaderNonce, a.nonce)
		h.Set(HeaderCreatedAt, strconv.FormatUint(a.createdMs, 10))
		h.Set(HeaderExpiresAt, strconv.FormatUint(a.expiresMs, 10))
		h.Set(HeaderSignature, strings.Join(lib, " "))
	}
	if content != nil {
		h.Set(HeaderWebhookID, a.webhookID)
		h.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderWebhookSignature, strings.Join(std, " "))
	}
	return nil
}

// signature is one signature of a signature header: its scheme, or its
// Standard Webhooks version, and its bytes.
type signature struct {
	scheme string
	sig    []byte
}

// parseSignatures splits a signature header into its space-separated
// signatures, each "<scheme><sep><standard base64>". Entries of another
// form are skipped, as the Standard Webhooks libraries skip them, so
// that a later version can add some; ok is false for a header with none
// of this form, or with more than MaxSignatures entries.
func parseSignatures(v string, sep string) (sigs []signature, ok bool) {
	fields := strings.Fields(v)
	if len(fields) == 0 || len(fields) > MaxSignatures {
		return nil, false
	}
	for _, f := range fields {
		scheme, b64, found := strings.Cut(f, sep)
		if !found || scheme == "" || len(b64) > 256 {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) == 0 {
			continue
		}
		sigs = append(sigs, signature{scheme: scheme, sig: sig})
	}
	return sigs, len(sigs) > 0
}
