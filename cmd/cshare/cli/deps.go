package cli

import (
	"context"

	"github.com/cshare/cshare/node"
	"github.com/cshare/cshare/smartshare"
)

// The packages the CLI runs in-process rather than through the API. Tests
// replace these variables.
var (
	// runNode runs the node daemon until ctx is cancelled or it is stopped.
	runNode = func(ctx context.Context, o runOptions) error {
		return node.Run(ctx, node.Options{
			DataDir:           o.DataDir,
			API:               o.API,
			Listen:            o.Listen,
			ConfigPath:        o.ConfigPath,
			HeartbeatInterval: o.HeartbeatInterval,
			Name:              o.Name,
			Logger:            o.Logger,
		})
	}
	// runPlan is `cshare smartshare plan`.
	runPlan = smartshare.RunPlanCommand
	// agentVersion is the version of this binary.
	agentVersion = node.Version
)
