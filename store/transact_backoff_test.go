package store

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestJitterBounds: the n-th wait lies in [0, min(hi, lo << n)), without
// overflow for any n, and reaches well into its range.
func TestJitterBounds(t *testing.T) {
	for _, c := range []struct {
		name   string
		lo, hi time.Duration
		n      int
		ceil   time.Duration
	}{
		{"first", 2 * time.Millisecond, time.Second, 0, 2 * time.Millisecond},
		{"doubles", 2 * time.Millisecond, time.Second, 3, 16 * time.Millisecond},
		{"capped", 2 * time.Millisecond, time.Second, 10, time.Second},
		{"exactly at cap", time.Millisecond, 8 * time.Millisecond, 3, 8 * time.Millisecond},
		{"shift past width", time.Millisecond, time.Second, 200, time.Second},
		{"largest bounds", math.MaxInt64, math.MaxInt64, 5, math.MaxInt64},
		{"zero lo", 0, time.Second, 7, 0},
		{"zero", 0, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var most time.Duration
			for range 2000 {
				d := jitter(c.lo, c.hi, c.n)
				if d < 0 || (c.ceil == 0 && d != 0) || (c.ceil > 0 && d >= c.ceil) {
					t.Fatalf("jitter(%v, %v, %d) = %v, want in [0, %v)", c.lo, c.hi, c.n, d, c.ceil)
				}
				most = max(most, d)
			}
			// 2000 uniform draws all below half the range: p = 2^-2000.
			if c.ceil > 1 && most < c.ceil/2 {
				t.Errorf("jitter(%v, %v, %d): largest of 2000 draws %v, want some in the upper half of [0, %v)", c.lo, c.hi, c.n, most, c.ceil)
			}
		})
	}
}

// TestTransactConfigDefaults: a zero field takes its default, -1 turns
// retries or backoff off, and a field out of its range is named.
func TestTransactConfigDefaults(t *testing.T) {
	for _, c := range []struct {
		name string
		in   TransactConfig
		want TransactConfig
		bad  string // the field an invalid config names
	}{
		{"zero", TransactConfig{}, TransactConfig{Retries: DefaultTransactRetries, MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff}, ""},
		{"no retries", TransactConfig{Retries: -1}, TransactConfig{Retries: 0, MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff}, ""},
		{"no backoff", TransactConfig{Retries: 3, MinBackoff: -1}, TransactConfig{Retries: 3}, ""},
		{"min over the default max", TransactConfig{MinBackoff: time.Second}, TransactConfig{Retries: DefaultTransactRetries, MinBackoff: time.Second, MaxBackoff: time.Second}, ""},
		{"max under the default min", TransactConfig{MaxBackoff: time.Millisecond}, TransactConfig{Retries: DefaultTransactRetries, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, ""},
		{"both", TransactConfig{Retries: 2, MinBackoff: time.Millisecond, MaxBackoff: time.Second}, TransactConfig{Retries: 2, MinBackoff: time.Millisecond, MaxBackoff: time.Second}, ""},
		{"min over max", TransactConfig{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, TransactConfig{}, "MinBackoff"},
		{"negative max", TransactConfig{MaxBackoff: -1}, TransactConfig{}, "MaxBackoff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.withDefaults()
			if c.bad != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.bad) {
					t.Fatalf("withDefaults(%+v) = %+v, %v; want ErrInvalid naming %s", c.in, got, err, c.bad)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("withDefaults(%+v) = %+v, %v; want %+v", c.in, got, err, c.want)
			}
		})
	}
}
