// Package fdbsim runs FoundationDB's transaction semantics in process, for
// tests and benchmarks: code that runs on fdblayer's Layer over
// FoundationDB can be tested against the concurrency and the failures a
// cluster produces, with no cluster.
//
//   - [MVCCEngine] is a [kv.Engine] with FoundationDB's snapshots,
//     optimistic commits and conflicts, its limits and error codes
//     ([FDBError]), seeded unknown commit results and injected latency, and
//     counts of the round trips a cluster would serve ([MVCCStats]).
//   - [InjectFaults] makes any engine's commits conflict, fail or report
//     unknown results, as a [FaultFunc] decides, so that retry logic is
//     tested on the memory and bbolt engines.
//   - [AsDistributed] makes a local engine's Layer spread its due index
//     over the buckets it has on FoundationDB.
//
// It depends on the engine contract (package kv), not on the Layer; no
// production package depends on it.
package fdbsim
