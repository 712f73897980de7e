package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// Shell completion (cshare completion bash|zsh|fish, cobra's) completes
// the references of these commands' first argument from the running node:
// job, machine, member, offer, contract and dataset IDs, each with its
// name as the description.
var refArgs = map[string]string{
	"job show": "jobs", "job items": "jobs", "job modify": "jobs", "job cancel": "jobs", "job logs": "jobs", "job ssh": "jobs",
	"machine show": "machines", "machine approve": "machines", "machine reject": "machines", "machine remove": "machines",
	"member set-role": "members", "member remove": "members",
	"offer rm": "offers", "contract create": "offers",
	"contract show": "contracts", "contract extend": "contracts", "contract stop": "contracts", "contract start": "contracts",
	"contract rm": "contracts", "contract ssh": "contracts", "contract ssh-url": "contracts",
	"dataset show": "datasets", "dataset rm": "datasets", "dataset access": "datasets", "dataset get": "datasets", "dataset export": "datasets",
}

// completeRefs sets the completion of refArgs' commands under root.
func (a *app) completeRefs(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		if kind, ok := refArgs[path]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = a.refCompletion(kind)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// refCompletion completes the first argument with the node's refs of
// kind that start with what is typed; nothing (and no file names) when the
// node does not answer within 3 s.
func (a *app) refCompletion(kind string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if a.dataDir == "" {
			a.dataDir = defaultDataDir()
		}
		a.dataDir = expandHome(a.dataDir)
		cl, err := a.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var out []string
		for _, r := range nodeRefs(ctx, cl, kind) {
			if strings.HasPrefix(r[0], toComplete) {
				out = append(out, r[0]+"\t"+r[1])
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// nodeRefs lists the node's refs of kind: each an ID (a dataset's name)
// and its description.
func nodeRefs(ctx context.Context, cl *api.Client, kind string) (out [][2]string) {
	switch kind {
	case "jobs":
		js, _ := cl.Jobs(ctx)
		for _, j := range js {
			out = append(out, [2]string{j.ID, j.Name + " " + j.State})
		}
	case "machines":
		ms, _ := cl.Machines(ctx)
		for _, m := range ms {
			out = append(out, [2]string{m.ID, m.Name + " " + m.Status})
		}
	case "members":
		ms, _ := cl.Members(ctx)
		for _, m := range ms {
			out = append(out, [2]string{m.ID, m.Name + " " + m.Role})
		}
	case "offers":
		os, _ := cl.Offers(ctx, "", "")
		for _, o := range os {
			out = append(out, [2]string{o.ID, o.Machine})
		}
	case "contracts":
		cs, _ := cl.Contracts(ctx)
		for _, c := range cs {
			out = append(out, [2]string{c.ID, c.State})
		}
	case "datasets":
		ds, _ := cl.Datasets(ctx)
		for _, d := range ds {
			out = append(out, [2]string{d.Name, d.CID})
		}
	}
	for i := range out {
		out[i][1] = text.Escape(strings.TrimSpace(out[i][1]))
	}
	return out
}
