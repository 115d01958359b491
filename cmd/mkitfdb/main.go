// Command mkitfdb is the operator's command of a store of this library:
// it shows what is queued where (partitions, timers, lag, get, scan,
// quarantined) and repairs a held queue deliberately (quarantine,
// restore, unblock, redrive). It links the library's own schema only, so
// it decodes the library's rows and shows every other schema's partitions
// as not linked; a service builds its own command from package admin,
// with its schemas' generated packages linked, which decodes its keys and
// records by name (examples/orders/cmd/orders-admin).
//
//	go install ./cmd/mkitfdb    # in a clone of the repository
//	mkitfdb partitions -db state.db
//	mkitfdb help
//
// It opens bbolt files (-db) and links no FoundationDB client; asked for
// -cluster-file, it says in one line how to get the mkitfdb that opens
// clusters: the same command in the FoundationDB engine's module,
//
//	go -C fdblayer/fdbengine install ./cmd/mkitfdb    # in a clone of the repository
package main

import (
	"os"

	"github.com/mkit-dev/mkitfdb/admin"
)

func main() { os.Exit(admin.Main(admin.Config{})) }
