package cli

import (
	"context"

	"github.com/cshare/cshare/node"
	"github.com/cshare/cshare/smartshare"
)

// runNodeDaemon runs the node daemon until ctx is cancelled or it is
// stopped: what `cshare node run` does in-process (app.runNode; tests give
// the app another).
func runNodeDaemon(ctx context.Context, o runOptions) error {
	return node.Run(ctx, node.Options{
		DataDir:           o.DataDir,
		API:               o.API,
		Listen:            o.Listen,
		ConfigPath:        o.ConfigPath,
		HeartbeatInterval: o.HeartbeatInterval,
		Name:              o.Name,
		Logger:            o.Logger,
		APITLSCert:        o.APITLSCert,
		APITLSKey:         o.APITLSKey,
		APIInsecureRemote: o.APIInsecureRemote,
		Now:               o.Now,
		Bootstrap:         o.Bootstrap,
	})
}

// The packages the CLI runs in-process rather than through the API.
var (
	// runPlan is `cshare smartshare plan`.
	runPlan = smartshare.RunPlanCommand
	// agentVersion is the version of this binary.
	agentVersion = node.Version
)
