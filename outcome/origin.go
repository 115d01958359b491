package outcome

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/mkit-dev/mkitfdb/store"
)

// CanonicalOrigin checks that s is an absolute origin, https://host or
// https://host:port (http only for a loopback host: localhost, 127.0.0.0/8,
// ::1), and returns its canonical form: scheme and host in lowercase, the
// scheme's default port dropped. It fails with an error wrapping
// store.ErrInvalid for anything else: a relative or opaque URL, another
// scheme, user information, a path other than "/", a query or a
// fragment, an empty host or an invalid port.
func CanonicalOrigin(s string) (string, error) {
	u, err := parseHTTPURL("audience", s)
	if err != nil {
		return "", err
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery {
		return "", fmt.Errorf("outcome: audience %q is not an origin: it has a path or query: %w", safeURL(u), store.ErrInvalid)
	}
	return canonicalOrigin(u), nil
}

// canonicalOrigin is the canonical origin of a URL parseHTTPURL accepted.
func canonicalOrigin(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == defaultPort[u.Scheme] {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host
}

var defaultPort = map[string]string{"https": "443", "http": "80"}

// parseHTTPURL parses s as an absolute https URL, or http for a loopback
// host, without user information or fragment; what names s in errors,
// which name it by safeURL only, so that no credential in a query or in
// user information reaches a log.
func parseHTTPURL(what, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("outcome: %s is not a URL: %w", what, store.ErrInvalid)
	case !u.IsAbs() || u.Opaque != "" || u.Host == "":
		return nil, fmt.Errorf("outcome: %s %q is not an absolute URL with a host: %w", what, safeURL(u), store.ErrInvalid)
	case u.User != nil:
		// The URL is logged; credentials belong in the signature.
		return nil, fmt.Errorf("outcome: %s %q must not carry user information: %w", what, safeURL(u), store.ErrInvalid)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, fmt.Errorf("outcome: %s %q has a fragment: %w", what, safeURL(u), store.ErrInvalid)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	case u.Scheme == "http":
		return nil, fmt.Errorf("outcome: %s %q: http is allowed for a loopback host only; use https: %w", what, safeURL(u), store.ErrInvalid)
	default:
		return nil, fmt.Errorf("outcome: %s %q: scheme %q, want https: %w", what, safeURL(u), u.Scheme, store.ErrInvalid)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("outcome: %s %q has an empty host: %w", what, safeURL(u), store.ErrInvalid)
	}
	if p := u.Port(); p != "" {
		if n, ok := parsePort(p); !ok || n == 0 {
			return nil, fmt.Errorf("outcome: %s %q: invalid port %q: %w", what, safeURL(u), p, store.ErrInvalid)
		}
	}
	return u, nil
}

// safeURL is u as errors and logs may show it: scheme, host and path,
// without user information, query or fragment ("?..." says a query was
// left out).
func safeURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if !u.IsAbs() {
		v.Host = ""
	}
	s := v.String()
	if u.RawQuery != "" || u.ForceQuery {
		s += "?..."
	}
	return s
}

// endpointOf is the endpoint a sink posting to u signs by default: u's
// canonical origin and its path, without query.
func endpointOf(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return canonicalOrigin(u) + p
}

// parseEndpoint checks an endpoint id: an absolute http or https URL
// becomes its canonical origin and path (endpointOf), so that a receiver
// configured with its public URL matches what a sink posting there signs;
// anything else is taken as it is, and must be 1 to MaxEndpointBytes of
// visible ASCII. It fails with an error wrapping store.ErrInvalid.
func parseEndpoint(s string) (string, error) {
	if u, err := url.Parse(s); err == nil && u.IsAbs() && u.Host != "" {
		if u, err := parseHTTPURL("endpoint", s); err == nil {
			s = endpointOf(u)
		} else {
			return "", err
		}
	}
	if !visibleASCII(s, MaxEndpointBytes) {
		return "", fmt.Errorf("outcome: endpoint of %d bytes: want 1 to %d bytes of visible ASCII: %w", len(s), MaxEndpointBytes, store.ErrInvalid)
	}
	return s, nil
}

func parsePort(p string) (int, bool) {
	if len(p) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
