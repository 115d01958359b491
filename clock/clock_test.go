package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestManualMovesOnlyWhenTold(t *testing.T) {
	var m Manual
	if got := m.Now(); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("zero Manual reads %v, want the epoch", got)
	}
	m.Advance(250 * time.Millisecond)
	if got, want := m.Now(), time.Unix(0, 0).Add(250*time.Millisecond); !got.Equal(want) {
		t.Fatalf("zero Manual after 250ms: %v, want %v", got, want)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Set(t0)
	m.Advance(250 * time.Millisecond)
	if got, want := m.Now(), t0.Add(250*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Set(t0)+250ms: %v, want %v", got, want)
	}
	m.Set(t0.Add(-time.Hour))
	if got, want := m.Now(), t0.Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("Set moves backwards too: %v, want %v", got, want)
	}
	if got := NewManual(t0).Now(); !got.Equal(t0) {
		t.Fatalf("NewManual(%v) reads %v", t0, got)
	}
}

func TestRealIsTheWallClock(t *testing.T) {
	before := time.Now()
	got := Real{}.Now()
	if got.Before(before) || got.Sub(before) > time.Minute {
		t.Fatalf("Real.Now() = %v, wall clock %v", got, before)
	}
}

func TestSleep(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"zero", context.Background(), 0, nil},
		{"negative", context.Background(), -time.Second, nil},
		{"short", context.Background(), time.Millisecond, nil},
		{"ended, zero", cancelled, 0, context.Canceled},
		// Only the cancellation can end an hour's wait within the test.
		{"ended, an hour", cancelled, time.Hour, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Sleep(c.ctx, c.d); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Fatalf("Sleep(%v) = %v, want %v", c.d, err, c.want)
			}
		})
	}
	t.Run("ended while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Millisecond, cancel)
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep = %v, want context.Canceled", err)
		}
	})
}
