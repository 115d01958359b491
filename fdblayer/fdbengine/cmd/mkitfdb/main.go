// Command mkitfdb is the operator's command of a store of this library
// (package admin), able to open FoundationDB clusters (-cluster-file)
// besides bbolt files (-db): the main module's cmd/mkitfdb with the
// FoundationDB engine linked in, which needs cgo and libfdb_c to build.
// Like that one, it links the library's own schema only; a service builds
// its own, with its schemas linked, setting admin.Config's OpenCluster as
// this one does.
//
//	go -C fdblayer/fdbengine install ./cmd/mkitfdb    # in a clone of the repository
//	mkitfdb partitions -cluster-file /etc/foundationdb/fdb.cluster
//	mkitfdb help
package main

import (
	"os"

	"github.com/mkit-dev/mkitfdb/admin"
	"github.com/mkit-dev/mkitfdb/fdblayer/fdbengine"
	"github.com/mkit-dev/mkitfdb/fdblayer/kv"
)

func main() {
	os.Exit(admin.Main(admin.Config{
		OpenCluster: func(clusterFile string) (kv.Engine, error) {
			return fdbengine.Open(fdbengine.Config{ClusterFile: clusterFile})
		},
	}))
}
