// Command orders-admin is the operator's command of the orders service:
// mkitfdb (package admin) built with the service's own schema linked in,
// so that its views decode the service's keys and records by name
// (OrderKey, OrderV1 and OrderV2, RegionOrderKey, IndexEntryV1), name its timer
// kind ("ship"), and that it runs the service's migration (migrate
// orders.order-v2: orders.UpgradeOrders).
//
//	go run ./examples/orders/cmd/orders-admin partitions -db orders.db
package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/mkit-dev/mkitfdb/admin"
	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/examples/orders"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/timers"

	// The service's schema, registered when it is initialised: what the
	// views decode its partitions, keys and records by.
	_ "github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is the command, apart from the process, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := admin.NewCommand(admin.Config{
		Name:      "orders-admin",
		KindNames: map[timers.Kind]string{orders.KindShip: "ship"},
		Migrations: []admin.MigrationFunc{func(l *fdblayer.Layer, log *slog.Logger) (evolve.Migration, error) {
			return orders.UpgradeOrders(l, l, log)
		}},
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	return c.Run(context.Background(), args)
}
