package cli

import (
	"fmt"
	"net"
	"net/url"

	"github.com/spf13/cobra"
)

func (a *app) nodeDashboardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dashboard",
		Short: "Print the URL that opens this node's dashboard in a browser",
		Long: `Print the URL that opens the local node's dashboard. It carries the API
token once: the node answers it with a cookie (HttpOnly, SameSite=Strict)
and sends the browser on to the same page without the token. Treat the URL
as the token itself.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			if _, err := status(cmd.Context(), cl); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s/?token=%s\n", browserBase(cl.Base()), url.QueryEscape(cl.Token()))
			return nil
		},
	}
}

// browserBase is base with an unspecified host (an API bound to 0.0.0.0 or
// [::]) replaced by localhost, which a browser on this machine can open.
func browserBase(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		u.Host = net.JoinHostPort("localhost", u.Port())
	}
	return u.String()
}
