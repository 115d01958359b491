package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mkit-dev/mkitfdb/store"
)

var readChecks = []check{
	{"AbsentPresentEmpty", testAbsentPresentEmpty},
	{"GetManyOrderDuplicatesAbsent", testGetManyOrder},
	{"GetManyNoKeys", testGetManyNoKeys},
	{"ResultsAreCallersCopies", testResultsAreCallersCopies},
	{"InvalidKeysAreInvalid", testReadInvalidKeys},
}

// testAbsentPresentEmpty: Get tells an absent key (nil, false) from a
// present empty value (non-nil, zero length, true).
func testAbsentPresentEmpty(t *testing.T, f *fixture) {
	f.put(t, f.p, "full", "value", "empty", "")

	v, ok, err := f.s.Get(f.ctx, f.p, store.Key("missing"))
	noErr(t, err, "Get(missing)")
	if ok || v != nil {
		t.Fatalf("Get(missing) = %q, %v; want nil, false", v, ok)
	}
	v, ok, err = f.s.Get(f.ctx, f.p, store.Key("empty"))
	noErr(t, err, "Get(empty)")
	if !ok || v == nil || len(v) != 0 {
		t.Fatalf("Get(empty) = %#v, %v; want a non-nil empty value, true", v, ok)
	}
	v, ok, err = f.s.Get(f.ctx, f.p, store.Key("full"))
	noErr(t, err, "Get(full)")
	if !ok || string(v) != "value" {
		t.Fatalf("Get(full) = %q, %v; want \"value\", true", v, ok)
	}
}

// testGetManyOrder: one result per key, in the keys' order, duplicates
// answered each time, absent keys nil, empty values non-nil.
func testGetManyOrder(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "va", "b", "vb", "e", "")
	ks := keys("b", "a", "missing", "b", "e", "a", "zz")
	want := []store.Value{store.Value("vb"), store.Value("va"), nil, store.Value("vb"), {}, store.Value("va"), nil}

	got, err := f.s.GetMany(f.ctx, f.p, ks)
	noErr(t, err, "GetMany")
	if len(got) != len(want) {
		t.Fatalf("GetMany returned %d entries for %d keys", len(got), len(ks))
	}
	for i := range want {
		if !sameValue(got[i], want[i]) {
			t.Errorf("GetMany entry %d (key %q) = %s, want %s", i, ks[i], showValue(got[i]), showValue(want[i]))
		}
	}
}

// testGetManyNoKeys: GetMany of no keys is an empty result, not an error.
func testGetManyNoKeys(t *testing.T, f *fixture) {
	f.put(t, f.p, "a", "va")
	for _, ks := range [][]store.Key{nil, {}} {
		got, err := f.s.GetMany(f.ctx, f.p, ks)
		noErr(t, err, "GetMany of no keys")
		if len(got) != 0 {
			t.Fatalf("GetMany of no keys returned %d entries", len(got))
		}
	}
}

// testResultsAreCallersCopies: slices returned by Get, GetMany and Scan
// belong to the caller; scribbling over them changes nothing stored, and a
// later read returns fresh bytes.
func testResultsAreCallersCopies(t *testing.T, f *fixture) {
	f.put(t, f.p, "k1", "value-one", "k2", "value-two")
	scribble := func(b []byte) {
		for i := range b {
			b[i] = '#'
		}
	}

	v := f.get(t, f.p, store.Key("k1"))
	scribble(v)
	f.wantValue(t, f.p, store.Key("k1"), store.Value("value-one"))

	vs, err := f.s.GetMany(f.ctx, f.p, keys("k1", "k2"))
	noErr(t, err, "GetMany")
	for _, v := range vs {
		scribble(v)
	}
	f.wantValue(t, f.p, store.Key("k1"), store.Value("value-one"))
	f.wantValue(t, f.p, store.Key("k2"), store.Value("value-two"))

	page, err := f.s.Scan(f.ctx, f.p, fullStart, fullEnd, nil, 10)
	noErr(t, err, "Scan")
	for _, e := range page.Entries {
		scribble(e.Key)
		scribble(e.Value)
	}
	f.wantRows(t, f.p, rows("k1", "value-one", "k2", "value-two"))
}

// testReadInvalidKeys: reading a key no batch could write (empty, or over
// MaxKeyBytes) is ErrInvalid, not "absent": the contract's ErrInvalid
// covers "a key over its bound" for every method.
func testReadInvalidKeys(t *testing.T, f *fixture) {
	long := store.Key(bytes.Repeat([]byte{'k'}, f.s.Capabilities().MaxKeyBytes+1))
	for _, tc := range []struct {
		name string
		key  store.Key
	}{
		{"empty key", store.Key{}},
		{"nil key", nil},
		{"key over MaxKeyBytes", long},
	} {
		_, _, err := f.s.Get(f.ctx, f.p, tc.key)
		wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("Get with %s", tc.name))
		_, err = f.s.GetMany(f.ctx, f.p, []store.Key{store.Key("ok"), tc.key})
		wantSentinel(t, err, store.ErrInvalid, fmt.Sprintf("GetMany with %s", tc.name))
	}
}
