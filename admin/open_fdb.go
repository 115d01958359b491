//go:build fdb

package admin

import "github.com/mkit-dev/mkitfdb/fdblayer"

func init() {
	openFDB = func(clusterFile string) (fdblayer.Engine, error) { return fdblayer.OpenFDBEngine(clusterFile) }
}
