// Package evolve keeps what a store needs for its schemas to evolve while
// processes of two binaries share it: a format per namespace, the history
// of its raises, the formats each live process knows, and migrations that
// rewrite stored rows and resume where they stopped. Its rows live
// in a partition of the library's own, [Partition], so they work on every
// store and every engine.
//
// # Formats
//
// Each record version, union variant and enum constant of a schema
// declares the store format of its namespace that introduced it (format=N
// in the schema, 1 by default; see package schema), and a generated
// package knows the largest it declares (registry.Schema.Format). A store
// keeps its format of each namespace (gen.StoreFormatKey; a namespace
// without one is at 1): the newest format in which the namespace's rows
// may be written. Writers write the newest version the store's format
// allows (a family's Encode(v, store.FormatOf(s, namespace))), so that no
// process writes a version another running process cannot read; readers
// read every version their binary knows.
//
// # The gate
//
// [OpenGate] opens a process's [Gate] on a store: it reads the formats and
// refuses a store whose format of a namespace the binary links is newer
// than the binary knows, in one line ([NewerFormatError]: deploy a binary
// that knows it), and writes the process's row (gen.ProcessKey: the
// formats its binary knows, live for four refreshes). In the background
// it reads the formats again and renews the row every GateConfig.Refresh
// (10 s), until [Gate.Close] deletes the row. A gate that sees a format
// raised past what its binary knows (a process paused through a raise)
// fences the store: [Gate.Fenced] returns the error every write must fail
// with ([ErrNewerFormat], which wraps store.ErrUnavailable), and it is
// logged once a refresh. fdblayer's Layer opens a gate at Open and closes
// it at Close, answers [store.Formats] from it, and refuses writes while
// it is fenced: the gate travels with the store, so no handler needs one
// passed to it.
//
// A new store (fdblayer.Open on an engine that holds nothing under the
// Layer's root) starts at the formats its first binary knows, recorded in
// the history; a store that holds rows and no format row is at format 1
// for every namespace, which every binary reads.
//
// # Raising a format
//
// [Gate.Raise] raises a namespace's format by one, for good, once every
// live process knows the new format: one guarded batch that requires the
// format row still at the one below, every live process row that links
// the namespace to know the new one (each guarded, so a process that
// starts meanwhile makes the raise read again), and records who raised it,
// when and why (gen.FormatRaisedKey). It refuses a process that does not
// know the format, naming it, unless forced past processes known to be
// dead. The operator's command raises with mkitfdb formats raise, and
// shows the formats, the history and the live processes with mkitfdb
// formats. [ReadStatus] reads them.
//
// A rolling deploy of a schema change that needs a new format: deploy the
// binary that knows it (it writes the older versions while the store's
// format is the older one, so the binaries it replaces read everything it
// writes); once no process of the older binary is live, raise the format;
// from the raise on, binaries write the new version, and a binary that
// does not know the format refuses to start. Roll back freely before the
// raise; after it, only to binaries that know the format. The README's
// "Evolving a schema" says it step by step.
//
// # Migrations
//
// A [Migration] rewrites stored rows a page at a time ([Migration.Step]:
// one guarded batch of one partition, or one engine transaction for what
// spans partitions, within the store's limits; a page is idempotent). A
// [Runner] runs it from its checkpoint (gen.MigrationKey in [Partition]),
// written after each page in a batch guarded on the checkpoint as the
// runner last wrote it and holding a lease, so one runner advances and a
// second stops with a [LeaseError]; a crash between a page and its
// checkpoint runs the page again, which finds its rows done.
// [KeyClassMigration] rewrites or moves a key class's rows partition by
// partition ([Upgrade], [Retag]), writing at the store's format of the
// namespace (store.FormatOf) and never over a value a writer changed
// since the page read it; [RenamePartitionsMigration] moves partitions to
// new identities; [DueIndexMigration] moves the due index's first layout.
// [Progress] and [Migrations] read the checkpoints; the operator's command
// shows them with mkitfdb migrations and runs one with mkitfdb migrate.
package evolve
