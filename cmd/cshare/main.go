// Command cshare is the one binary of cshare, the peer-to-peer compute mesh:
// `cshare node run` is the daemon, and every other command is a thin client
// of the local node's HTTP API. All behaviour lives in package
// github.com/cshare/cshare/cmd/cshare/cli, which this file only calls.
package main

import (
	"os"

	"github.com/cshare/cshare/cmd/cshare/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
