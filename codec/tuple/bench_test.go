package tuple

import (
	"errors"
	"math"
	"testing"
)

var (
	benchInts    = []int64{0, 1, -1, 255, -256, 1 << 20, -(1 << 40), math.MaxInt64, math.MinInt64}
	benchUints   = []uint64{0, 1, 255, 1 << 20, 1 << 40, math.MaxUint64}
	benchString  = "relay/partition-0042/outbox"
	benchEscaped = "part\x00ition\x00"
	benchBytes   = []byte("0123456789abcdef0123456789abcdef")
	benchSink    int
)

func BenchmarkAppendInt(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendInt(buf[:0], benchInts[i%len(benchInts)])
	}
	benchSink = len(buf)
}

func BenchmarkAppendUint(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendUint(buf[:0], benchUints[i%len(benchUints)])
	}
	benchSink = len(buf)
}

func BenchmarkAppendString(b *testing.B) {
	for _, bm := range []struct{ name, s string }{{"plain", benchString}, {"escaped", benchEscaped}} {
		b.Run(bm.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendString(buf[:0], bm.s)
			}
			benchSink = len(buf)
		})
	}
}

func BenchmarkAppendBytes(b *testing.B) {
	for _, bm := range []struct {
		name string
		b    []byte
	}{{"plain", benchBytes}, {"escaped", []byte(benchEscaped)}} {
		b.Run(bm.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendBytes(buf[:0], bm.b)
			}
			benchSink = len(buf)
		})
	}
}

// BenchmarkAppendKey builds a typical key: class tag, partition, sequence,
// nested reference.
func BenchmarkAppendKey(b *testing.B) {
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendString(buf[:0], "outbox")
		buf = AppendString(buf, benchString)
		buf = AppendUint(buf, uint64(i))
		buf = AppendNestedStart(buf)
		buf = AppendInt(buf, -7)
		buf = AppendBool(buf, true)
		buf = AppendNestedEnd(buf)
	}
	benchSink = len(buf)
}

func BenchmarkReaderReadInt(b *testing.B) {
	var enc [][]byte
	for _, v := range benchInts {
		enc = append(enc, AppendInt(nil, v))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := NewReader(enc[i%len(enc)])
		v, err := r.ReadInt()
		if err != nil {
			b.Fatal(err)
		}
		benchSink += int(v & 1)
	}
}

func BenchmarkReaderReadUint(b *testing.B) {
	var enc [][]byte
	for _, v := range benchUints {
		enc = append(enc, AppendUint(nil, v))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := NewReader(enc[i%len(enc)])
		v, err := r.ReadUint()
		if err != nil {
			b.Fatal(err)
		}
		benchSink += int(v & 1)
	}
}

func BenchmarkReaderReadString(b *testing.B) {
	for _, bm := range []struct{ name, s string }{{"plain", benchString}, {"escaped", benchEscaped}} {
		b.Run(bm.name, func(b *testing.B) {
			enc := AppendString(nil, bm.s)
			b.ReportAllocs()
			for b.Loop() {
				r := NewReader(enc)
				s, err := r.ReadString()
				if err != nil {
					b.Fatal(err)
				}
				benchSink += len(s)
			}
		})
	}
}

func BenchmarkReaderReadBytes(b *testing.B) {
	for _, bm := range []struct {
		name string
		b    []byte
	}{{"plain", benchBytes}, {"escaped", []byte(benchEscaped)}} {
		b.Run(bm.name, func(b *testing.B) {
			enc := AppendBytes(nil, bm.b)
			b.ReportAllocs()
			for b.Loop() {
				r := NewReader(enc)
				v, err := r.ReadBytes()
				if err != nil {
					b.Fatal(err)
				}
				benchSink += len(v)
			}
		})
	}
}

// BenchmarkReaderKey parses the key BenchmarkAppendKey builds, as a
// generated Parse does: two allocations, one per string.
func BenchmarkReaderKey(b *testing.B) {
	key := AppendString(nil, "outbox")
	key = AppendString(key, benchString)
	key = AppendUint(key, 1<<33)
	key = AppendNestedStart(key)
	key = AppendInt(key, -7)
	key = AppendBool(key, true)
	key = AppendNestedEnd(key)
	b.ReportAllocs()
	for b.Loop() {
		if err := parseBenchKey(key); err != nil {
			b.Fatal(err)
		}
	}
}

func parseBenchKey(key []byte) error {
	r := NewReader(key)
	tag, err := r.ReadString()
	if err != nil {
		return err
	}
	partition, err := r.ReadString()
	if err != nil {
		return err
	}
	seq, err := r.ReadUint()
	if err != nil {
		return err
	}
	if err := r.EnterNested(); err != nil {
		return err
	}
	ref, err := r.ReadInt()
	if err != nil {
		return err
	}
	flag, err := r.ReadBool()
	if err != nil {
		return err
	}
	if err := r.ExitNested(); err != nil {
		return err
	}
	if !r.Done() {
		return errors.New("trailing bytes")
	}
	benchSink += len(tag) + len(partition) + int(seq) + int(ref)
	if flag {
		benchSink++
	}
	return nil
}

func BenchmarkPack(b *testing.B) {
	tup := Tuple{"outbox", benchString, uint64(1 << 33), Tuple{int64(-7), true}}
	b.ReportAllocs()
	for b.Loop() {
		p, err := Pack(tup)
		if err != nil {
			b.Fatal(err)
		}
		benchSink += len(p)
	}
}

func BenchmarkUnpack(b *testing.B) {
	packed := mustPack(b, Tuple{"outbox", benchString, uint64(1 << 33), Tuple{int64(-7), true}})
	b.ReportAllocs()
	for b.Loop() {
		t, err := Unpack(packed)
		if err != nil {
			b.Fatal(err)
		}
		benchSink += len(t)
	}
}

// TestAllocs pins the allocation counts the benchmarks report, so a
// regression fails the tests rather than waiting for someone to read them.
func TestAllocs(t *testing.T) {
	buf := make([]byte, 0, 128)
	stringEnc := AppendString(nil, benchString)
	escapedEnc := AppendString(nil, benchEscaped)
	bytesEnc := AppendBytes(nil, benchBytes)
	escapedBytesEnc := AppendBytes(nil, []byte(benchEscaped))
	intEnc := AppendInt(nil, math.MinInt64)
	uintEnc := AppendUint(nil, math.MaxUint64)
	// An identity of every kind of element: what store.ParseIdentity checks.
	identityEnc := AppendBool(AppendNestedEnd(AppendNestedNull(AppendNestedStart(AppendInt(AppendBytes(escapedEnc, []byte(benchEscaped)), math.MinInt64)))), true)
	if n, err := Check(identityEnc); n != 5 || err != nil {
		t.Fatalf("Check(the identity) = %d, %v, want 5 elements", n, err)
	}
	tests := []struct {
		name string
		want float64
		fn   func()
	}{
		{"AppendInt", 0, func() { buf = AppendInt(buf[:0], math.MinInt64) }},
		{"AppendUint", 0, func() { buf = AppendUint(buf[:0], math.MaxUint64) }},
		{"AppendString", 0, func() { buf = AppendString(buf[:0], benchEscaped) }},
		{"AppendBytes", 0, func() { buf = AppendBytes(buf[:0], []byte(benchEscaped)) }},
		{"AppendNull/Bool/Nested", 0, func() {
			buf = AppendNestedEnd(AppendNestedNull(AppendNestedStart(AppendBool(AppendNull(buf[:0]), true))))
		}},
		{"StringLen/BytesLen/IntLen/UintLen", 0, func() {
			benchSink = StringLen(benchEscaped) + BytesLen(benchBytes) + IntLen(-1) + UintLen(1)
		}},
		{"ReadInt", 0, func() { r := NewReader(intEnc); _, _ = r.ReadInt() }},
		{"ReadUint", 0, func() { r := NewReader(uintEnc); _, _ = r.ReadUint() }},
		{"ReadBytes plain", 0, func() { r := NewReader(bytesEnc); _, _ = r.ReadBytes() }},
		{"ReadBytes escaped", 1, func() { r := NewReader(escapedBytesEnc); _, _ = r.ReadBytes() }},
		{"ReadString plain", 1, func() { r := NewReader(stringEnc); _, _ = r.ReadString() }},
		{"ReadString escaped", 1, func() { r := NewReader(escapedEnc); _, _ = r.ReadString() }},
		{"Check", 0, func() { _, _ = Check(identityEnc) }},
		{"ReadStringBytes plain", 0, func() { r := NewReader(stringEnc); _, _ = r.ReadStringBytes() }},
		{"ReadStringBytes escaped", 1, func() { r := NewReader(escapedEnc); _, _ = r.ReadStringBytes() }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.fn); got != tt.want {
			t.Errorf("%s: %v allocations, want %v", tt.name, got, tt.want)
		}
	}
}
