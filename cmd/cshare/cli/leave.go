package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// leaveTimeout is how long `member leave` and `org delete` wait for the node
// to report no org.
const leaveTimeout = 60 * time.Second

func (a *app) memberLeaveCmd() *cobra.Command {
	var purge bool
	c := &cobra.Command{
		Use:   "leave [--purge]",
		Short: "Leave the org: your person and all your machines; this node then is in no org",
		Long: `Leave the org: this machine's person is removed from it, with every machine
of theirs, and this node starts again in no org (it can then create or join
another). The org's data on this machine is kept aside in
<data-dir>/orgs/<org-id>, or deleted with --purge. The owner cannot leave:
transfer the org first (cshare org transfer --to PERSON).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			res, err := cl.Leave(cmd.Context(), purge)
			if err != nil {
				return err
			}
			return a.waitNoOrg(cmd, res, "left")
		},
	}
	c.Flags().BoolVar(&purge, "purge", false, "delete the org's data on this machine instead of keeping it aside")
	return c
}

func (a *app) orgDeleteCmd() *cobra.Command {
	var confirm string
	var purge bool
	c := &cobra.Command{
		Use:   "delete --confirm NAME [--purge]",
		Short: "Delete the org (owner): every node stops its instances and leaves it",
		Long: `Delete the org (the owner only): a tombstone entry goes to every machine of
the org; each stops the org's instances, removes their containers, stops
gossiping for it and starts again in no org. A machine that is down now does
the same when it comes back. --confirm must repeat the org's name. The org's
data on this machine is kept aside in <data-dir>/orgs/<org-id>, or deleted
with --purge (other machines keep theirs aside).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Compared exactly, by the node: "acme\t" is not "acme".
			if confirm == "" {
				return usagef(cmd, "--confirm is required: the org's name, typed again")
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			res, err := cl.DeleteOrg(cmd.Context(), confirm, purge)
			if err != nil {
				return err
			}
			return a.waitNoOrg(cmd, res, "deleted")
		},
	}
	c.Flags().StringVar(&confirm, "confirm", "", "the org's name, typed again (required)")
	c.Flags().BoolVar(&purge, "purge", false, "delete the org's data on this machine instead of keeping it aside")
	return c
}

// waitNoOrg waits until the node reports no org (it restarts on the way,
// so errors in between are expected), then says where the data went.
func (a *app) waitNoOrg(cmd *cobra.Command, res api.LeftOrg, verb string) error {
	ctx := cmd.Context()
	if res.Warning != "" {
		fmt.Fprintf(a.stderr, "cshare: warning: %s\n", text.Escape(oneLine(res.Warning)))
	}
	name := text.Escape(res.OrgName)
	start := time.Now()
	deadline := start.Add(leaveTimeout)
	said := false
	for {
		// Dialled again each time: the node writes api.addr again when it
		// has started in no org.
		if cl, err := a.client(); err == nil {
			if st, err := status(ctx, cl); err == nil && st.Org == "" {
				break
			}
		}
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("the node did not report leaving org %s within %s (waited for node status to show no org); see its log", name, leaveTimeout)
		}
		if !said && now.Sub(start) > 2*time.Second {
			said = true
			fmt.Fprintf(a.stderr, "waiting for the node to leave org %s (stop its instances, move its data aside, start in no org)\n", name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(a.stopInterval):
		}
	}
	where := "its data on this machine is kept in " + text.Escape(res.Archive)
	if res.Purged {
		where = "its data on this machine was deleted (--purge)"
	}
	_, err := fmt.Fprintf(a.stdout, "%s org %s (%s); this node is in no org now; %s\n", verb, name, res.Org, where)
	return err
}
