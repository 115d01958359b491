// Package clock is the one source of time for the library: every component
// that reads the time takes a [Clock], so tests drive time with a [Manual] clock
// and never sleep. It deals in time.Time and time.Duration only: the
// milliseconds stored data holds are store.EncodeTime and store.DecodeTime.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the current time. Implementations are safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Manual is a clock that moves only when told to. The zero value reads the
// Unix epoch. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a manual clock reading t.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's current reading.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.now.IsZero() {
		return time.UnixMilli(0)
	}
	return m.now
}

// Set moves the clock to t (backwards too: tests of clock skew need it).
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.now = t
	m.mu.Unlock()
}

// Advance moves the clock forward by d.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	if m.now.IsZero() {
		m.now = time.UnixMilli(0)
	}
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// Sleep waits d in real time, or until ctx ends, and then returns ctx's
// error (nil when d passed first; ctx's error at once when d <= 0 and ctx
// has ended). It is the one real-time wait of the library, for backoffs
// that a test bounds with a small d or ends by cancelling ctx. Safe for
// concurrent use.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
