package store

import (
	"errors"
	"math"
	"testing"
	"time"
)

// t0 is the tests' base time: their times are durations after it.
var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestTimeEncodingRoundTrips(t *testing.T) {
	for _, u := range []uint64{0, 1, 999, 1_700_000_000_123, math.MaxInt64 - 1, math.MaxUint64} {
		got, err := EncodeTime(DecodeTime(u))
		if err != nil || got != u {
			t.Errorf("EncodeTime(DecodeTime(%d)) = %d, %v", u, got, err)
		}
	}
	// A time reads back as written, truncated to the millisecond.
	at := time.Date(2026, 12, 2, 1, 2, 3, 456_789_012, time.FixedZone("x", 3600))
	u, err := EncodeTime(at)
	if err != nil {
		t.Fatal(err)
	}
	if back := DecodeTime(u); !back.Equal(at.Truncate(time.Millisecond)) || back.UnixMilli() != at.UnixMilli() {
		t.Errorf("DecodeTime(EncodeTime(%v)) = %v, want %v", at, back, at.Truncate(time.Millisecond))
	}
	if !DecodeTime(0).IsZero() {
		t.Errorf("DecodeTime(0) = %v, want the zero Time", DecodeTime(0))
	}
	for _, after := range []time.Time{MaxTime, MaxTime.Add(time.Hour), time.Unix(math.MaxInt64/2, 0)} {
		if u, err := EncodeTime(after); err != nil || u != math.MaxUint64 {
			t.Errorf("EncodeTime(%v) = %d, %v; want the largest encoding", after, u, err)
		}
	}
	if !DecodeTime(math.MaxInt64).Equal(MaxTime) || !DecodeTime(math.MaxUint64).Equal(MaxTime) {
		t.Errorf("encodings past MaxTime decode to %v and %v, want MaxTime", DecodeTime(math.MaxInt64), DecodeTime(math.MaxUint64))
	}
}

func TestTimeBeforeEpochIsInvalid(t *testing.T) {
	for _, before := range []time.Time{time.Unix(0, -1), time.UnixMilli(-1), time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}.Add(time.Nanosecond)} {
		if u, err := EncodeTime(before); !errors.Is(err, ErrInvalid) {
			t.Errorf("EncodeTime(%v) = %d, %v; want ErrInvalid", before, u, err)
		}
		caps := Capabilities{MaxBatchOps: 10, MaxKeyBytes: 10, MaxValueBytes: 10, MaxBatchBytes: 100}
		for name, b := range map[string]*Batch{
			"WakeAt":         NewBatch().Put(Key("k"), nil).WakeAt(before),
			"SetWake":        NewBatch().SetWake(time.Time{}, before),
			"WakeIs":         NewBatch().SetWake(before, t0.Add(5*time.Millisecond)),
			"SetWakeCeiling": NewBatch().SetWakeCeiling(time.Time{}, t0.Add(10*time.Millisecond), before),
		} {
			if err := b.Validate(caps); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s(%v): Validate = %v, want ErrInvalid", name, before, err)
			}
		}
		for name, q := range map[string]DueQuery{"From": {From: before, Until: t0.Add(5 * time.Millisecond), Limit: 1}, "Until": {Until: before, Limit: 1}} {
			if _, err := q.Check(1); !errors.Is(err, ErrInvalid) {
				t.Errorf("DueQuery.%s %v: Check = %v, want ErrInvalid", name, before, err)
			}
		}
	}
}
