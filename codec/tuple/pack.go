package tuple

import (
	"bytes"
	"cmp"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/mkit-dev/mkitfdb/codec/wire"
)

// MaxDepth is the deepest nesting of tuples Pack, AppendTuple and Unpack
// accept: a nested tuple inside the top-level one has depth 1. It bounds
// their recursion (and stops Pack on a tuple that contains itself); no key
// of ours comes near it.
const MaxDepth = 1000

// Tuple is the generic form of a tuple, for tests, tools and comparisons
// with the binding. Its elements are nil, []byte, string, bool, int, int8,
// int16, int32, int64, uint, uint8, uint16, uint32, uint64, *big.Int and
// Tuple (a nested tuple). Generated codecs do not use it; they call the
// Append functions and a Reader directly.
type Tuple []any

// String prints t as a tuple literal, the way tools show keys and
// partition identities: ("orders", 1, b"\x00"), strings Go-quoted, byte
// strings b-prefixed and Go-quoted, nested tuples in parentheses, nil as
// nil, integers and booleans as fmt prints them.
func (t Tuple) String() string {
	var sb strings.Builder
	writeTuple(&sb, t)
	return sb.String()
}

func writeTuple(sb *strings.Builder, t Tuple) {
	sb.WriteByte('(')
	for i, e := range t {
		if i > 0 {
			sb.WriteString(", ")
		}
		switch v := e.(type) {
		case nil:
			sb.WriteString("nil")
		case string:
			sb.WriteString(strconv.Quote(v))
		case []byte:
			sb.WriteString("b" + strconv.Quote(string(v)))
		case Tuple:
			writeTuple(sb, v)
		default:
			fmt.Fprint(sb, v)
		}
	}
	sb.WriteByte(')')
}

// Pack returns the encoding of t, byte-identical to the binding's
// tuple.Tuple.Pack for the same values. It fails with an error wrapping
// wire.ErrInvalid, naming the element, when an element has an unsupported
// type (a nil *big.Int included), when an integer's magnitude needs more
// than MaxBigIntBytes bytes, or when nesting exceeds MaxDepth; the binding
// panics in the first two cases.
func Pack(t Tuple) ([]byte, error) {
	return AppendTuple(nil, t)
}

// AppendTuple appends the encoding of t to dst and returns the extended
// slice. It fails as Pack does, and then returns dst as it was (spare
// capacity beyond len(dst) may have been written to).
func AppendTuple(dst []byte, t Tuple) ([]byte, error) {
	out, err := appendElems(dst, t, 0, "")
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendElems(dst []byte, t Tuple, depth int, path string) ([]byte, error) {
	for i, e := range t {
		switch e := e.(type) {
		case nil:
			if depth == 0 {
				dst = AppendNull(dst)
			} else {
				dst = AppendNestedNull(dst)
			}
		case []byte:
			dst = AppendBytes(dst, e)
		case string:
			dst = AppendString(dst, e)
		case bool:
			dst = AppendBool(dst, e)
		case int:
			dst = AppendInt(dst, int64(e))
		case int8:
			dst = AppendInt(dst, int64(e))
		case int16:
			dst = AppendInt(dst, int64(e))
		case int32:
			dst = AppendInt(dst, int64(e))
		case int64:
			dst = AppendInt(dst, e)
		case uint:
			dst = AppendUint(dst, uint64(e))
		case uint8:
			dst = AppendUint(dst, uint64(e))
		case uint16:
			dst = AppendUint(dst, uint64(e))
		case uint32:
			dst = AppendUint(dst, uint64(e))
		case uint64:
			dst = AppendUint(dst, e)
		case *big.Int:
			if problem := bigIntProblem(e); problem != "" {
				return dst, invalidElem(path, i, problem)
			}
			dst, _ = AppendBigInt(dst, e)
		case Tuple:
			if depth+1 > MaxDepth {
				return dst, invalidElem(path, i, fmt.Sprintf("nesting deeper than %d", MaxDepth))
			}
			var err error
			dst, err = appendElems(AppendNestedStart(dst), e, depth+1, elemPath(path, i))
			if err != nil {
				return dst, err
			}
			dst = AppendNestedEnd(dst)
		default:
			return dst, invalidElem(path, i, fmt.Sprintf("unsupported type %T", e))
		}
	}
	return dst, nil
}

func invalidElem(path string, i int, problem string) error {
	return fmt.Errorf("tuple: element %s: %s: %w", elemPath(path, i), problem, wire.ErrInvalid)
}

// elemPath names element i of the tuple at path: "2", or "2.0" inside it.
func elemPath(path string, i int) string {
	if path == "" {
		return strconv.Itoa(i)
	}
	return path + "." + strconv.Itoa(i)
}

// Unpack decodes a packed tuple. It accepts exactly the byte strings Pack
// produces, so Pack(Unpack(b)) == b whenever it succeeds. Integers come back
// as the binding returns them: int64 when the value fits, uint64 when it is
// over MaxInt64 but fits 8 bytes, *big.Int otherwise; byte strings as fresh
// non-nil slices that never share memory with b; nested tuples as Tuple; an
// empty input as a nil Tuple.
//
// It fails with an error wrapping wire.ErrCorrupt, naming the offset, on
// truncated input, non-canonical integers, nesting deeper than MaxDepth,
// type codes this package does not support (floats, UUIDs, versionstamps,
// ...) and unknown ones. It never panics.
func Unpack(b []byte) (Tuple, error) {
	r := NewReader(b)
	var t Tuple
	for !r.Done() {
		e, err := r.readElem(true)
		if err != nil {
			return nil, err
		}
		t = append(t, e)
	}
	return t, nil
}

// Check reports how many top-level elements b holds, failing exactly where
// Unpack fails, with the same error, but without building the elements: it
// allocates nothing for valid input. A partition identity is checked this
// way (store.ParseIdentity).
func Check(b []byte) (int, error) {
	r := NewReader(b)
	n := 0
	for ; !r.Done(); n++ {
		if _, err := r.readElem(false); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// readElem decodes the element at r.off, which must exist, for Unpack;
// with keep false it only checks it (for Check) and returns nil.
func (r *Reader) readElem(keep bool) (any, error) {
	code := r.b[r.off]
	switch {
	case code == CodeNull:
		return nil, r.ReadNull()
	case code == CodeBytes || code == CodeString:
		if !keep {
			what := "bytes"
			if code == CodeString {
				what = "string"
			}
			_, end, _, err := r.scanEscaped(code, what)
			if err != nil {
				return nil, err
			}
			r.off = end + 1
			return nil, nil
		}
		if code == CodeString {
			return r.ReadString()
		}
		b, fresh, err := r.readBytes()
		if err != nil || fresh {
			return b, err
		}
		return bytes.Clone(b), nil
	case code == CodeNested:
		return r.readNested(keep)
	case code >= CodeNegBigInt && code <= CodePosBigInt:
		if !keep {
			_, _, next, err := r.scanInt("integer")
			if err == nil {
				r.off = next
			}
			return nil, err
		}
		return r.readInteger()
	case code == CodeFalse || code == CodeTrue:
		v, err := r.ReadBool()
		if !keep {
			return nil, err
		}
		return v, err
	}
	return nil, errAt(r.off, "expected a null, bytes, string, nested tuple, integer or boolean, found %s", r.found())
}

func (r *Reader) readNested(keep bool) (Tuple, error) {
	start := r.off
	if r.depth+1 > MaxDepth {
		return nil, errAt(start, "nested tuple deeper than %d", MaxDepth)
	}
	if err := r.EnterNested(); err != nil {
		return nil, err
	}
	var t Tuple
	for !r.AtNestedEnd() {
		if r.Done() {
			return nil, errAt(start, "expected nested tuple terminated by 0x00, found end of input at offset %d", len(r.b))
		}
		e, err := r.readElem(keep)
		if err != nil {
			return nil, err
		}
		if keep {
			t = append(t, e)
		}
	}
	return t, r.ExitNested()
}

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b in the
// tuple layer's order, without encoding them: element by element, a tuple
// that is a prefix of another first. Elements of different kinds order by
// type code: null, bytes, string, nested tuple, integer, false, true.
// Within a kind, bytes and strings compare bytewise, integers by value
// whatever their Go types, nested tuples recursively. For tuples Pack
// accepts, Compare(a, b) == bytes.Compare(Pack(a), Pack(b)).
//
// Elements Pack rejects sort after all others and equal to one another, so
// Compare never panics on them; a tuple that contains itself makes it
// recurse without end.
func Compare(a, b Tuple) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareElem(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// Ranks of element kinds in Compare's order: their type codes.
const (
	rankNull        = int(CodeNull)
	rankBytes       = int(CodeBytes)
	rankString      = int(CodeString)
	rankNested      = int(CodeNested)
	rankInt         = int(CodeIntZero)
	rankFalse       = int(CodeFalse)
	rankTrue        = int(CodeTrue)
	rankUnsupported = 0x100
)

func rank(e any) int {
	switch e := e.(type) {
	case nil:
		return rankNull
	case []byte:
		return rankBytes
	case string:
		return rankString
	case Tuple:
		return rankNested
	case bool:
		if e {
			return rankTrue
		}
		return rankFalse
	case *big.Int:
		if e == nil {
			return rankUnsupported
		}
		return rankInt
	}
	if _, _, ok := smallInt(e); ok {
		return rankInt
	}
	return rankUnsupported
}

func compareElem(x, y any) int {
	rx, ry := rank(x), rank(y)
	if rx != ry {
		return cmp.Compare(rx, ry)
	}
	switch rx {
	case rankBytes:
		return bytes.Compare(x.([]byte), y.([]byte))
	case rankString:
		return strings.Compare(x.(string), y.(string))
	case rankNested:
		return Compare(x.(Tuple), y.(Tuple))
	case rankInt:
		return compareInts(x, y)
	}
	return 0
}

// smallInt returns the sign and magnitude of an integer element of a Go
// integer type; ok is false for anything else, *big.Int included.
func smallInt(e any) (neg bool, mag uint64, ok bool) {
	var v int64
	switch e := e.(type) {
	case int:
		v = int64(e)
	case int8:
		v = int64(e)
	case int16:
		v = int64(e)
	case int32:
		v = int64(e)
	case int64:
		v = e
	case uint:
		return false, uint64(e), true
	case uint8:
		return false, uint64(e), true
	case uint16:
		return false, uint64(e), true
	case uint32:
		return false, uint64(e), true
	case uint64:
		return false, e, true
	default:
		return false, 0, false
	}
	if v < 0 {
		return true, uint64(-v), true // wraps to 2^63 for MinInt64, which is |v|
	}
	return false, uint64(v), true
}

// compareInts compares two elements of rank rankInt by value.
func compareInts(x, y any) int {
	xn, xm, xok := smallInt(x)
	yn, ym, yok := smallInt(y)
	if !xok || !yok {
		return toBig(x).Cmp(toBig(y))
	}
	switch {
	case xn != yn && xn:
		return -1
	case xn != yn:
		return 1
	case xn:
		return cmp.Compare(ym, xm)
	}
	return cmp.Compare(xm, ym)
}

// toBig returns the value of an element of rank rankInt as a big.Int.
func toBig(e any) *big.Int {
	if b, ok := e.(*big.Int); ok {
		return b
	}
	neg, mag, _ := smallInt(e)
	v := new(big.Int).SetUint64(mag)
	if neg {
		v.Neg(v)
	}
	return v
}
