package storetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

var limitChecks = []check{
	{"Sane", testLimitsSane},
	{"FullHasNoReservation", testLimitsFull},
	{"OpsAtLimit", testOpsAtLimit},
	{"KeyAtLimit", testKeyAtLimit},
	{"ValueAtLimit", testValueAtLimit},
	{"BatchBytesAtLimit", testBatchBytesAtLimit},
	{"EmptyBatchInvalid", testEmptyBatchInvalid},
	{"EmptyKeyInvalid", testEmptyKeyInvalid},
	{"UnknownOpInvalid", testUnknownOpInvalid},
}

// maxBuildBytes bounds the batches the suite builds in memory.
const maxBuildBytes = 1 << 30

// rejects applies b, requires ErrInvalid and that f.p is still empty
// (the suite calls it before writing anything valid).
func (f *fixture) rejects(t testing.TB, b *store.Batch, what string) {
	t.Helper()
	out, err := f.s.Apply(f.ctx, f.p, b)
	if err == nil {
		t.Fatalf("%s: outcome %v, want ErrInvalid", what, out)
	}
	wantSentinel(t, err, store.ErrInvalid, what)
	f.wantRows(t, f.p, nil)
}

// opsLimit is how many operations Apply accepts in one batch: the
// reservation is for batch builders (room they keep for a hook's
// operations), not a limit of Apply.
func opsLimit(caps store.Capabilities) int { return caps.MaxBatchOps }

// testLimitsSane: every limit is positive, the reservation leaves room
// for at least one operation, and Capabilities is stable.
func testLimitsSane(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	if caps.MaxBatchOps < 1 || caps.ReservedBatchOps < 0 || caps.ReservedBatchOps >= caps.MaxBatchOps ||
		caps.MaxKeyBytes < 1 || caps.MaxValueBytes < 0 || caps.MaxBatchBytes < 1 {
		t.Fatalf("capabilities %+v: want positive limits and a reservation below MaxBatchOps", caps)
	}
	if again := f.s.Capabilities(); again != caps {
		t.Fatalf("Capabilities changed between calls: %+v then %+v", caps, again)
	}
}

// testLimitsFull: Full keeps every limit and reserves nothing.
func testLimitsFull(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	full := caps.Full()
	want := caps
	want.ReservedBatchOps = 0
	if full != want {
		t.Fatalf("Capabilities().Full() = %+v, want %+v", full, want)
	}
}

// opsKey is the i-th key of an operation-count batch.
func opsKey(prefix byte, i int) store.Key {
	return store.Key(fmt.Sprintf("%c%04d", prefix, i))
}

// testOpsAtLimit: MaxBatchOps operations (preconditions
// and writes alike) pass; one more, of either kind, is ErrInvalid.
func testOpsAtLimit(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	limit := opsLimit(caps)
	if (limit+1)*len(opsKey('o', 0)) > caps.MaxBatchBytes {
		t.Skipf("%d operations of %d-byte keys exceed MaxBatchBytes %d", limit+1, len(opsKey('o', 0)), caps.MaxBatchBytes)
	}
	build := func(prefix byte, ops int) *store.Batch {
		b := store.NewBatch()
		if ops > 1 {
			b.Require(store.Absent(opsKey('g', 0)))
		}
		for i := 0; b.Ops() < ops; i++ {
			b.Put(opsKey(prefix, i), store.Value{})
		}
		return b
	}
	f.rejects(t, build('x', limit+1), fmt.Sprintf("%d writes and preconditions (limit %d)", limit+1, limit))
	f.rejects(t, build('x', limit).Require(store.Absent(opsKey('g', 1))), fmt.Sprintf("%d operations, the last a precondition", limit+1))

	b := build('o', limit)
	f.apply(t, f.p, b, store.Committed, fmt.Sprintf("%d operations (limit %d)", limit, limit))
	var want []store.KeyValue
	for _, w := range b.Writes {
		want = append(want, store.KeyValue{Key: w.Key, Value: store.Value{}})
	}
	f.wantRows(t, f.p, want)
}

// testKeyAtLimit: a key of MaxKeyBytes passes in a write or a
// precondition; one byte more is ErrInvalid in either.
func testKeyAtLimit(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	atLimit := func(fill byte, n int) store.Key { return store.Key(bytes.Repeat([]byte{fill}, n)) }
	over := atLimit('k', caps.MaxKeyBytes+1)
	companion := store.Key("companion")
	f.rejects(t, store.NewBatch().Put(over, store.Value("v")).Put(companion, store.Value("c")), "Put of a key over MaxKeyBytes")
	f.rejects(t, store.NewBatch().Delete(over).Put(companion, store.Value("c")), "Delete of a key over MaxKeyBytes")
	f.rejects(t, store.NewBatch().Require(store.Absent(over)).Put(companion, store.Value("c")), "Absent on a key over MaxKeyBytes")

	if caps.MaxKeyBytes+1 > caps.MaxBatchBytes {
		t.Skipf("a key of MaxKeyBytes %d cannot fit MaxBatchBytes %d", caps.MaxKeyBytes, caps.MaxBatchBytes)
	}
	k := atLimit('k', caps.MaxKeyBytes)
	f.apply(t, f.p, store.NewBatch().Put(k, store.Value("v")), store.Committed, "Put of a key of MaxKeyBytes")
	f.wantValue(t, f.p, k, store.Value("v"))
	if 2*caps.MaxKeyBytes+1 > caps.MaxBatchBytes {
		t.Skipf("two keys of MaxKeyBytes %d cannot fit MaxBatchBytes %d", caps.MaxKeyBytes, caps.MaxBatchBytes)
	}
	f.apply(t, f.p, store.NewBatch().Require(store.Absent(atLimit('j', caps.MaxKeyBytes))).Require(store.Equals(k, store.Value("v"))).Delete(k),
		store.Committed, "preconditions on keys of MaxKeyBytes")
	f.wantRows(t, f.p, nil)
}

// testValueAtLimit: a value of MaxValueBytes passes in a write or an
// Equals; one byte more is ErrInvalid in either.
func testValueAtLimit(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	if caps.MaxValueBytes >= maxBuildBytes {
		t.Skipf("MaxValueBytes %d is too large to build", caps.MaxValueBytes)
	}
	big := make(store.Value, caps.MaxValueBytes+1)
	for i := range big {
		big[i] = byte(i * 7)
	}
	k := store.Key("v")
	f.rejects(t, store.NewBatch().Put(k, big).Put(store.Key("companion"), store.Value("c")), "Put of a value over MaxValueBytes")
	f.rejects(t, store.NewBatch().Require(store.Equals(k, big)).Put(store.Key("companion"), store.Value("c")), "Equals with a value over MaxValueBytes")

	if len(k)+caps.MaxValueBytes > caps.MaxBatchBytes {
		t.Skipf("a value of MaxValueBytes %d cannot fit MaxBatchBytes %d", caps.MaxValueBytes, caps.MaxBatchBytes)
	}
	v := big[:caps.MaxValueBytes]
	f.apply(t, f.p, store.NewBatch().Put(k, v), store.Committed, "Put of a value of MaxValueBytes")
	f.wantValue(t, f.p, k, v)
	if 2*(len(k)+caps.MaxValueBytes) > caps.MaxBatchBytes {
		t.Skipf("two values of MaxValueBytes %d cannot fit MaxBatchBytes %d", caps.MaxValueBytes, caps.MaxBatchBytes)
	}
	f.apply(t, f.p, store.NewBatch().Require(store.Equals(k, v)).Put(k, v[:1]), store.Committed, "Equals with a value of MaxValueBytes")
	f.wantValue(t, f.p, k, v[:1])
}

// batchOfBytes builds a batch of distinct puts, keys starting with prefix,
// whose Bytes() is exactly total while every other limit holds; it returns
// a reason instead when caps make that impossible.
func batchOfBytes(caps store.Capabilities, prefix byte, total int) (*store.Batch, string) {
	const idLen = 5 // prefix byte + 4-byte index
	if total > maxBuildBytes {
		return nil, fmt.Sprintf("%d batch bytes are too many to build", total)
	}
	if caps.MaxKeyBytes < idLen {
		return nil, fmt.Sprintf("MaxKeyBytes %d leaves no room for distinct keys", caps.MaxKeyBytes)
	}
	buf := make(store.Value, min(caps.MaxValueBytes, total))
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, kl := range []int{idLen, min(64, caps.MaxKeyBytes), caps.MaxKeyBytes} {
		n := max(1, (total+kl+caps.MaxValueBytes-1)/(kl+caps.MaxValueBytes))
		if n > opsLimit(caps) || n*kl > total {
			continue
		}
		b := store.NewBatch()
		rest := total - n*kl
		for i := range n {
			k := make(store.Key, kl)
			k[0] = prefix
			binary.BigEndian.PutUint32(k[1:], uint32(i))
			for j := idLen; j < kl; j++ {
				k[j] = 'p'
			}
			vl := min(rest, caps.MaxValueBytes)
			rest -= vl
			b.Put(k, buf[:vl])
		}
		return b, ""
	}
	return nil, fmt.Sprintf("%d bytes need more than %d operations of at most %d+%d bytes", total, opsLimit(caps), caps.MaxKeyBytes, caps.MaxValueBytes)
}

// testBatchBytesAtLimit: a batch of exactly MaxBatchBytes passes; one byte
// more is ErrInvalid, every other limit held.
func testBatchBytesAtLimit(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	over, why := batchOfBytes(caps, 'x', caps.MaxBatchBytes+1)
	if over == nil {
		t.Skipf("cannot build a batch of MaxBatchBytes+1 within the other limits: %s", why)
	}
	if over.Bytes() != caps.MaxBatchBytes+1 || over.Ops() > opsLimit(caps) {
		t.Fatalf("suite bug: built %d ops, %d bytes", over.Ops(), over.Bytes())
	}
	f.rejects(t, over, fmt.Sprintf("batch of %d bytes (limit %d)", over.Bytes(), caps.MaxBatchBytes))

	at, why := batchOfBytes(caps, 'b', caps.MaxBatchBytes)
	if at == nil {
		t.Skipf("cannot build a batch of MaxBatchBytes within the other limits: %s", why)
	}
	f.apply(t, f.p, at, store.Committed, fmt.Sprintf("batch of %d bytes in %d ops (limit %d)", at.Bytes(), at.Ops(), caps.MaxBatchBytes))
	ks := make([]store.Key, len(at.Writes))
	for i, w := range at.Writes {
		ks[i] = w.Key
	}
	got, err := f.s.GetMany(f.ctx, f.p, ks)
	noErr(t, err, "GetMany of the batch's keys")
	for i, w := range at.Writes {
		if !sameValue(got[i], w.Value) {
			t.Fatalf("key %s = %s, want the %d bytes written", showKey(w.Key), showValue(got[i]), len(w.Value))
		}
	}
}

// testEmptyBatchInvalid: a batch with no operations (nil, empty, or only a
// deadline) is ErrInvalid.
func testEmptyBatchInvalid(t *testing.T, f *fixture) {
	f.rejects(t, nil, "nil batch")
	f.rejects(t, store.NewBatch(), "empty batch")
	f.rejects(t, store.NewBatch().WithDeadline(suiteEpoch.Add(1e12)), "batch with only a deadline")
}

// testEmptyKeyInvalid: an empty key in any write or precondition is
// ErrInvalid.
func testEmptyKeyInvalid(t *testing.T, f *fixture) {
	companion := store.Put(store.Key("companion"), store.Value("c"))
	for _, tc := range []struct {
		name string
		b    *store.Batch
	}{
		{"Put of an empty key", store.NewBatch().Add(companion).Put(store.Key{}, store.Value("v"))},
		{"Put of a nil key", store.NewBatch().Add(companion).Put(nil, store.Value("v"))},
		{"Delete of an empty key", store.NewBatch().Add(companion).Delete(store.Key{})},
		{"Absent on an empty key", store.NewBatch().Require(store.Absent(store.Key{})).Add(companion)},
		{"Equals on a nil key", store.NewBatch().Require(store.Equals(nil, store.Value("v"))).Add(companion)},
	} {
		f.rejects(t, tc.b, tc.name)
	}
}

// testUnknownOpInvalid: a write or precondition with an unknown op is
// ErrInvalid.
func testUnknownOpInvalid(t *testing.T, f *fixture) {
	companion := store.Put(store.Key("companion"), store.Value("c"))
	k := store.Key("k")
	for _, tc := range []struct {
		name string
		b    *store.Batch
	}{
		{"write op 0", store.NewBatch().Add(companion, store.Write{Key: k, Value: store.Value("v")})},
		{"write op 99", store.NewBatch().Add(companion, store.Write{Op: 99, Key: k, Value: store.Value("v")})},
		{"precondition op 0", store.NewBatch().Require(store.Precondition{Key: k}).Add(companion)},
		{"precondition op 99", store.NewBatch().Require(store.Precondition{Op: 99, Key: k}).Add(companion)},
	} {
		f.rejects(t, tc.b, tc.name)
	}
}
