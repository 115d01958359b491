package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

var applyChecks = []check{
	{"CommitsEveryWrite", testCommitsEveryWrite},
	{"PreconditionFailedWritesNothing", testPreconditionFailedWritesNothing},
	{"FirstFailedPreconditionNamed", testFirstFailedPreconditionNamed},
	{"EqualsOnAbsentKeyFails", testEqualsOnAbsentKeyFails},
	{"AbsentOnEmptyValueFails", testAbsentOnEmptyValueFails},
	{"EqualsComparesWholeValue", testEqualsComparesWholeValue},
	{"PreconditionsIgnoreOwnWrites", testPreconditionsIgnoreOwnWrites},
	{"LastWriteWins", testLastWriteWins},
	{"ValidationErrorWritesNothing", testValidationErrorWritesNothing},
	{"CancelledBeforeStartWritesNothing", testCancelledBeforeStart},
	{"CancelRacingCommit", testCancelRacingCommit},
	{"DoesNotRetainOrModifyBatch", testDoesNotRetainOrModifyBatch},
}

// wantFailedAt fails t unless out is PreconditionFailed naming b's
// precondition at index i.
func wantFailedAt(t testing.TB, out store.BatchOutcome, b *store.Batch, i int) {
	t.Helper()
	if out.Outcome != store.PreconditionFailed {
		t.Fatalf("outcome %v, want precondition %d failed", out, i)
	}
	want := b.Preconditions[i]
	if out.FailedIndex != i || out.Failed.Op != want.Op || !bytes.Equal(out.Failed.Key, want.Key) ||
		(want.Op == store.MustEqual && !bytes.Equal(out.Failed.Value, want.Value)) {
		t.Fatalf("outcome names precondition %d %v, want %d %v", out.FailedIndex, out.Failed, i, want)
	}
}

// testCommitsEveryWrite: a batch whose preconditions hold commits every
// write, puts and deletes alike.
func testCommitsEveryWrite(t *testing.T, f *fixture) {
	f.put(t, f.p, "old", "v0", "keep", "v1")
	b := store.NewBatch().
		Require(store.Equals(store.Key("old"), store.Value("v0")), store.Absent(store.Key("new"))).
		Put(store.Key("new"), store.Value("n")).
		Put(store.Key("empty"), store.Value{}).
		Delete(store.Key("old")).
		Delete(store.Key("never-there"))
	out := f.apply(t, f.p, b, store.Committed, "guarded batch")
	if !out.Committed() {
		t.Fatalf("outcome %v: Committed() is false", out)
	}
	f.wantRows(t, f.p, rows("empty", "", "keep", "v1", "new", "n"))
}

// testPreconditionFailedWritesNothing: when any precondition fails, not
// one write of the batch lands.
func testPreconditionFailedWritesNothing(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "1", "b", "2")
	b := store.NewBatch().
		Require(store.Equals(store.Key("a"), store.Value("1")), store.Absent(store.Key("b"))).
		Put(store.Key("c"), store.Value("3")).
		Put(store.Key("a"), store.Value("changed")).
		Delete(store.Key("b")).
		Put(store.Key("d"), store.Value("4"))
	out := f.apply(t, f.p, b, store.PreconditionFailed, "batch with a failing guard")
	wantFailedAt(t, out, b, 1)
	f.wantRows(t, f.p, rows("a", "1", "b", "2"))
}

// testFirstFailedPreconditionNamed: with several failing preconditions
// the outcome names the first, by index and value.
func testFirstFailedPreconditionNamed(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "1", "b", "2", "c", "3")
	b := store.NewBatch().Require(
		store.Equals(store.Key("a"), store.Value("1")),
		store.Absent(store.Key("x")),
		store.Equals(store.Key("b"), store.Value("wrong")),
		store.Absent(store.Key("c")),
		store.Equals(store.Key("y"), store.Value("3")),
	).Put(store.Key("z"), store.Value("z"))
	out := f.apply(t, f.p, b, store.PreconditionFailed, "three failing guards")
	wantFailedAt(t, out, b, 2)

	b = store.NewBatch().Require(
		store.Absent(store.Key("a")),
		store.Equals(store.Key("b"), store.Value("wrong")),
	).Put(store.Key("z"), store.Value("z"))
	out = f.apply(t, f.p, b, store.PreconditionFailed, "first guard failing")
	wantFailedAt(t, out, b, 0)
	f.wantAbsent(t, f.p, store.Key("z"))
}

// testEqualsOnAbsentKeyFails: Equals never holds for an absent key, not
// even Equals(key, empty).
func testEqualsOnAbsentKeyFails(t *testing.T, f *fixture) {
	for _, v := range []store.Value{{}, nil, store.Value("x")} {
		b := store.NewBatch().Require(store.Equals(store.Key("absent"), v)).Put(store.Key("w"), store.Value("w"))
		out := f.apply(t, f.p, b, store.PreconditionFailed, "Equals on an absent key")
		wantFailedAt(t, out, b, 0)
	}
	f.wantAbsent(t, f.p, store.Key("w"), store.Key("absent"))
}

// testAbsentOnEmptyValueFails: a present empty value is present: Absent
// fails on it and Equals(key, empty) holds.
func testAbsentOnEmptyValueFails(t *testing.T, f *fixture) {
	f.put(t, f.p, "e", "")
	b := store.NewBatch().Require(store.Absent(store.Key("e"))).Put(store.Key("w"), store.Value("w"))
	out := f.apply(t, f.p, b, store.PreconditionFailed, "Absent on an empty value")
	wantFailedAt(t, out, b, 0)
	f.wantAbsent(t, f.p, store.Key("w"))

	b = store.NewBatch().Require(store.Equals(store.Key("e"), store.Value{})).Put(store.Key("w"), store.Value("w"))
	f.apply(t, f.p, b, store.Committed, "Equals(empty) on an empty value")
	f.wantValue(t, f.p, store.Key("w"), store.Value("w"))
}

// testEqualsComparesWholeValue: Equals compares every byte: a prefix, an
// extension or one changed byte fails.
func testEqualsComparesWholeValue(t *testing.T, f *fixture) {
	f.put(t, f.p, "k", "abc\x00")
	for _, v := range []string{"abc", "abc\x00\x00", "abd\x00", "", "ABC\x00"} {
		b := store.NewBatch().Require(store.Equals(store.Key("k"), store.Value(v))).Put(store.Key("w"), store.Value("w"))
		out := f.apply(t, f.p, b, store.PreconditionFailed, "Equals("+showValue(store.Value(v))+")")
		wantFailedAt(t, out, b, 0)
	}
	f.wantAbsent(t, f.p, store.Key("w"))
	b := store.NewBatch().Require(store.Equals(store.Key("k"), store.Value("abc\x00"))).Put(store.Key("w"), store.Value("w"))
	f.apply(t, f.p, b, store.Committed, "Equals with the exact value")
}

// testPreconditionsIgnoreOwnWrites: preconditions are checked against
// the snapshot before the batch, never against the batch's own writes.
func testPreconditionsIgnoreOwnWrites(t *testing.T, f *fixture) {
	b := store.NewBatch().Put(store.Key("k"), store.Value("v")).Require(store.Equals(store.Key("k"), store.Value("v")))
	out := f.apply(t, f.p, b, store.PreconditionFailed, "Equals on a key the batch writes")
	wantFailedAt(t, out, b, 0)
	f.wantAbsent(t, f.p, store.Key("k"))

	b = store.NewBatch().Put(store.Key("k"), store.Value("v")).Require(store.Absent(store.Key("k")))
	f.apply(t, f.p, b, store.Committed, "Absent on a key the batch writes")
	f.wantValue(t, f.p, store.Key("k"), store.Value("v"))
}

// testLastWriteWins: writes apply in order; the last write to a key wins.
func testLastWriteWins(t *testing.T, f *fixture) {
	f.put(t, f.p, "del-put", "old", "put-del", "old")
	b := store.NewBatch().
		Put(store.Key("ppp"), store.Value("1")).Delete(store.Key("ppp")).Put(store.Key("ppp"), store.Value("3")).
		Put(store.Key("pd"), store.Value("1")).Delete(store.Key("pd")).
		Delete(store.Key("del-put")).Put(store.Key("del-put"), store.Value("new")).
		Put(store.Key("put-del"), store.Value("new")).Delete(store.Key("put-del")).
		Put(store.Key("pp"), store.Value("first")).Put(store.Key("pp"), store.Value{})
	f.apply(t, f.p, b, store.Committed, "batch writing keys repeatedly")
	f.wantRows(t, f.p, rows("del-put", "new", "pp", "", "ppp", "3"))
}

// testValidationErrorWritesNothing: a batch that fails validation is
// ErrInvalid and writes nothing, whichever write is at fault.
func testValidationErrorWritesNothing(t *testing.T, f *fixture) {
	caps := f.s.Capabilities()
	f.put(t, f.p, "a", "1")
	for _, tc := range []struct {
		name string
		bad  store.Write
	}{
		{"empty key", store.Put(store.Key{}, store.Value("x"))},
		{"key over MaxKeyBytes", store.Put(make(store.Key, caps.MaxKeyBytes+1), store.Value("x"))},
		{"value over MaxValueBytes", store.Put(store.Key("v"), make(store.Value, caps.MaxValueBytes+1))},
		{"unknown op", store.Write{Op: 0, Key: store.Key("u")}},
	} {
		b := store.NewBatch().Put(store.Key("b"), store.Value("2")).Delete(store.Key("a")).Add(tc.bad).Put(store.Key("c"), store.Value("3"))
		_, err := f.s.Apply(f.ctx, f.p, b)
		wantSentinel(t, err, store.ErrInvalid, "batch with "+tc.name)
	}
	f.wantRows(t, f.p, rows("a", "1"))
}

// testCancelledBeforeStart: Apply with a context that ended before the
// call fails (ErrUnavailable, or ErrUnknownResult) and writes nothing.
func testCancelledBeforeStart(t *testing.T, f *fixture) {
	expired, cancel := context.WithDeadline(f.ctx, suiteEpoch)
	defer cancel()
	for name, ctx := range map[string]context.Context{"cancelled": cancelledContext(f.ctx), "expired": expired} {
		b := store.NewBatch().Require(store.Absent(store.Key("k"))).Put(store.Key("k"), store.Value("v")).Put(store.Key("j"), store.Value("v"))
		out, err := f.s.Apply(ctx, f.p, b)
		if err == nil {
			t.Fatalf("Apply with a %s context: outcome %v, want an error", name, out)
		}
		if !wrapsOneOf(err, store.ErrUnavailable, store.ErrUnknownResult) {
			t.Fatalf("Apply with a %s context: error %q wraps %v, want ErrUnavailable (or ErrUnknownResult)", name, err, sentinelsOf(err))
		}
	}
	f.wantRows(t, f.p, nil)
}

// wrapsOneOf reports whether err wraps exactly one store sentinel and it
// is one of allowed.
func wrapsOneOf(err error, allowed ...error) bool {
	if len(sentinelsOf(err)) != 1 {
		return false
	}
	for _, a := range allowed {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

// testDoesNotRetainOrModifyBatch: Apply neither changes the batch nor keeps
// its byte slices: scribbling over them afterwards changes nothing stored.
func testDoesNotRetainOrModifyBatch(t *testing.T, f *fixture) {
	k, v := store.Key("key"), store.Value("value")
	k2, v2 := store.Key("key2"), store.Value("value2")
	b := store.NewBatch().Require(store.Absent(k)).Put(k, v).Put(k2, v2)
	before := b.Clone()
	f.apply(t, f.p, b, store.Committed, "batch")
	if len(b.Preconditions) != 1 || len(b.Writes) != 2 || b.Writes[0].Op != store.OpPut ||
		!bytes.Equal(b.Writes[1].Key, before.Writes[1].Key) || string(b.Writes[1].Value) != "value2" {
		t.Fatalf("Apply modified the batch: %+v", b)
	}
	copy(k, "#####")
	copy(v, "#####")
	copy(k2, "######")
	copy(v2, "######")
	f.wantRows(t, f.p, rows("key", "value", "key2", "value2"))
}
