package cli

import (
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"runtime"

	"github.com/spf13/cobra"
)

func (a *app) nodeDashboardCmd() *cobra.Command {
	var open bool
	c := &cobra.Command{
		Use:   "dashboard [--open]",
		Short: "Print (--open: open) a URL that signs this browser in to the node's dashboard",
		Long: `Print the URL that signs in to the local node's dashboard. It carries a
one-time code (not the API token), good for one sign-in within a few
minutes: the node answers it with a session cookie (HttpOnly,
SameSite=Strict) and sends the browser on to the overview. The session
ends when it expires (12 hours) or with Sign out. --open opens the URL
with xdg-open (open on macOS) when there is one.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			code, err := cl.DashboardCode(cmd.Context())
			if err != nil {
				return err
			}
			u := browserBase(cl.Base()) + code.Path
			fmt.Fprintln(a.stdout, u)
			if open {
				if err := openURL(u); err != nil {
					fmt.Fprintf(a.stderr, "--open: %v; open the URL above in a browser\n", err)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&open, "open", false, "open the URL in this machine's browser (xdg-open)")
	return c
}

// openURL opens u with the desktop's opener: xdg-open, or open on macOS.
func openURL(u string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("no %s on this machine", name)
	}
	return exec.Command(bin, u).Run()
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
