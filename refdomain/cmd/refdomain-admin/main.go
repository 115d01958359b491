// Command refdomain-admin is the operator's command of the reference
// domain: mkitfdb (package admin) built with the reference domain's
// schema linked in, so that its views decode the reference domain's
// partitions, keys and records by name (RefPartition, LeasedShardKey,
// ReservationV1, ...). It is how the demo's store (cmd/demo) is read: the
// generic mkitfdb links the library's own schema only.
//
//	go run ./refdomain/cmd/refdomain-admin partitions -db "${TMPDIR:-/tmp}/mkitfdb-demo.db"
package main

import (
	"context"
	"io"
	"os"

	"github.com/mkit-dev/mkitfdb/admin"

	// The reference domain's schema, registered when it is initialised:
	// what the views decode its partitions, keys and records by.
	_ "github.com/mkit-dev/mkitfdb/refdomain"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is the command, apart from the process, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := admin.NewCommand(admin.Config{
		Name:  "refdomain-admin",
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	return c.Run(context.Background(), args)
}
