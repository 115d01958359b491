// Package concurrency holds the tests that run the outbox writer, the
// timers scheduler and the relay side by side, in goroutines, on
// fdbsim's MVCC engine: transactions that overlap and conflict as they
// would on a FoundationDB cluster. It has no code of its own.
package concurrency
