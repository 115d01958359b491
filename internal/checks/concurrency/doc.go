// Package concurrency holds the tests that run the outbox writer, the
// timers scheduler and the relay side by side, in goroutines, on
// fdbsim's MVCC engine (transactions that overlap and conflict as they
// would on a FoundationDB cluster) and on the memory and bbolt engines
// made Distributed (calls made side by side that meet one writer). It has
// no code of its own.
package concurrency
