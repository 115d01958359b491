// Package schema declares the domain of the reference service
// (mkit_server, a Git hosting server): its partition kinds,
// its reservations and their terminal outcomes, and a coordinator's lease
// table of ref shards. cmd/codegen generates package refdomain from it.
//
// It is a schema like any importing project's: its own namespace, key
// tags from 100 up, nothing the library's runtime needs. The library's
// runtime records (relay rows, scan state, timers, leases, backlog,
// outcome timer, watermark checkpoint) are package
// github.com/mkit-dev/mkitfdb/schema, generated into gen; the handlers
// that serve this domain (outcome delivery, the coordinator watermark)
// use both.
//
//mk:namespace refdomain
package schema
