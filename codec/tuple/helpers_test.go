package tuple

import (
	"bytes"
	"fmt"
	"github.com/mkit-dev/mkitfdb/internal/testkit/tuplecase"
	"math"
	"math/big"
	"testing"
)

// The test tables' helpers, shared with the FoundationDB engine module's
// differential test.
var (
	unhex  = tuplecase.Unhex
	bigInt = tuplecase.BigInt
	pow2   = tuplecase.Pow2
)

// fromCase converts a tuplecase tuple (nested tuples as []any) to a Tuple.
func fromCase(t []any) Tuple {
	out := make(Tuple, len(t))
	for i, e := range t {
		if nested, ok := e.([]any); ok {
			e = fromCase(nested)
		}
		out[i] = e
	}
	return out
}

// toCase converts a Tuple to a tuplecase tuple.
func toCase(t Tuple) []any {
	out := make([]any, len(t))
	for i, e := range t {
		if nested, ok := e.(Tuple); ok {
			e = toCase(nested)
		}
		out[i] = e
	}
	return out
}

// TestCasesKeepTheBound: tuplecase's generator keeps within this
// package's bound.
func TestCasesKeepTheBound(t *testing.T) {
	if tuplecase.MaxBigIntBytes != MaxBigIntBytes {
		t.Fatalf("tuplecase.MaxBigIntBytes = %d, MaxBigIntBytes = %d", tuplecase.MaxBigIntBytes, MaxBigIntBytes)
	}
}

// normalize returns t with its elements in the types Unpack returns them:
// integers as int64 when they fit, else uint64 when they fit, else *big.Int;
// byte strings as non-nil slices.
func normalize(t Tuple) Tuple {
	var out Tuple
	for _, e := range t {
		out = append(out, normalizeElem(e))
	}
	return out
}

func normalizeElem(e any) any {
	switch e := e.(type) {
	case nil, string, bool:
		return e
	case []byte:
		return append([]byte{}, e...)
	case Tuple:
		return normalize(e)
	}
	if rank(e) != rankInt {
		panic(fmt.Sprintf("normalize: unsupported %T", e))
	}
	v := toBig(e)
	switch {
	case v.IsInt64():
		return v.Int64()
	case v.IsUint64():
		return v.Uint64()
	}
	return new(big.Int).Set(v)
}

// equalTuple reports whether a and b hold the same elements of the same
// types; big.Int values compare by value, nil and empty byte slices and
// tuples compare equal.
func equalTuple(a, b Tuple) bool {
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
	case Tuple:
		y, ok := y.(Tuple)
		return ok && equalTuple(x, y)
	}
	return false
}

// appendWithAPI encodes t with the Append functions only, as generated code
// does.
func appendWithAPI(tb testing.TB, dst []byte, t Tuple, nested bool) []byte {
	tb.Helper()
	for _, e := range t {
		switch e := e.(type) {
		case nil:
			if nested {
				dst = AppendNestedNull(dst)
			} else {
				dst = AppendNull(dst)
			}
		case []byte:
			dst = AppendBytes(dst, e)
		case string:
			dst = AppendString(dst, e)
		case bool:
			dst = AppendBool(dst, e)
		case Tuple:
			dst = AppendNestedStart(dst)
			dst = appendWithAPI(tb, dst, e, true)
			dst = AppendNestedEnd(dst)
		case *big.Int:
			var err error
			if dst, err = AppendBigInt(dst, e); err != nil {
				tb.Fatalf("AppendBigInt(%v): %v", e, err)
			}
		default:
			neg, mag, ok := smallInt(e)
			switch {
			case !ok:
				tb.Fatalf("appendWithAPI: unsupported %T", e)
			case neg:
				dst = AppendInt(dst, -int64(mag))
			default:
				dst = AppendUint(dst, mag)
			}
		}
	}
	return dst
}

// readWithAPI decodes elements with the Reader's exported methods, choosing
// each by Peek, until the input ends (or, inside a nested tuple, until
// AtNestedEnd). It returns them in the types Unpack would.
func readWithAPI(r *Reader) (Tuple, error) {
	var t Tuple
	for !r.Done() && !r.AtNestedEnd() {
		code, _ := r.Peek()
		var e any
		var err error
		switch {
		case code == CodeNull:
			err = r.ReadNull()
		case code == CodeBytes:
			var b []byte
			b, err = r.ReadBytes()
			e = append([]byte{}, b...)
		case code == CodeString:
			e, err = r.ReadString()
		case code == CodeNested:
			if err = r.EnterNested(); err != nil {
				break
			}
			var inner Tuple
			if inner, err = readWithAPI(r); err != nil {
				break
			}
			e, err = inner, r.ExitNested()
		case code > CodeIntZero && code <= CodePosInt8:
			var u uint64
			u, err = r.ReadUint()
			if u <= math.MaxInt64 {
				e = int64(u)
			} else {
				e = u
			}
		case code >= CodeNegInt8 && code <= CodeIntZero:
			if e, err = r.ReadInt(); err != nil {
				// Below MinInt64 but within 8 bytes: only ReadBigInt reads it.
				e, err = r.ReadBigInt()
			}
		case code == CodeNegBigInt || code == CodePosBigInt:
			e, err = r.ReadBigInt()
		default:
			e, err = r.ReadBool()
		}
		if err != nil {
			return nil, err
		}
		t = append(t, e)
	}
	return t, nil
}
