package cli

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// specText checks that a command and --env fit in one ledger entry, as
// the node does (jobspec.CheckSpecText), naming --env when env is the
// larger part.
func specText(cmd []string, env map[string]string) error {
	err := jobspec.CheckSpecText(cmd, env)
	var e *jobspec.Error
	if errors.As(err, &e) && e.Field == "env" {
		return flagErr(err, "--env")
	}
	return err
}

// fieldFlags maps the API's field names (JSON keys, and the job spec's
// field names the node's checks use) to the CLI's flags, so that an API
// error about one field is printed naming the flag the user typed:
// "--memory: ..." for offer create's memory_mb.
var fieldFlags = map[string]string{
	"cores": "cores", "cores_milli": "cores", "memory": "memory", "memory_mb": "memory", "disk_mb": "disk",
	"range": "range", "range_start": "range", "range_end": "range", "priority": "priority", "cpus": "cpus",
	"max_cpus": "max-cpus", "gpus": "gpus", "retries": "retries", "driver": "driver", "image": "image",
	"env": "env", "name": "name", "datasets": "dataset", "for_ms": "for", "min_duration_ms": "min-duration",
	"until": "until", "price": "price", "disk_price": "disk-price", "onstart": "onstart", "order": "order",
	"confirm": "confirm", "user_name": "user-name", "role": "role", "uses": "uses", "at": "at", "item": "item",
}

// flagMessage is an API error's message with its field renamed to cmd's
// flag for it: a message that starts "memory_mb: " starts "--memory: ".
// A field cmd has no flag for, or a message that does not start with its
// field, is left as it is.
func flagMessage(cmd *cobra.Command, se *api.StatusError) string {
	flag, ok := fieldFlags[se.Field]
	if !ok || cmd == nil || cmd.Flags().Lookup(flag) == nil {
		return se.Msg
	}
	if rest, ok := strings.CutPrefix(se.Msg, se.Field+": "); ok {
		return "--" + flag + ": " + rest
	}
	return se.Msg
}
