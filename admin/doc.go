// Package admin is the operator's command of a store of this library:
// it shows what is queued where and why it is held, and repairs a held
// queue deliberately. cmd/mkitfdb is this package with the library's, the
// reference domain's and the examples' schemas linked in; a service
// builds its own, whose views decode its keys and records by name, by
// linking its generated packages:
//
//	// Command myservice-admin is mkitfdb for myservice's store.
//	package main
//
//	import (
//		"os"
//
//		"github.com/mkit-dev/mkitfdb/admin"
//		"github.com/mkit-dev/mkitfdb/timers"
//
//		_ "example.com/myservice/shopgen" // registers its schema
//	)
//
//	func main() {
//		os.Exit(admin.Main(admin.Config{KindNames: map[timers.Kind]string{1000: "ship"}}))
//	}
//
// ([Config] names the service's timer kinds, and [NewCommand] builds the
// command for a program that runs it itself.) The same views are served
// by the service itself: [NewWebHandler] returns the web view, an
// http.Handler the service mounts on its own mux (see "The web view"
// below).
//
// # Commands
//
// Subcommands in the style of the go tool, each with -h:
//
//	partitions   every partition: outbox sequence, relay backlog (rows, bytes,
//	             the oldest row's queue time), blocked targets and scan state,
//	             timers by kind with the next due time, outcome backlog and
//	             next attempt, wake time (parked: a scheduler's claim),
//	             quarantined rows, dead letters, corrupt rows with the
//	             reason, a scheduler's lease (who, until when)
//	timers       the timers and their state (due, waiting, held, leased by a
//	             scheduler, parked, orphan) and why a due one is not firing;
//	             -kind and -state filter, -due lists what is due now, -dead
//	             the dead letters (attempts, last error, value)
//	lag          the oldest queued row and the most delayed timer of the
//	             store, the partitions due now, leases and dead letters
//	schedulers   the schedulers' memberships and the partition leases they hold
//	get, scan    rows of a partition, decoded by the linked schemas (by tuple
//	             and hex where none knows them)
//	quarantined  the rows moved aside, with who, when and why
//	migrations   every migration: state, partitions and rows done, where it
//	             is, the runner holding it and until when
//	quarantine   move a queue row aside (relay row, pending outcome, timer)
//	restore      put it back
//	unblock      unblock a relay target blocked for the rest of the cycle
//	redrive      move a timer to now, or with -dead make a dead letter a
//	             timer due now
//	delete-dead  delete a dead letter
//	pause        pause a timer kind in every partition (-kind), or one
//	             partition's queues (-partition): nothing paused fires,
//	             fails or moves until resume
//	resume       resume it: the paused timers fire, each once
//	migrate      run a linked migration (Config.Migrations, and the
//	             library's own) from its checkpoint
//
// Every subcommand opens -db FILE (bbolt) or -cluster-file FILE
// (FoundationDB, through Config.OpenCluster: the mkitfdb of module
// fdblayer/fdbengine sets it; a command without it says where that one
// is). Views take -json: one JSON object whose shape
// is stable (fields may be added, none renamed or removed). Partitions and
// keys are written as the views print them: a tuple such as ("orders", 2,
// "ada") or (16, 5), or x:HEX. Text shortens values longer than 64 bytes
// to their first 16 and their length (-full prints them whole); -json
// never shortens. A row's rev is a hash of its value (the first 8 bytes
// of its SHA-256), not a version number: a value written back as it was
// has its old rev.
//
// # Reading without writing
//
// A view never writes. It opens a bbolt file read-only, under bbolt's
// shared lock; bbolt lets one process open a file for writing and no
// other open it meanwhile, so while the service runs, a view of its bbolt
// file is refused at once, in one line naming the holder's pid (exit
// status 2), and the service cannot start while a view reads. On
// FoundationDB views and the service share the cluster freely. What a
// view reads is bounded per partition (-max-rows per queue, counts past
// it say "more than N"), and partitions are listed by a skip-scan of one
// bounded read each (fdblayer's Layer.ListPartitions), so a large store
// streams.
//
// # Repairs
//
// A repair is one guarded batch: the command reads what it will change,
// shows it, and asks for confirmation (-yes, or "yes" typed at a
// terminal; without a terminal and without -yes it refuses). The batch is
// guarded on every row read, and -expect pins the revision (rev) an
// earlier view showed: a row that changed is refused, nothing written
// (exit status 1). Quarantine records who (-who, default the OS user),
// when and why (-reason, required) beside the row it moves, in the
// partition's quarantine range (package quarantine), which no handler
// reads: to its queue the row is gone, and its source resumes. The
// command never deletes a quarantined row; restore puts it back byte for
// byte. What else a repair changes (a relay timer, the outcome backlog, a
// timer's reference entry) is decided by the package that owns the row:
// the command composes relay.QuarantineRow, relay.RestoreRow,
// relay.Unblock, outbox.QuarantinePending, outbox.RestorePending,
// timers.Quarantine, timers.Restore, timers.RedriveTimer, timers.Redrive,
// timers.DeleteDeadLetter, timers.PauseKind, timers.ResumeKind,
// timers.PausePartition and timers.ResumePartition, and encodes none of
// the rows itself. A pause records who, when and why in its row, as a
// quarantine does.
//
// # Migrations
//
// migrate NAME runs a migration of package evolve through its Runner:
// from its checkpoint, page by page, each page guarded, holding the
// migration by a lease (another runner is refused, naming the holder).
// The command links the library's own migrations (the due index's first
// layout, evolve.DueIndexMigration) and those of Config.Migrations, built
// over the store it opened; migrations lists them with every checkpoint
// the store holds. A migration that is done is run again only with
// -again; Ctrl-C stops one after its page in flight, and the same command
// resumes it.
//
// Exit statuses: ExitOK, ExitFailed (the store failed, or a repair was
// refused), ExitUsage (bad input, in one line: nothing written).
//
// # The web view
//
// [NewWebHandler] serves the views from inside the running service, which
// mounts it on its own mux: it reads the service's live store (on bbolt
// while the service holds the file, on FoundationDB alike) through the
// code the command runs, and renders each view as HTML without script,
// reloading itself, or, with ?format=json, as the command's JSON. It is
// read-only unless [WebConfig].Repairs is set; each repair then needs
// [WebConfig].Authorize, is shown in a form before it is written, and is
// written by a POST from the same origin carrying the form's token and
// revision, guarded as the command's. See [WebHandler] and the design note
// in web.go.
package admin
