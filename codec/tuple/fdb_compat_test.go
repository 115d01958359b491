//go:build fdb

package tuple

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"

	fdbtuple "github.com/apple/foundationdb/bindings/go/src/fdb/tuple"
)

// This file checks the package against the official binding's tuple layer,
// which needs cgo and libfdb_c to build: go test -tags fdb ./codec/tuple.

// toBinding converts t to the binding's Tuple. Among integers the binding
// encodes only int, int64, uint, uint64 and *big.Int (it panics on int8 ..
// int32 and uint8 .. uint32), so those are widened: same value, same bytes.
func toBinding(t Tuple) fdbtuple.Tuple {
	out := make(fdbtuple.Tuple, len(t))
	for i, e := range t {
		switch e := e.(type) {
		case Tuple:
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

// fromBinding converts the binding's Unpack result to a Tuple, keeping the
// element types it chose.
func fromBinding(t fdbtuple.Tuple) Tuple {
	out := make(Tuple, len(t))
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
func bindingPack(t Tuple) (packed []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("binding panicked: %v", r)
		}
	}()
	return toBinding(t).Pack(), nil
}

// checkAgainstBinding packs t with both implementations and unpacks the
// bytes with both, failing on any difference.
func checkAgainstBinding(t *testing.T, tup Tuple) {
	t.Helper()
	ours, err := Pack(tup)
	if err != nil {
		t.Fatalf("Pack(%#v): %v", tup, err)
	}
	theirs, err := bindingPack(tup)
	if err != nil {
		t.Fatalf("binding Pack(%#v): %v", tup, err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Fatalf("Pack(%#v)\n ours    % x\n binding % x", tup, ours, theirs)
	}
	got, err := Unpack(ours)
	if err != nil {
		t.Fatalf("Unpack(% x): %v", ours, err)
	}
	bt, err := fdbtuple.Unpack(ours)
	if err != nil {
		t.Fatalf("binding Unpack(% x): %v", ours, err)
	}
	if want := fromBinding(bt); !equalTuple(got, want) {
		t.Fatalf("Unpack(% x)\n ours    %#v\n binding %#v", ours, got, want)
	}
}

func TestCompatGolden(t *testing.T) {
	for _, v := range goldenVectors() {
		t.Run(v.name, func(t *testing.T) {
			checkAgainstBinding(t, v.tuple)
		})
	}
}

func TestCompatRandom(t *testing.T) {
	g := newTupleGen(propertySeed + 2)
	for i := 0; i < 10000; i++ {
		checkAgainstBinding(t, g.tuple(0))
	}
}

// TestCompatOutOfRange checks that what Pack rejects the binding cannot
// encode either (it panics where Pack returns wire.ErrInvalid).
func TestCompatOutOfRange(t *testing.T) {
	for _, tup := range []Tuple{
		{pow2(2040)},
		{new(big.Int).Neg(pow2(2040))},
		{1.5 + 0i},
	} {
		if _, err := Pack(tup); err == nil {
			t.Errorf("Pack(%v) succeeded", tup)
		}
		if packed, err := bindingPack(tup); err == nil {
			t.Errorf("binding packed %v as % x", tup, packed)
		}
	}
}
