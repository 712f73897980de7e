package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// The node's API access tokens: tokens for tools, each limited to a scope
// and acting for this machine's person.

func (a *app) nodeTokenCmd() *cobra.Command {
	return group("token", "API access tokens for tools: each limited to a scope (read, submit, admin), acting for this machine's person",
		a.tokenCreateCmd(), a.tokenLsCmd(), a.tokenRevokeCmd())
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var req api.TokenCreate
	c := &cobra.Command{Use: "create --scope read|submit|admin --expires D [--name N]",
		Short: "Make an API access token; it is printed once, on the last line",
		Long: `Make an API access token for a tool. It acts for this machine's person,
limited to its scope: read (every GET route), submit (read, and submitting,
modifying and cancelling jobs, datasets and contracts), admin (everything,
like the node's own api.token). The node keeps only its SHA-256 (in
<data-dir>/` + api.TokensFile + `); the token is printed this once. --expires takes
a lifetime such as 12h or 30d. Send it as Authorization: Bearer TOKEN.`,
		Args: exactArgs(),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := api.ParseScope(req.Scope); err != nil {
				return usagef(cmd, "--%v", err)
			}
			if req.Expires == "" {
				return usagef(cmd, "--expires: give how long the token lasts, e.g. 12h or 30d")
			}
			if _, err := api.ParseExpires(req.Expires); err != nil {
				return usagef(cmd, "--%v", err)
			}
			return nil
		}}
	c.Flags().StringVar(&req.Scope, "scope", "", "what the token may do: "+strings.Join(api.ScopeNames, ", "))
	c.Flags().StringVar(&req.Expires, "expires", "", "how long it lasts, e.g. 12h or 30d")
	c.Flags().StringVar(&req.Name, "name", "", "a name to know it by")
	return viewCmd(a, c, "print the token as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.TokenCreated, error) {
			return cl.CreateToken(ctx, req)
		},
		func(t api.TokenCreated) error {
			_, err := fmt.Fprintf(a.stdout, "token %s (%s), expires %s; it is shown this once:\n%s\n", t.ID, t.Scope, t.Expires.Format("2006-01-02 15:04:05Z07:00"), t.Token)
			return err
		})
}

func (a *app) tokenLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the node's API access tokens (never their secrets)", Args: exactArgs()}
	return listCmd(a, c, "tokens", []string{"ID", "NAME", "SCOPE", "CREATED", "EXPIRES"},
		func(ctx context.Context, cl *api.Client, _ []string, _ api.Page, emit func(api.TokenInfo) error) error {
			ts, err := cl.Tokens(ctx)
			if err != nil {
				return err
			}
			for _, t := range ts {
				if err := emit(t); err != nil {
					return err
				}
			}
			return nil
		},
		func(t api.TokenInfo) []string {
			exp := t.Expires.Format("2006-01-02 15:04")
			if t.Expired {
				exp += " (expired)"
			}
			return []string{t.ID, orDash(text.Escape(t.Name)), t.Scope, a.ago(t.Created.Format(time.RFC3339)), exp}
		},
		func(t api.TokenInfo) string { return t.ID })
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	c := &cobra.Command{Use: "revoke ID", Short: "Revoke an API access token: it stops working at once", Args: exactArgs("ID")}
	return viewCmd(a, c, "print the revoked token as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.TokenInfo, error) {
			return cl.RevokeToken(ctx, args[0])
		},
		func(t api.TokenInfo) error {
			_, err := fmt.Fprintf(a.stdout, "revoked %s\n", t.ID)
			return err
		})
}
