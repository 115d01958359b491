package tuple

import (
	"bytes"
	"github.com/mkit-dev/mkitfdb/internal/testkit/tuplecase"
	"testing"
)

// propertySeed fixes the random tuples, so a failure reproduces exactly.
const propertySeed = tuplecase.PropertySeed

// tupleGen makes random tuples (tuplecase.Gen's) as Tuples.
type tupleGen struct{ g *tuplecase.Gen }

func newTupleGen(seed uint64) *tupleGen { return &tupleGen{tuplecase.NewGen(seed)} }

func (g *tupleGen) tuple(depth int) Tuple { return fromCase(g.g.Tuple(depth)) }

// related returns a tuple close to t (see tuplecase.Gen.Related).
func (g *tupleGen) related(t Tuple, depth int) Tuple {
	return fromCase(g.g.Related(toCase(t), depth))
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
