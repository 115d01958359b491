package tuple

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// propertySeed fixes the random tuples, so a failure reproduces exactly.
const propertySeed = 0x7475706c65

// tupleGen makes random tuples of every supported kind, biased towards
// values where encodings are easy to get wrong: zero and 0xFF bytes in
// strings, integers at the boundaries of each byte width, nulls inside
// nested tuples.
type tupleGen struct {
	rng  *rand.Rand
	ints []*big.Int // boundary integers
}

func newTupleGen(seed uint64) *tupleGen {
	g := &tupleGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	one := big.NewInt(1)
	for k := 0; k <= 256; k++ {
		if k > 10 && k%50 != 0 && k != 255 {
			continue // every width up to 10 bytes, then a sample
		}
		p := pow2(8 * k)
		for _, v := range []*big.Int{new(big.Int).Sub(p, one), p, new(big.Int).Add(p, one)} {
			if (v.BitLen()+7)/8 > MaxBigIntBytes {
				continue
			}
			g.ints = append(g.ints, v, new(big.Int).Neg(v))
		}
	}
	g.ints = append(g.ints,
		big.NewInt(math.MaxInt64), big.NewInt(math.MinInt64),
		new(big.Int).SetUint64(math.MaxUint64), new(big.Int).Sub(pow2(2040), one),
		new(big.Int).Sub(one, pow2(2040)))
	return g
}

var genAlphabet = []byte{0x00, 0x00, 0x01, 'a', 'b', 0x7f, 0xfe, 0xff}

func (g *tupleGen) blob() []byte {
	b := make([]byte, g.rng.IntN(5))
	for i := range b {
		b[i] = genAlphabet[g.rng.IntN(len(genAlphabet))]
	}
	return b
}

// integer returns a random integer as a random Go type able to hold it.
func (g *tupleGen) integer() any {
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

func (g *tupleGen) element(depth int) any {
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
			return g.tuple(depth + 1)
		}
		return nil
	}
	return g.integer()
}

func (g *tupleGen) tuple(depth int) Tuple {
	t := make(Tuple, g.rng.IntN(4))
	for i := range t {
		t[i] = g.element(depth)
	}
	return t
}

// related returns a tuple close to t, so that comparisons are decided deep
// inside the tuples or end in a tie, not always at the first element.
func (g *tupleGen) related(t Tuple, depth int) Tuple {
	out := append(Tuple{}, t...)
	switch g.rng.IntN(6) {
	case 0:
		return g.tuple(depth)
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
	if inner, ok := out[i].(Tuple); ok && g.rng.IntN(2) == 0 {
		out[i] = g.related(inner, depth+1)
	} else {
		out[i] = g.element(depth)
	}
	return out
}

func mustPack(tb testing.TB, t Tuple) []byte {
	tb.Helper()
	b, err := Pack(t)
	if err != nil {
		tb.Fatalf("Pack(%#v): %v", t, err)
	}
	return b
}

// TestOrderMatchesBytes checks that packed bytes sort exactly as Compare
// orders the tuples, and that RangeEnd bounds exactly the tuples extending
// a prefix.
func TestOrderMatchesBytes(t *testing.T) {
	g := newTupleGen(propertySeed)
	var outcomes [3]int
	for i := 0; i < 20000; i++ {
		a := g.tuple(0)
		b := g.related(a, 0)
		pa, pb := mustPack(t, a), mustPack(t, b)
		want := bytes.Compare(pa, pb)
		if got := Compare(a, b); got != want {
			t.Fatalf("Compare(%#v, %#v) = %d, bytes.Compare = %d\na = % x\nb = % x", a, b, got, want, pa, pb)
		}
		if got := Compare(b, a); got != -want {
			t.Fatalf("Compare(%#v, %#v) = %d, want %d", b, a, got, -want)
		}
		outcomes[want+1]++

		isPrefix := len(a) <= len(b) && Compare(a, b[:len(a)]) == 0
		inRange := bytes.Compare(pa, pb) <= 0 && bytes.Compare(pb, RangeEnd(pa)) < 0
		if isPrefix != inRange {
			t.Fatalf("a = %#v, b = %#v: a is a prefix of b: %v, but Pack(b) in [Pack(a), RangeEnd(Pack(a))): %v", a, b, isPrefix, inRange)
		}
	}
	for i, n := range outcomes {
		if n < 2000 {
			t.Errorf("only %d of 20000 pairs compared %d; the generator is too one-sided", n, i-1)
		}
	}
}

// TestRoundTrip checks that Unpack and the Reader give back every packed
// tuple (in normalized types) and that re-packing gives the same bytes.
func TestRoundTrip(t *testing.T) {
	g := newTupleGen(propertySeed + 1)
	for i := 0; i < 20000; i++ {
		tup := g.tuple(0)
		packed := mustPack(t, tup)
		want := normalize(tup)

		got, err := Unpack(packed)
		if err != nil {
			t.Fatalf("Unpack(% x) of %#v: %v", packed, tup, err)
		}
		if !equalTuple(got, want) {
			t.Fatalf("Unpack(Pack(%#v)) = %#v", tup, got)
		}
		if again := mustPack(t, got); !bytes.Equal(again, packed) {
			t.Fatalf("Pack(Unpack(% x)) = % x", packed, again)
		}
		if api := appendWithAPI(t, nil, tup, false); !bytes.Equal(api, packed) {
			t.Fatalf("Append functions gave % x, Pack % x for %#v", api, packed, tup)
		}

		r := NewReader(packed)
		viaReader, err := readWithAPI(&r)
		if err != nil || !r.Done() {
			t.Fatalf("Reader on % x: %v (stopped at %d)", packed, err, r.Offset())
		}
		if !equalTuple(viaReader, want) {
			t.Fatalf("Reader read %#v, want %#v", viaReader, want)
		}
	}
}
