package orders

import (
	"log/slog"

	"github.com/mkit-dev/mkitfdb/evolve"
	"github.com/mkit-dev/mkitfdb/examples/orders/ordersgen"
	"github.com/mkit-dev/mkitfdb/store"
)

// MigrationOrderV2 is the name of the migration UpgradeOrders returns: its
// checkpoint's key, for ever.
const MigrationOrderV2 = "orders.order-v2"

// UpgradeOrders returns the migration that rewrites every stored order as
// an OrderV2 (evolve.KeyClassMigration over OrderKey's class in every
// partition of the orders namespace, which parts lists: fdblayer's Layer
// does), through Values: an OrderV1 is upgraded, an OrderV2 kept, an order
// of a newer version or corrupt left and logged to log. Its pages refuse
// to run while the store's format of orders is below 2 (an OrderV2 would
// not be written). Readers never need it: it is for a service that wants
// its old rows in the newest version. Run it with an evolve.Runner, or with
// the service's command: orders-admin migrate orders.order-v2.
//
// It fails as evolve.KeyClassMigration does.
func UpgradeOrders(s store.Store, parts evolve.PartitionLister, log *slog.Logger) (evolve.Migration, error) {
	start, end := ordersgen.ClassRange(ordersgen.TagOrderKey)
	return evolve.KeyClassMigration(s, parts, evolve.KeyClassConfig{
		Name:      MigrationOrderV2,
		Namespace: ordersgen.SchemaNamespace,
		Start:     start,
		End:       end,
		Rewrite:   evolve.Upgrade(Values.Decode, Values.Encode),
		Requires:  ordersgen.FormatOrderV2,
		Logger:    log,
	})
}
