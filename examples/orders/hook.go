package orders

import (
	"net/http"
	"time"
)

// Timeouts of the service's webhook server (HookServer).
const (
	// HookHeaderTimeout bounds the time a client takes to send a request's
	// headers.
	HookHeaderTimeout = 5 * time.Second
	// HookReadTimeout bounds the time a client takes to send a whole
	// request; the outcome.Receiver in front of the handler bounds the
	// body within it (ReceiverConfig.BodyTimeout).
	HookReadTimeout = 30 * time.Second
	// HookWriteTimeout bounds the time from the end of a request's
	// headers to the end of its answer.
	HookWriteTimeout = 30 * time.Second
	// HookIdleTimeout bounds the time a kept-alive connection waits for
	// its next request.
	HookIdleTimeout = 2 * time.Minute
)

// HookServer returns the HTTP server of the service's webhook, serving h
// (an outcome.Receiver's Wrap in front of the service's handler) on addr,
// with every timeout set: a server without them lets a client that sends
// its headers or body slowly, or not at all, hold a connection and a
// goroutine for as long as it likes.
func HookServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: HookHeaderTimeout,
		ReadTimeout:       HookReadTimeout,
		WriteTimeout:      HookWriteTimeout,
		IdleTimeout:       HookIdleTimeout,
	}
}
