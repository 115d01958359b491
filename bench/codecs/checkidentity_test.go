package codecs

import (
	"math/rand/v2"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// referenceCheckIdentity is wire.CheckIdentity before its word-at-a-time
// ASCII fast path (a change made for these benchmarks): the fast path
// must accept and reject exactly the same strings, with the same error.
func referenceCheckIdentity(typ, s string, min, max int) error {
	if len(s) < min {
		if len(s) == 0 {
			return wire.Rule("", "%s is empty", typ)
		}
		return wire.Rule("", "%s has %d bytes, under its minimum %d", typ, len(s), min)
	}
	if len(s) > max {
		return wire.Rule("", "%s has %d bytes, over its bound %d", typ, len(s), max)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return wire.Rule("", "%s holds a control character at byte %d", typ, i)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return wire.Rule("", "%s is not valid UTF-8 at byte %d", typ, i)
		}
		if unicode.IsControl(r) {
			return wire.Rule("", "%s holds a control character at byte %d", typ, i)
		}
		i += n
	}
	return nil
}

func sameCheck(t *testing.T, s string) {
	t.Helper()
	got, want := wire.CheckIdentity("T", s, 1, 300), referenceCheckIdentity("T", s, 1, 300)
	if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
		t.Fatalf("CheckIdentity(%q) = %v, reference %v", s, got, want)
	}
}

// TestCheckIdentityMatchesReference puts every byte value at every
// position of printable strings of 1 to 24 bytes (across the word and
// overlapping-tail boundaries), then checks random mixes of printable,
// control, DEL, multi-byte and invalid bytes.
func TestCheckIdentityMatchesReference(t *testing.T) {
	const printable = "refs/heads/main-0123456789~ !"
	for n := 1; n <= 24; n++ {
		base := []byte(printable[:min(n, len(printable))])
		for len(base) < n {
			base = append(base, 'x')
		}
		sameCheck(t, string(base))
		for pos := range n {
			for c := range 256 {
				s := append([]byte(nil), base...)
				s[pos] = byte(c)
				sameCheck(t, string(s))
			}
		}
	}
	pieces := []string{"a", "Z", " ", "~", "\x7f", "\x00", "\x1f", "\t", "é", "\u2028", "\u0085", "\xc3", "\xff", "日本", "\U0001F600"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		var s []byte
		for n := rng.IntN(40); n > 0; n-- {
			p := pieces[rng.IntN(len(pieces))]
			if rng.IntN(4) != 0 {
				p = pieces[rng.IntN(4)] // mostly printable ASCII
			}
			s = append(s, p...)
		}
		sameCheck(t, string(s))
	}
}
