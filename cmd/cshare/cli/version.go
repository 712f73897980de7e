package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is `cshare version --json`.
type versionInfo struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	Revision string `json:"revision,omitempty"`
}

func (a *app) versionCmd() *cobra.Command {
	c := &cobra.Command{Use: "version", Short: "Print the version of this binary", Args: exactArgs()}
	return showCmd(a, c, "print the version as JSON",
		func(*cobra.Command, []string) (versionInfo, error) {
			v := versionInfo{Version: agentVersion, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						v.Revision = s.Value
					}
				}
			}
			return v, nil
		},
		func(v versionInfo) error {
			rev := ""
			if v.Revision != "" {
				rev = " " + short(v.Revision)
			}
			_, err := fmt.Fprintf(a.stdout, "cshare %s%s (%s %s)\n", v.Version, rev, v.Go, v.Platform)
			return err
		})
}
