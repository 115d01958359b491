// Command mkitfdb is the operator's command of a store of this library:
// it shows what is queued where (partitions, timers, lag, get, scan,
// quarantined) and repairs a held queue deliberately (quarantine,
// restore, unblock, redrive). It decodes the library's rows and those of
// the schemas linked into it: the reference domain's and the examples';
// a service builds its own, with its schemas linked, from package admin.
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

	// The schemas it decodes besides the library's own.
	_ "github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	_ "github.com/mkit-dev/mkitfdb/refdomain"
)

func main() { os.Exit(admin.Main(admin.Config{})) }
