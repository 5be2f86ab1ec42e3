// Command etcd is upstream etcd's server main, built from the Go module proxy
// at the version kubernetes itself pins, so tests need no downloaded binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
