// Package riverbench compares firing due timers with timers.Scheduler on
// the embedded bbolt engine against working scheduled jobs with River on
// SQLite (github.com/riverqueue/river with riverdriver/riversqlite over
// modernc.org/sqlite, a pure-Go SQLite): the peer a Go developer would
// pick for durable jobs in one process. It is a module of its own so that
// the library's go.mod carries none of River's or SQLite's dependencies;
// it has no code but its tests and benchmarks (see README.md).
package riverbench
