package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/node/api"
)

func (a *app) memberCmd() *cobra.Command {
	return group("member", "List members, join with an invite, change roles, remove, leave",
		a.memberLsCmd(), a.memberJoinCmd(), a.memberSetRoleCmd(), a.memberRemoveCmd(), a.memberLeaveCmd())
}

func (a *app) memberLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the org's members and their roles", Args: exactArgs()}
	return viewCmd(a, c, "print the members as a JSON array",
		func(ctx context.Context, cl *api.Client, _ []string) ([]api.MemberInfo, error) {
			return cl.Members(ctx)
		},
		func(ms []api.MemberInfo) error {
			var t table
			t.row("ID", "NAME", "ROLE", "MACHINES", "JOINED")
			for _, m := range ms {
				t.row(short(m.ID), orDash(m.Name), m.Role, fmt.Sprint(m.Machines), a.ago(m.Joined))
			}
			return t.write(a.stdout)
		})
}

func (a *app) memberJoinCmd() *cobra.Command {
	var code, name, user string
	var asJSON bool
	c := &cobra.Command{
		Use:   "join --invite CODE",
		Short: "Join this node to an org with an invite code (as node join --org-key)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			code = strings.TrimSpace(code)
			if code == "" {
				return usagef(cmd, "--invite is required: the code that cshare org invite printed")
			}
			return a.join(cmd, code, name, user, asJSON)
		},
	}
	c.Flags().StringVar(&code, "invite", "", "the invite code (required)")
	c.Flags().StringVar(&name, "name", "", "this machine's name in the org")
	addUserName(c, &user)
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return c
}

func (a *app) memberSetRoleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set-role ID ROLE",
		Short: "Change a member's role: member or admin (admins)",
		Args:  exactArgs("ID", "ROLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			role := strings.ToLower(args[1])
			if role != "member" && role != "admin" && role != "owner" {
				return usagef(cmd, "ROLE: %q is not a role; use member or admin", args[1])
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			m, err := cl.SetRole(cmd.Context(), args[0], role)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "member %s is now %s\n", m.ID, orDash(m.Role))
			return err
		},
	}
}

func (a *app) memberRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a member from the org (admins)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			removed, err := cl.RemoveMember(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "removed member %s\n", removed)
			return err
		},
	}
}
