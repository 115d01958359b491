package fdbengine_test

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"

	fdbtuple "github.com/apple/foundationdb/bindings/go/src/fdb/tuple"

	"github.com/mkit-dev/mkitfdb/codec/tuple"
	"github.com/mkit-dev/mkitfdb/internal/testkit/tuplecase"
)

// These tests hold codec/tuple, the library's own tuple layer, to the
// binding's: the same bytes for every tuple of tuplecase's golden vectors
// and generator, the same values unpacked, and the same refusals. They
// need no cluster, only the binding (cgo and libfdb_c).

// ours converts a tuplecase tuple to codec/tuple's Tuple.
func ours(t []any) tuple.Tuple {
	out := make(tuple.Tuple, len(t))
	for i, e := range t {
		if nested, ok := e.([]any); ok {
			e = ours(nested)
		}
		out[i] = e
	}
	return out
}

// oursBack converts codec/tuple's Unpack result to a tuplecase tuple.
func oursBack(t tuple.Tuple) []any {
	out := make([]any, len(t))
	for i, e := range t {
		if nested, ok := e.(tuple.Tuple); ok {
			e = oursBack(nested)
		}
		out[i] = e
	}
	return out
}

// toBinding converts t to the binding's Tuple. Among integers the binding
// encodes only int, int64, uint, uint64 and *big.Int (it panics on int8 ..
// int32 and uint8 .. uint32), so those are widened: same value, same bytes.
func toBinding(t []any) fdbtuple.Tuple {
	out := make(fdbtuple.Tuple, len(t))
	for i, e := range t {
		switch e := e.(type) {
		case []any:
			out[i] = toBinding(e)
		case int8:
			out[i] = int64(e)
		case int16:
			out[i] = int64(e)
		case int32:
			out[i] = int64(e)
		case uint8:
			out[i] = uint64(e)
		case uint16:
			out[i] = uint64(e)
		case uint32:
			out[i] = uint64(e)
		default:
			out[i] = e
		}
	}
	return out
}

// fromBinding converts the binding's Unpack result to a tuplecase tuple,
// keeping the element types it chose.
func fromBinding(t fdbtuple.Tuple) []any {
	out := make([]any, len(t))
	for i, e := range t {
		if nested, ok := e.(fdbtuple.Tuple); ok {
			out[i] = fromBinding(nested)
		} else {
			out[i] = e
		}
	}
	return out
}

// bindingPack packs t with the binding, turning its panics into errors.
func bindingPack(t []any) (packed []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("binding panicked: %v", r)
		}
	}()
	return toBinding(t).Pack(), nil
}

// checkAgainstBinding packs tup with both implementations and unpacks the
// bytes with both, failing on any difference.
func checkAgainstBinding(t *testing.T, tup []any) {
	t.Helper()
	packed, err := tuple.Pack(ours(tup))
	if err != nil {
		t.Fatalf("Pack(%#v): %v", tup, err)
	}
	theirs, err := bindingPack(tup)
	if err != nil {
		t.Fatalf("binding Pack(%#v): %v", tup, err)
	}
	if !bytes.Equal(packed, theirs) {
		t.Fatalf("Pack(%#v)\n ours    % x\n binding % x", tup, packed, theirs)
	}
	got, err := tuple.Unpack(packed)
	if err != nil {
		t.Fatalf("Unpack(% x): %v", packed, err)
	}
	bt, err := fdbtuple.Unpack(packed)
	if err != nil {
		t.Fatalf("binding Unpack(% x): %v", packed, err)
	}
	if want := fromBinding(bt); !tuplecase.Equal(oursBack(got), want) {
		t.Fatalf("Unpack(% x)\n ours    %#v\n binding %#v", packed, got, want)
	}
}

func TestTupleGolden(t *testing.T) {
	for _, v := range tuplecase.Golden() {
		t.Run(v.Name, func(t *testing.T) {
			checkAgainstBinding(t, v.Tuple)
			if theirs, _ := bindingPack(v.Tuple); !bytes.Equal(theirs, tuplecase.Unhex(v.Hex)) {
				t.Fatalf("binding Pack = % x, the vector says %s", theirs, v.Hex)
			}
		})
	}
}

func TestTupleRandom(t *testing.T) {
	g := tuplecase.NewGen(tuplecase.PropertySeed + 2)
	for range 10000 {
		checkAgainstBinding(t, g.Tuple(0))
	}
}

// TestTupleOutOfRange checks that what Pack rejects the binding cannot
// encode either (it panics where Pack returns wire.ErrInvalid).
func TestTupleOutOfRange(t *testing.T) {
	for _, tup := range [][]any{
		{tuplecase.Pow2(2040)},
		{new(big.Int).Neg(tuplecase.Pow2(2040))},
		{1.5 + 0i},
	} {
		if _, err := tuple.Pack(ours(tup)); err == nil {
			t.Errorf("Pack(%v) succeeded", tup)
		}
		if packed, err := bindingPack(tup); err == nil {
			t.Errorf("binding packed %v as % x", tup, packed)
		}
	}
}
