package wire

import (
	"errors"
	"strings"
	"testing"
)

// UnknownVersion tells a value of a newer schema (a byte above the
// family's last) from corrupt bytes (empty, version 0, a byte below it
// that the family does not declare, a retired one).
func TestUnknownVersionTellsNewerFromCorrupt(t *testing.T) {
	const family, newest, last = "OrderKey", 2, 3 // version 3 retired
	for _, c := range []struct {
		b     []byte
		newer bool
	}{
		{nil, false},
		{[]byte{0}, false},
		{[]byte{3, 1}, false},
		{[]byte{4}, true},
		{[]byte{255, 9}, true},
	} {
		err := UnknownVersion(family, c.b, newest, last, "1, 2")
		if errors.Is(err, ErrNewerVersion) != c.newer || errors.Is(err, ErrCorrupt) == c.newer {
			t.Errorf("%x: %v; want newer %v (and corrupt otherwise)", c.b, err, c.newer)
		}
		var ve *VersionError
		if c.newer && (!errors.As(err, &ve) || ve.Family != family || ve.Version != c.b[0] || ve.Newest != newest) {
			t.Errorf("%x: %#v, want a *VersionError of %s, version %d, newest %d", c.b, err, family, c.b[0], newest)
		}
		if !strings.Contains(err.Error(), family) {
			t.Errorf("%x: %q does not name %s", c.b, err, family)
		}
	}
}

// A FormatError is ErrFormatTooOld, which is ErrInvalid: nothing encoded.
func TestFormatErrorIsInvalid(t *testing.T) {
	err := error(&FormatError{Family: "OrderKey", Record: "OrderV2", Format: 1, Need: 2})
	if !errors.Is(err, ErrFormatTooOld) || !errors.Is(err, ErrInvalid) || errors.Is(err, ErrCorrupt) {
		t.Errorf("%v: want ErrFormatTooOld and ErrInvalid", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "OrderV2 needs store format 2, the store's is 1") {
		t.Errorf("message %q", msg)
	}
}
