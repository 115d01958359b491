// A hand-written test of the generated package everygen:
// TestEveryFieldTypeGenerates copies it beside the code generated from
// testdata/everytype.

package everygen

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// evVersions is EvKey's owner's conversions: EvA -> EvB -> EvC (a Plain),
// and back, keeping N, Color and Label; an EvC Fancy has no EvB.
type evVersions struct{}

func (evVersions) UpgradeEvA(v EvA) (EvB, error) { return EvB{N: v.N, Color: v.Color}, nil }

func (evVersions) UpgradeEvB(v EvB) (EvC, error) {
	return &EvPlain{N: v.N, Color: v.Color, Label: v.Label}, nil
}

func (evVersions) DowngradeEvB(v EvB) (EvA, error) { return EvA{N: v.N, Color: v.Color}, nil }

func (evVersions) DowngradeEvC(v EvC) (EvB, error) {
	p, ok := v.(*EvPlain)
	if !ok {
		return EvB{}, wire.ErrFormatTooOld
	}
	return EvB{N: p.N, Color: p.Color, Label: p.Label}, nil
}

var evValues = NewEvKeyValues(evVersions{})

// A family of one version takes struct{}{}.
var _ = NewEvOneKeyValues(struct{}{})

// TestFamilyDecodesEveryVersion: each version decodes and is upgraded to
// the newest through the owner's conversions; version 3, retired, is
// corrupt, and 5 is newer.
func TestFamilyDecodesEveryVersion(t *testing.T) {
	a, _ := EncodeEvA(EvA{N: 1, Color: ColorBlue})
	b, _ := EncodeEvB(EvB{N: 2, Color: ColorRed, Label: "l"})
	c, _ := EncodeEvC(&EvFancy{N: 3, Colors: []Color{ColorTeal}})
	for _, tc := range []struct {
		b    []byte
		want EvC
	}{
		{a, &EvPlain{N: 1, Color: ColorBlue}},
		{b, &EvPlain{N: 2, Color: ColorRed, Label: "l"}},
		{c, &EvFancy{N: 3, Colors: []Color{ColorTeal}}},
	} {
		got, err := evValues.Decode(tc.b)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Decode(%x) = %+v, %v; want %+v", tc.b, got, err, tc.want)
		}
	}
	retired := append([]byte{3}, a[1:]...)
	if _, err := evValues.Decode(retired); !errors.Is(err, wire.ErrCorrupt) || errors.Is(err, wire.ErrNewerVersion) {
		t.Errorf("retired version 3: %v; want corrupt", err)
	}
	newer := append([]byte{5}, a[1:]...)
	var ve *wire.VersionError
	if _, err := evValues.Decode(newer); !errors.As(err, &ve) || ve.Newest != VersionEvC || errors.Is(err, wire.ErrCorrupt) {
		t.Errorf("version 5: %v; want a *wire.VersionError, newest %d", err, VersionEvC)
	}
}

// TestFamilyEncodesWhatTheFormatAllows: Encode writes the newest version
// a format allows, downgrading; a variant or enum constant of a format
// above the store's is refused with the format it needs, as is a value
// its downgrade cannot express.
func TestFamilyEncodesWhatTheFormatAllows(t *testing.T) {
	plain := func(c Color) EvC { return &EvPlain{N: 7, Color: c, Label: "x"} }
	fancy := &EvFancy{N: 8, Colors: []Color{ColorRed}}
	for _, tc := range []struct {
		name    string
		v       EvC
		format  uint32
		version uint8  // written, when need is 0
		need    uint32 // a *wire.FormatError's Need
	}{
		{"plain at 4", plain(ColorTeal), 4, VersionEvC, 0},
		{"plain at 3", plain(ColorRed), 3, VersionEvC, 0},
		{"teal at 3", plain(ColorTeal), 3, VersionEvC, 0},
		{"fancy at 4", fancy, 4, VersionEvC, 0},
		{"fancy at 3", fancy, 3, 0, 4},
		{"plain at 2", plain(ColorRed), 2, VersionEvB, 0},
		{"teal at 2", plain(ColorTeal), 2, VersionEvB, 0},
		{"plain at 1", plain(ColorRed), 1, VersionEvA, 0},
		{"teal at 1", plain(ColorTeal), 1, 0, 2},
		{"plain at 0", plain(ColorRed), 0, 0, 1},
	} {
		b, err := evValues.Encode(tc.v, tc.format)
		if tc.need != 0 {
			var fe *wire.FormatError
			if !errors.As(err, &fe) || fe.Need != tc.need || fe.Format != tc.format || !errors.Is(err, wire.ErrInvalid) || b != nil {
				t.Errorf("%s: %x, %v; want a *wire.FormatError needing %d", tc.name, b, err, tc.need)
			}
			continue
		}
		if err != nil || len(b) == 0 || b[0] != tc.version {
			t.Errorf("%s: %x, %v; want version %d", tc.name, b, err, tc.version)
		}
	}
	if _, err := evValues.Encode(fancy, 2); !errors.Is(err, wire.ErrFormatTooOld) {
		t.Errorf("a fancy value at format 2: %v; want its downgrade's wire.ErrFormatTooOld", err)
	}
	if formatOfColor(ColorTeal) != 2 || formatOfColor(ColorBlue) != 1 {
		t.Error("formatOfColor")
	}
}
