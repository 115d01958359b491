// Package tracing holds the tests that follow one trace across the queue:
// a writer's span, the rows it queues in one batch (a relay row and an
// outcome), the relay's delivery to the target, the outcome's webhook
// delivery with a failed attempt, a process stopped between attempts and
// the retry of another, and the partner's Receiver, over HTTP, with the
// OpenTelemetry SDK's span recorder; the same at format 1 of the library's
// namespace, where rows carry no trace context; and with no tracer
// provider, where nothing is recorded and nothing allocated. It has no
// code of its own.
package tracing
