// Package testlog holds what this module's tests share to capture logs.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger used from several
// goroutines, as a slog handler's writer in tests. The zero value is
// ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
