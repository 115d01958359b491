package store

import (
	"errors"
	"testing"
	"time"
)

var caps = Capabilities{MaxBatchOps: 4, ReservedBatchOps: 1, MaxKeyBytes: 3, MaxValueBytes: 5, MaxBatchBytes: 12}

func TestValidateEachLimitAtItsBoundary(t *testing.T) {
	for _, c := range []struct {
		name string
		b    *Batch
		ok   bool
	}{
		{"empty", NewBatch(), false},
		{"nil", nil, false},
		{"ops at limit", NewBatch().Put(Key("a"), nil).Put(Key("b"), nil).Put(Key("c"), nil), true},
		{"ops over limit", NewBatch().Put(Key("a"), nil).Put(Key("b"), nil).Put(Key("c"), nil).Delete(Key("d")), false},
		{"key at limit", NewBatch().Put(Key("abc"), nil), true},
		{"key over limit", NewBatch().Put(Key("abcd"), nil), false},
		{"empty key", NewBatch().Delete(Key{}), false},
		{"value at limit", NewBatch().Put(Key("a"), Value("12345")), true},
		{"value over limit", NewBatch().Put(Key("a"), Value("123456")), false},
		{"bytes at limit", NewBatch().Put(Key("abc"), Value("12345")).Require(Equals(Key("abc"), Value("1"))), true},
		{"bytes over limit", NewBatch().Put(Key("abc"), Value("12345")).Require(Equals(Key("abc"), Value("12"))), false},
		{"unknown op", NewBatch().Add(Write{Op: 9, Key: Key("a")}), false},
		{"wakeup only", NewBatch().WakeAt(t0.Add(5 * time.Millisecond)), true},
		{"wakeup at the zero Time", NewBatch().WakeAt(time.Time{}), false},
	} {
		err := c.b.Validate(caps)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if err := NewBatch().Put(Key("a"), nil).Put(Key("b"), nil).Put(Key("c"), nil).Delete(Key("d")).Validate(caps.Full()); err != nil {
		t.Errorf("Full() allows MaxBatchOps: %v", err)
	}
}

func TestPreconditionHolds(t *testing.T) {
	if !Equals(Key("k"), nil).Holds(Value{}) || Equals(Key("k"), Value("a")).Holds(nil) || !Absent(Key("k")).Holds(nil) || Absent(Key("k")).Holds(Value{}) {
		t.Fatal("Equals/Absent disagree with present-empty and absent values")
	}
	if Guard(Key("k"), nil).Op != MustBeAbsent || Guard(Key("k"), Value{}).Op != MustEqual {
		t.Fatal("Guard of nil is Absent, of an empty value Equals")
	}
}

func TestMergeKeepsEarliestDeadlineAndWake(t *testing.T) {
	a := NewBatch().Put(Key("a"), nil).WithDeadline(time.UnixMilli(20)).WakeAt(t0.Add(50 * time.Millisecond))
	b := NewBatch().Delete(Key("b")).WithDeadline(time.UnixMilli(10)).WakeAt(t0.Add(30 * time.Millisecond))
	a.Merge(b)
	if a.Ops() != 2 || !a.Deadline.Equal(time.UnixMilli(10)) || !a.Wakeup.At.Equal(t0.Add(30*time.Millisecond)) {
		t.Fatalf("merged %+v", a)
	}
	a.Merge(NewBatch().WakeAt(t0.Add(40 * time.Millisecond)))
	if !a.Wakeup.At.Equal(t0.Add(30 * time.Millisecond)) {
		t.Fatalf("a later wakeup replaced an earlier one: %v", a.Wakeup.At)
	}
	c := a.Clone().Put(Key("c"), nil)
	if a.Ops() != 2 || c.Ops() != 3 {
		t.Fatal("Clone shares its slices")
	}
}

func TestWakeAtKeepsExactness(t *testing.T) {
	at7, at100, at200 := t0.Add(7*time.Millisecond), t0.Add(100*time.Millisecond), t0.Add(200*time.Millisecond)
	b := NewBatch().SetWake(at7, time.Time{}).WakeAt(at100)
	if w := b.Wakeup; !w.Exact || !w.At.Equal(at100) {
		t.Fatalf("WakeAt after SetWake(7, none) = %+v", w)
	}
	if len(b.Preconditions) != 1 || b.Preconditions[0].Op != MustWakeAt || !b.Preconditions[0].Wake.Equal(at7) {
		t.Fatalf("SetWake(7, none) guards with %v, want WakeIs(7)", b.Preconditions)
	}
	b.WakeAt(at200)
	if !b.Wakeup.At.Equal(at100) {
		t.Fatalf("WakeAt raised an exact wakeup: %+v", b.Wakeup)
	}
}

func TestGuardIsAbsentOrEquals(t *testing.T) {
	k := Key("k")
	for _, c := range []struct {
		observed Value
		want     Precondition
	}{
		{nil, Absent(k)},
		{Value("v"), Equals(k, Value("v"))},
		{Value{}, Equals(k, Value{})}, // an empty value is a value
	} {
		if got := Guard(k, c.observed); got.Op != c.want.Op || string(got.Value) != string(c.want.Value) || (got.Value == nil) != (c.want.Value == nil) {
			t.Errorf("Guard(k, %q) = %v, want %v", c.observed, got, c.want)
		}
	}
}
