// Package tuplecase holds the FoundationDB tuple test cases that
// codec/tuple's tests and the FoundationDB engine module's differential
// test against the binding's tuple layer share: golden vectors every
// binding agrees on, and a seeded generator of random tuples biased
// towards the encodings' edges.
//
// A tuple here is a []any whose nested tuples are []any too; each test
// converts them to its own tuple type. The package imports nothing of this
// module, so that codec/tuple's own tests can import it.
package tuplecase

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
)

// MaxBigIntBytes is codec/tuple's bound on an integer's magnitude (its
// tests check the two agree): the generator stays within it.
const MaxBigIntBytes = 255

// PropertySeed fixes the random tuples, so a failure reproduces exactly.
const PropertySeed = 0x7475706c65

// Vector is a tuple and its encoding.
type Vector struct {
	Name  string
	Tuple []any
	Hex   string // space-separated bytes, as Unhex reads them
}

// Golden returns encodings every FoundationDB binding agrees on. The
// "spec" ones are the test cases of FoundationDB's design/tuple.md; the
// rest are integer boundaries and combinations worked out from the same
// rules (and checked against the binding by the FoundationDB engine
// module's differential test).
func Golden() []Vector {
	ff := func(n int) string { return strings.TrimSpace(strings.Repeat("ff ", n)) }
	zeros := func(n int) string { return strings.TrimSpace(strings.Repeat("00 ", n)) }
	return []Vector{
		{"spec/null", []any{nil}, "00"},
		{"spec/bytes", []any{[]byte("foo\x00bar")}, "01 66 6f 6f 00 ff 62 61 72 00"},
		{"spec/string", []any{"F\u00d4O\x00bar"}, "02 46 c3 94 4f 00 ff 62 61 72 00"},
		{"spec/nested", []any{[]any{[]byte("foo\x00bar"), nil, []any{}}}, "05 01 66 6f 6f 00 ff 62 61 72 00 00 ff 05 00 00"},
		{"spec/nested empty", []any{[]any{}}, "05 00"},
		{"spec/nested only null", []any{[]any{nil}}, "05 00 ff 00"},
		{"spec/int -5551212", []any{-5551212}, "11 ab 4b 93"},
		{"spec/int -1", []any{-1}, "13 fe"},

		{"empty tuple", []any{}, ""},
		{"int 0", []any{0}, "14"},
		{"int 1", []any{1}, "15 01"},
		{"int 255", []any{255}, "15 ff"},
		{"int 256", []any{256}, "16 01 00"},
		{"int 65535", []any{65535}, "16 ff ff"},
		{"int 65536", []any{65536}, "17 01 00 00"},
		{"int -255", []any{-255}, "13 00"},
		{"int -256", []any{-256}, "12 fe ff"},
		{"int -65535", []any{-65535}, "12 00 00"},
		{"int -65536", []any{-65536}, "11 fe ff ff"},
		{"int MaxInt64", []any{int64(math.MaxInt64)}, "1c 7f " + ff(7)},
		{"int MinInt64", []any{int64(math.MinInt64)}, "0c 7f " + ff(7)},
		{"int MinInt64+1", []any{int64(math.MinInt64 + 1)}, "0c 80 " + zeros(7)},
		{"uint 2^63", []any{uint64(1 << 63)}, "1c 80 " + zeros(7)},
		{"uint MaxUint64", []any{uint64(math.MaxUint64)}, "1c " + ff(8)},
		{"int8 MinInt8", []any{int8(math.MinInt8)}, "13 7f"},
		{"uint8 200", []any{uint8(200)}, "15 c8"},
		{"int16 MaxInt16", []any{int16(math.MaxInt16)}, "16 7f ff"},
		{"int32 MinInt32", []any{int32(math.MinInt32)}, "10 7f ff ff ff"},
		{"uint32 MaxUint32", []any{uint32(math.MaxUint32)}, "18 ff ff ff ff"},
		{"uint 1", []any{uint(1)}, "15 01"},
		{"big 5", []any{big.NewInt(5)}, "15 05"},
		{"big 0", []any{big.NewInt(0)}, "14"},
		{"big MinInt64", []any{big.NewInt(math.MinInt64)}, "0c 7f " + ff(7)},
		{"big -(2^63+1)", []any{BigInt("-9223372036854775809")}, "0c 7f " + ff(6) + " fe"},
		{"big -(2^64-1)", []any{BigInt("-18446744073709551615")}, "0c " + zeros(8)},
		{"big 2^64", []any{Pow2(64)}, "1d 09 01 " + zeros(8)},
		{"big -2^64", []any{new(big.Int).Neg(Pow2(64))}, "0b f6 fe " + ff(8)},
		{"big 2^72-1", []any{new(big.Int).Sub(Pow2(72), big.NewInt(1))}, "1d 09 " + ff(9)},
		{"big 2^72", []any{Pow2(72)}, "1d 0a 01 " + zeros(9)},
		{"big -(2^72)", []any{new(big.Int).Neg(Pow2(72))}, "0b f5 fe " + ff(9)},
		{"big 2^2040-1", []any{new(big.Int).Sub(Pow2(2040), big.NewInt(1))}, "1d ff " + ff(255)},
		{"big -(2^2040-1)", []any{new(big.Int).Sub(big.NewInt(1), Pow2(2040))}, "0b 00 " + zeros(255)},
		{"true", []any{true}, "27"},
		{"false", []any{false}, "26"},
		{"empty string", []any{""}, "02 00"},
		{"empty bytes", []any{[]byte{}}, "01 00"},
		{"nil bytes", []any{[]byte(nil)}, "01 00"},
		{"bytes 00", []any{[]byte{0x00}}, "01 00 ff 00"},
		{"bytes ff", []any{[]byte{0xff}}, "01 ff 00"},
		{"string 00 00", []any{"\x00\x00"}, "02 00 ff 00 ff 00"},
		{"string 00 ff", []any{"\x00\xff"}, "02 00 ff ff 00"},
		{"mixed", []any{"a", 1, true, nil, []byte("b")}, "02 61 00 15 01 27 00 01 62 00"},
		{"nested in nested", []any{[]any{[]any{nil}, 1}}, "05 05 00 ff 00 15 01 00"},
		{"nested then null", []any{[]any{"a"}, nil}, "05 02 61 00 00 00"},
		{"nested bytes 00", []any{[]any{[]byte{0}, nil}}, "05 01 00 ff 00 00 ff 00"},
	}
}

// Unhex parses space-separated hex bytes ("01 ff 00"); it panics on a
// typo, which only a broken test table can contain.
func Unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(fmt.Sprintf("bad hex %q: %v", s, err))
	}
	return b
}

// BigInt parses a base-10 integer for test tables; it panics on a typo.
func BigInt(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("bad big integer " + s)
	}
	return v
}

// Pow2 returns 2^n as a big.Int.
func Pow2(n int) *big.Int {
	return new(big.Int).Lsh(big.NewInt(1), uint(n))
}

// Gen makes random tuples of every supported kind, biased towards
// values where encodings are easy to get wrong: zero and 0xFF bytes in
// strings, integers at the boundaries of each byte width, nulls inside
// nested tuples.
type Gen struct {
	rng  *rand.Rand
	ints []*big.Int // boundary integers
}

// NewGen returns a generator seeded with seed: one seed, one sequence of
// tuples.
func NewGen(seed uint64) *Gen {
	g := &Gen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	one := big.NewInt(1)
	for k := 0; k <= 256; k++ {
		if k > 10 && k%50 != 0 && k != 255 {
			continue // every width up to 10 bytes, then a sample
		}
		p := Pow2(8 * k)
		for _, v := range []*big.Int{new(big.Int).Sub(p, one), p, new(big.Int).Add(p, one)} {
			if (v.BitLen()+7)/8 > MaxBigIntBytes {
				continue
			}
			g.ints = append(g.ints, v, new(big.Int).Neg(v))
		}
	}
	g.ints = append(g.ints,
		big.NewInt(math.MaxInt64), big.NewInt(math.MinInt64),
		new(big.Int).SetUint64(math.MaxUint64), new(big.Int).Sub(Pow2(2040), one),
		new(big.Int).Sub(one, Pow2(2040)))
	return g
}

var genAlphabet = []byte{0x00, 0x00, 0x01, 'a', 'b', 0x7f, 0xfe, 0xff}

func (g *Gen) blob() []byte {
	b := make([]byte, g.rng.IntN(5))
	for i := range b {
		b[i] = genAlphabet[g.rng.IntN(len(genAlphabet))]
	}
	return b
}

// integer returns a random integer as a random Go type able to hold it.
func (g *Gen) integer() any {
	var v *big.Int
	switch g.rng.IntN(4) {
	case 0:
		v = g.ints[g.rng.IntN(len(g.ints))]
	case 1:
		v = big.NewInt(g.rng.Int64N(7) - 3)
	case 2:
		v = big.NewInt(int64(g.rng.Uint64()) >> g.rng.IntN(64))
	default:
		mag := make([]byte, 1+g.rng.IntN(20))
		for i := range mag {
			mag[i] = byte(g.rng.UintN(256))
		}
		v = new(big.Int).SetBytes(mag)
		if g.rng.IntN(2) == 0 {
			v.Neg(v)
		}
	}
	var fits []any
	if v.IsInt64() {
		n := v.Int64()
		fits = append(fits, n, int(n))
		if n == int64(int8(n)) {
			fits = append(fits, int8(n))
		}
		if n == int64(int16(n)) {
			fits = append(fits, int16(n))
		}
		if n == int64(int32(n)) {
			fits = append(fits, int32(n))
		}
	}
	if v.IsUint64() {
		n := v.Uint64()
		fits = append(fits, n, uint(n))
		if n <= math.MaxUint8 {
			fits = append(fits, uint8(n))
		}
		if n <= math.MaxUint16 {
			fits = append(fits, uint16(n))
		}
		if n <= math.MaxUint32 {
			fits = append(fits, uint32(n))
		}
	}
	fits = append(fits, new(big.Int).Set(v))
	return fits[g.rng.IntN(len(fits))]
}

func (g *Gen) element(depth int) any {
	switch g.rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return g.blob()
	case 2:
		return string(g.blob())
	case 3:
		return g.rng.IntN(2) == 0
	case 4:
		if depth < 3 {
			return g.Tuple(depth + 1)
		}
		return nil
	}
	return g.integer()
}

// Tuple returns a random tuple of up to 3 elements, nested up to 3
// levels below depth.
func (g *Gen) Tuple(depth int) []any {
	t := make([]any, g.rng.IntN(4))
	for i := range t {
		t[i] = g.element(depth)
	}
	return t
}

// Related returns a tuple close to t, so that comparisons are decided deep
// inside the tuples or end in a tie, not always at the first element.
func (g *Gen) Related(t []any, depth int) []any {
	out := append([]any{}, t...)
	switch g.rng.IntN(6) {
	case 0:
		return g.Tuple(depth)
	case 1:
		return out
	case 2:
		return out[:g.rng.IntN(len(out)+1)]
	case 3:
		return append(out, g.element(depth))
	}
	if len(out) == 0 {
		return append(out, g.element(depth))
	}
	i := g.rng.IntN(len(out))
	if inner, ok := out[i].([]any); ok && g.rng.IntN(2) == 0 {
		out[i] = g.Related(inner, depth+1)
	} else {
		out[i] = g.element(depth)
	}
	return out
}

// Equal reports whether a and b hold the same elements of the same types,
// as a tuple layer's Unpack returns them (nil, []byte, string, bool,
// int64, uint64, *big.Int and nested []any); big.Int values compare by
// value, nil and empty byte slices and tuples compare equal.
func Equal(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalElem(a[i], b[i]) {
			return false
		}
	}
	return true
}

func equalElem(x, y any) bool {
	switch x := x.(type) {
	case nil:
		return y == nil
	case []byte:
		y, ok := y.([]byte)
		return ok && bytes.Equal(x, y)
	case string:
		y, ok := y.(string)
		return ok && x == y
	case bool:
		y, ok := y.(bool)
		return ok && x == y
	case int64:
		y, ok := y.(int64)
		return ok && x == y
	case uint64:
		y, ok := y.(uint64)
		return ok && x == y
	case *big.Int:
		y, ok := y.(*big.Int)
		return ok && x.Cmp(y) == 0
	case []any:
		y, ok := y.([]any)
		return ok && Equal(x, y)
	}
	return false
}
