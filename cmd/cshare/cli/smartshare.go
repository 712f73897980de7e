package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) smartshareCmd() *cobra.Command {
	return group("smartshare", "Ask the SmartShare balancer what it would do",
		a.smartsharePlanCmd())
}

func (a *app) smartsharePlanCmd() *cobra.Command {
	var input string
	var asJSON bool
	c := &cobra.Command{
		Use:   "plan --input FILE",
		Short: "Plan a farm described in a JSON file, without a running node",
		Long: `Read a scenario (org SmartShare config, machines with slots, jobs, running
instances) from a JSON file and print the plan the balancer computes: the
target instances, the preemptions and the plan hash. Bad input is one line
on stderr and exit code 2. No node is needed.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(input) == "" {
				return usagef(cmd, "--input is required: the scenario JSON file")
			}
			if err := runPlan(input, asJSON, a.stdout); err != nil {
				return &exitError{code: 2, err: err}
			}
			return nil
		},
	}
	c.Flags().StringVar(&input, "input", "", "the scenario JSON file, or - for standard input (required)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	return c
}
