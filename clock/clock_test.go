package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestManualMovesOnlyWhenTold(t *testing.T) {
	var m Manual
	if got := NowMs(&m); got != 0 {
		t.Fatalf("zero Manual reads %d ms, want the epoch", got)
	}
	m.SetMs(1_000)
	m.Advance(250 * time.Millisecond)
	if got := NowMs(&m); got != 1_250 {
		t.Fatalf("after SetMs(1000)+250ms: %d", got)
	}
	m.Set(time.UnixMilli(5))
	if got := NowMs(&m); got != 5 {
		t.Fatalf("Set moves backwards too: %d", got)
	}
}

func TestMsConversions(t *testing.T) {
	for _, c := range []struct {
		in   time.Time
		want uint64
	}{
		{time.UnixMilli(0), 0},
		{time.UnixMilli(-5), 0},
		{time.UnixMilli(1_700_000_000_123), 1_700_000_000_123},
	} {
		if got := Ms(c.in); got != c.want {
			t.Errorf("Ms(%v) = %d, want %d", c.in, got, c.want)
		}
	}
	if got := FromMs(1 << 63); got.UnixMilli() != 1<<63-1 {
		t.Errorf("FromMs saturates: got %d", got.UnixMilli())
	}
	if got := Ms(FromMs(42)); got != 42 {
		t.Errorf("round trip: %d", got)
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
