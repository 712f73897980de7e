package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/node/api"
)

// viewCmd completes c, a list or show command: it fetches a value from the
// node and prints it, with --json as exactly one JSON value, else with
// human (a table or a detail view). IDs and names in args go to the node as
// given; the node resolves them.
func viewCmd[T any](a *app, c *cobra.Command, jsonHelp string,
	fetch func(ctx context.Context, cl *api.Client, args []string) (T, error), human func(T) error) *cobra.Command {
	var asJSON bool
	c.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := a.client()
		if err != nil {
			return err
		}
		v, err := fetch(cmd.Context(), cl, args)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(a.stdout, v)
		}
		return human(v)
	}
	c.Flags().BoolVar(&asJSON, "json", false, jsonHelp)
	return c
}
