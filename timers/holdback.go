package timers

import (
	"sync"
	"time"
)

// holdbackLimit bounds the keys a holdback remembers; past it, those whose
// time has passed are forgotten first, then all.
const holdbackLimit = 4096

// holdback holds keys back until a time each: a log line about a corrupt
// row until its interval ends, a partition that failed until its retry
// backoff ends. It remembers at most holdbackLimit keys, so a flood of
// distinct keys costs bounded memory (and at worst an early log line or
// retry). Its zero value is ready; it is safe for concurrent use.
type holdback struct {
	mu    sync.Mutex
	until map[string]uint64
}

// held reports whether key is held back at nowMs.
func (h *holdback) held(key string, nowMs uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.until[key]
	return ok && nowMs < until
}

// hold holds key back from nowMs for d.
func (h *holdback) hold(key string, nowMs uint64, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holdLocked(key, nowMs, d)
}

// any reports whether a key is held back or was until lately: a key
// stays until released or trimmed.
func (h *holdback) any() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.until) > 0
}

// release stops holding key back.
func (h *holdback) release(key string) {
	h.mu.Lock()
	delete(h.until, key)
	h.mu.Unlock()
}

// allow reports whether key is free at nowMs and, if so, holds it back
// for d: an event about key happens at most once per d.
func (h *holdback) allow(key string, nowMs uint64, d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if until, ok := h.until[key]; ok && nowMs < until {
		return false
	}
	h.holdLocked(key, nowMs, d)
	return true
}

func (h *holdback) holdLocked(key string, nowMs uint64, d time.Duration) {
	if len(h.until) >= holdbackLimit {
		for k, until := range h.until {
			if nowMs >= until {
				delete(h.until, k)
			}
		}
		if len(h.until) >= holdbackLimit {
			clear(h.until)
		}
	}
	if h.until == nil {
		h.until = make(map[string]uint64)
	}
	h.until[key] = addMs(nowMs, uint64(d/time.Millisecond))
}
