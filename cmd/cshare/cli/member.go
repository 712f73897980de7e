package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

func (a *app) memberCmd() *cobra.Command {
	return group("member", "List members, join with an invite, change roles, remove, leave",
		a.memberLsCmd(), a.memberJoinCmd(), a.memberSetRoleCmd(), a.memberRemoveCmd(), a.memberLeaveCmd())
}

func (a *app) memberLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the org's members (persons), their roles and machines", Args: exactArgs()}
	return listCmd(a, c, "members", []string{"ID", "NAME", "ROLE", "MACHINES", "JOINED"},
		func(ctx context.Context, cl *api.Client, _ []string, p api.Page, emit func(api.MemberInfo) error) error {
			return cl.EachMember(ctx, p, emit)
		},
		func(m api.MemberInfo) []string {
			return []string{short(m.ID), orDash(m.Name), m.Role, machineList(m.Machines), a.ago(m.Joined)}
		},
		func(m api.MemberInfo) string { return m.ID })
}

// maxListedMachines is how many machines a member ls row names; more are
// counted.
const maxListedMachines = 3

// machineList is a member's machines for a table: their short IDs, the
// first few and a count of the rest.
func machineList(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	var parts []string
	for i, id := range ids {
		if i == maxListedMachines {
			parts = append(parts, fmt.Sprintf("+%d more", len(ids)-i))
			break
		}
		parts = append(parts, short(id))
	}
	return strings.Join(parts, ",")
}

// personRef is "NAME (ID)", or the ID alone when the name is unknown.
func personRef(id, name string) string {
	switch {
	case id == "":
		return "-"
	case name == "" || name == id:
		return id
	}
	return name + " (" + id + ")"
}

func (a *app) memberJoinCmd() *cobra.Command {
	var code string
	c := &cobra.Command{Use: "join --invite CODE", Short: "Join this node to an org with an invite code (as node join --org-key)"}
	c.Flags().StringVar(&code, "invite", "", "the invite code (required)")
	return a.joinCmd(c, func(cmd *cobra.Command) (string, error) {
		code = strings.TrimSpace(code)
		if code == "" {
			return "", usagef(cmd, "--invite is required: the code that cshare org invite printed")
		}
		return code, nil
	})
}

func (a *app) memberSetRoleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set-role PERSON ROLE",
		Short: "Make a member an admin, or an admin a member (the owner only)",
		Long: `Make a member an admin, or an admin a member. Only the owner promotes and
demotes admins. PERSON is a member's ID (or a unique prefix or suffix of at
least 4 characters) or name, as cshare member ls shows them; members are
persons, not machines. Ownership moves with cshare org transfer --to PERSON.`,
		Args: exactArgs("PERSON", "ROLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			role := strings.ToLower(args[1])
			if role == "owner" {
				return usagef(cmd, "ROLE: owner is not given with set-role; the owner hands ownership to an admin with: cshare org transfer --to PERSON")
			}
			if role != "member" && role != "admin" {
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
			_, err = fmt.Fprintf(a.stdout, "member %s is now %s\n", text.Escape(personRef(m.ID, m.Name)), orDash(m.Role))
			return err
		},
	}
}

func (a *app) memberRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove PERSON",
		Short: "Remove a member (a person) and every machine of theirs (admins; admins only by the owner)",
		Args:  exactArgs("PERSON"),
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
